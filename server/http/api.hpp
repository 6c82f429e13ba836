// The whole HTTP API without the sockets: the router with every service and the access rules.
//
// Contract: handle() turns one Request into one Response, as a coroutine on the caller's executor
// (the request must live until it completes); it never throws (see Router). Built
// once from the configuration; thread-safe (services hold no per-request state, the pool locks).
// The pool connects lazily, so an Api can be built, and answer everything that needs no
// database (404, 405, 401, 400 for bad parameters), with PostgreSQL down. With http.pg_dsn the
// reads go to that server (a streaming replica) and geofence writes to pg.dsn.
#pragma once

#include <memory>
#include <string>

#include "trackd/config/config.hpp"

#include "auth.hpp"
#include "connection_pool.hpp"
#include "event_service.hpp"
#include "features_service.hpp"
#include "geofence_service.hpp"
#include "map_service.hpp"
#include "meta_service.hpp"
#include "router.hpp"
#include "service_context.hpp"
#include "tile_service.hpp"
#include "vehicle_service.hpp"

namespace trackd::http {

class Api {
  public:
    Api(const config::Config& config, std::string fallback_host);
    Api(const Api&) = delete;
    Api& operator=(const Api&) = delete;

    [[nodiscard]] boost::asio::awaitable<Response> handle(const Request& req) const {
        return router_.handle(req);
    }
    // The metrics.listen address: /metrics and /healthz only.
    [[nodiscard]] boost::asio::awaitable<Response> handle_metrics(const Request& req) const {
        return metrics_router_.handle(req);
    }

    // Server::stop(), once its loops have stopped: see ConnectionPool::stop().
    void stop() {
        pool_.stop();
        if (primary_pool_) primary_pool_->stop();
    }

  private:
    config::HttpConfig http_;
    Authenticator auth_;
    ConnectionPool pool_;                           // reads
    std::unique_ptr<ConnectionPool> primary_pool_;  // writes, when reads go to a replica
    ServiceContext ctx_;
    Router router_;
    Router metrics_router_;
    VehicleService vehicles_;
    GeofenceService geofences_;
    FeaturesService features_;
    EventService events_;
    TileService tiles_;
    MapService map_;
    MetaService meta_;
};

}  // namespace trackd::http
