#include "meta_service.hpp"

#include <fmt/format.h>

#include "trackd/core/metrics.hpp"
#include "trackd/core/version.hpp"
#include "trackd/db/migrations.hpp"

#include "json_writer.hpp"
#include "params.hpp"
#include "problem.hpp"

namespace trackd::http {

void MetaService::add_routes(Router& router, bool with_metrics) {
    if (with_metrics) {
        router.add("GET", "/metrics", Access::open,
                   [this](const Request& r, const auto&) { return metrics(r); });
    }
    router.add("GET", "/healthz", Access::open,
               [](const Request& r, const auto&) { return ready(healthz(r)); });
    router.add("GET", "/readyz", Access::open,
               [this](const Request& r, const auto&) { return readyz(r); });
    router.add("GET", "/api", Access::landing,
               [](const Request& r, const auto&) { return ready(api(r)); });
}

Response MetaService::healthz(const Request& req) {
    req.query.only({});
    JsonWriter w;
    w.begin_object();
    w.key("status").value("ok");
    w.key("version").value(core::version());
    w.end_object();
    return json_response(w.take());
}

void MetaService::add_metrics_routes(Router& router) {
    router.add("GET", "/metrics", Access::open,
               [this](const Request& r, const auto&) { return metrics(r); });
    router.add("GET", "/healthz", Access::open,
               [](const Request& r, const auto&) { return ready(healthz(r)); });
}

namespace {

boost::asio::awaitable<int> check_schema(ConnectionPool& pool, const char* which) {
    static const Statement st{"schema_version",
                              "SELECT coalesce(max(version), 0) FROM trackd.schema_migrations"};
    const auto r = co_await pool.run(st);
    const int version = std::stoi(r.at(0, 0));
    const int expected = db::expected_schema_version();
    if (version != expected) {
        throw ProblemError(ProblemKind::unavailable,
                           std::string(which) + " schema is at version " + std::to_string(version) +
                               ", this trackd needs " + std::to_string(expected) +
                               "; run `trackd migrate`");
    }
    co_return version;
}

}  // namespace

boost::asio::awaitable<double> MetaService::replica_lag_s() {
    // How far replay is behind what the replica received: 0 when it has replayed everything it
    // received (now() - pg_last_xact_replay_timestamp() alone keeps growing on an idle
    // primary), else the age of the last transaction it replayed. 0 on a server that is not a
    // standby.
    static const Statement st{
        "replica_lag",
        "SELECT CASE WHEN NOT pg_is_in_recovery() OR pg_last_wal_receive_lsn() IS NOT DISTINCT "
        "FROM pg_last_wal_replay_lsn() THEN 0 ELSE coalesce(greatest(0, extract(epoch FROM "
        "clock_timestamp() - pg_last_xact_replay_timestamp())), 0) END::float8"};
    const auto r = co_await ctx_.pool.run(st);
    const double lag = std::stod(r.at(0, 0));
    core::metrics::gauge("trackd_http_replica_lag_seconds",
                         "How far the read replica (http.pg_dsn) replays behind what it received")
        .set(lag);
    co_return lag;
}

boost::asio::awaitable<MetaService::Readiness> MetaService::check_ready() {
    Readiness out;
    const char* const which = ctx_.replica ? "the read replica's (http.pg_dsn)" : "the database";
    out.schema_version = co_await check_schema(ctx_.pool, which);
    if (!ctx_.replica) co_return out;
    (void)co_await check_schema(ctx_.primary, "the primary's (pg.dsn)");
    const double lag = co_await replica_lag_s();
    out.replica_lag_s = lag;
    const int max_ms = ctx_.http.replica_max_lag_ms;
    if (max_ms > 0 && lag * 1000 > max_ms) {
        throw ProblemError(
            ProblemKind::unavailable,
            fmt::format("the read replica (http.pg_dsn) replays {:.1f} s behind what "
                        "it received, more than http.replica_max_lag_ms ({} ms)",
                        lag, max_ms));
    }
    co_return out;
}

boost::asio::awaitable<Response> MetaService::readyz(const Request& req) {
    req.query.only({});
    auto& ready = core::metrics::gauge(
        "trackd_ready", "1 when the database answers with the schema version trackd needs");
    Readiness r;
    try {
        r = co_await check_ready();
    } catch (...) {
        ready.set(0);
        throw;
    }
    ready.set(1);
    JsonWriter w;
    w.begin_object();
    w.key("status").value("ready");
    w.key("schema_version").value(r.schema_version);
    if (r.replica_lag_s) w.key("replica_lag_s").value(*r.replica_lag_s);
    w.end_object();
    co_return json_response(w.take());
}

boost::asio::awaitable<Response> MetaService::metrics(const Request& req) {
    req.query.only({});
    try {
        (void)co_await readyz(req);
    } catch (const std::exception&) {  // NOLINT(bugprone-empty-catch): trackd_ready says it
    }
    Response r;
    r.content_type = std::string(core::metrics::kContentType);
    r.body = core::metrics::render_process_metrics();
    co_return r;
}

Response MetaService::api(const Request& req) {
    req.query.only({"f"});
    check_format(req.query);
    Response r;
    r.content_type = "application/vnd.oai.openapi+json;version=3.0";
    r.body = kOpenApiDocument;
    return r;
}

}  // namespace trackd::http
