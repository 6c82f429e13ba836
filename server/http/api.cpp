#include "api.hpp"

namespace trackd::http {

Api::Api(const config::Config& config, std::string fallback_host)
    : http_(config.http),
      auth_(config.http.tokens),
      pool_(PoolSettings{config.http.pg_dsn.empty() ? config.pg.dsn : config.http.pg_dsn,
                         config.http.pool_size, config.http.statement_timeout_ms,
                         config.pg.connect_timeout_s}),
      primary_pool_(config.http.pg_dsn.empty()
                        ? nullptr
                        : std::make_unique<ConnectionPool>(PoolSettings{
                              config.pg.dsn, config.http.pool_size,
                              config.http.statement_timeout_ms, config.pg.connect_timeout_s})),
      ctx_{pool_, primary_pool_ ? *primary_pool_ : pool_, http_, std::move(fallback_host),
           primary_pool_ != nullptr},
      router_(auth_, config.http.open_landing_pages),
      metrics_router_(auth_, config.http.open_landing_pages),
      vehicles_(ctx_),
      geofences_(ctx_),
      features_(ctx_),
      events_(ctx_),
      tiles_(ctx_),
      meta_(ctx_) {
    // Order matters where patterns overlap: /v1/vehicles/nearby before /v1/vehicles/{}.
    meta_.add_routes(router_, config.metrics.listen.empty());
    meta_.add_metrics_routes(metrics_router_);
    vehicles_.add_routes(router_);
    geofences_.add_routes(router_);
    features_.add_routes(router_);
    events_.add_routes(router_);
    tiles_.add_routes(router_);
    map_.add_routes(router_);
}

}  // namespace trackd::http
