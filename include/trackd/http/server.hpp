// trackd's HTTP API server: Boost.Beast on Asio, serving the fleet endpoints, OGC API -
// Features, the OpenAPI document and health checks from PostGIS (docs/api.md).
//
// Contract: the constructor binds http.listen (throwing core::StartupError naming the key when it
// cannot) but serves nothing until start(), which runs http.threads I/O threads. stop() is
// graceful: it stops accepting, closes idle keep-alive connections, lets requests in progress
// finish (each is bounded by http.statement_timeout_ms) for up to five seconds, then ends the
// threads; it is idempotent and the destructor calls it. Connections to PostgreSQL are opened on
// first use, so start() succeeds while the database is down (/readyz then answers 503).
// start() and stop() are called from one thread (main); requests are served on the I/O threads.
// With metrics.listen set, a second listener on that address serves /metrics and /healthz only
// (and the API listener no longer serves /metrics); with http.enabled false, only that one.
// The server reads the database only through its own pool: it shares no state with ingest.
#pragma once

#include <memory>

#include "trackd/config/config.hpp"

namespace trackd::http {

class Server {
  public:
    explicit Server(const config::Config& config);
    ~Server();
    Server(const Server&) = delete;
    Server& operator=(const Server&) = delete;

    void start();
    void stop();

    // The bound port (useful when http.listen asked for port 0).
    [[nodiscard]] unsigned short port() const;
    // The bound port of metrics.listen (0 when it is empty).
    [[nodiscard]] unsigned short metrics_port() const;

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace trackd::http
