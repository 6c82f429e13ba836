// The endpoints about the service itself: /healthz (the process answers), /readyz (the
// database answers with the schema version this build needs; with a read replica, both servers
// do and the replica is not too far behind), /api (the OpenAPI document) and
// /metrics (Prometheus text format; it sets trackd_ready to what /readyz would answer now).
#pragma once

#include <optional>

#include "router.hpp"
#include "service_context.hpp"

namespace trackd::http {

class MetaService {
  public:
    explicit MetaService(ServiceContext& ctx) : ctx_(ctx) {}
    // `with_metrics`: also /metrics (when metrics.listen is empty).
    void add_routes(Router& router, bool with_metrics);
    // The routes of the metrics.listen address: /metrics and /healthz.
    void add_metrics_routes(Router& router);

    static Response healthz(const Request& req);
    boost::asio::awaitable<Response> readyz(const Request& req);
    static Response api(const Request& req);
    boost::asio::awaitable<Response> metrics(const Request& req);

  private:
    // Throws ProblemError (503) unless the database answers with the expected schema version
    // (with a replica: both do, and the replica's lag is within http.replica_max_lag_ms).
    struct Readiness {
        int schema_version = 0;
        std::optional<double> replica_lag_s;
    };
    boost::asio::awaitable<Readiness> check_ready();
    // The read replica's replay lag in seconds; sets trackd_http_replica_lag_seconds.
    boost::asio::awaitable<double> replica_lag_s();
    ServiceContext& ctx_;
};

// server/http/openapi.json, embedded at build time (cmake/EmbedText.cmake).
extern const char* const kOpenApiDocument;

}  // namespace trackd::http
