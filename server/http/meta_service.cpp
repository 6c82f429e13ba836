#include "meta_service.hpp"

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
               [](const Request& r, const auto&) { return healthz(r); });
    router.add("GET", "/readyz", Access::open,
               [this](const Request& r, const auto&) { return readyz(r); });
    router.add("GET", "/api", Access::landing,
               [](const Request& r, const auto&) { return api(r); });
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
               [](const Request& r, const auto&) { return healthz(r); });
}

int MetaService::check_ready() {
    static const Statement st{"schema_version",
                              "SELECT coalesce(max(version), 0) FROM trackd.schema_migrations"};
    const int version = std::stoi(ctx_.pool.run(st).at(0, 0));
    const int expected = db::expected_schema_version();
    if (version != expected) {
        throw ProblemError(ProblemKind::unavailable,
                           "the database schema is at version " + std::to_string(version) +
                               ", this trackd needs " + std::to_string(expected) +
                               "; run `trackd migrate`");
    }
    return version;
}

Response MetaService::readyz(const Request& req) {
    req.query.only({});
    auto& ready = core::metrics::gauge(
        "trackd_ready", "1 when the database answers with the schema version trackd needs");
    int version = 0;
    try {
        version = check_ready();
    } catch (...) {
        ready.set(0);
        throw;
    }
    ready.set(1);
    JsonWriter w;
    w.begin_object();
    w.key("status").value("ready");
    w.key("schema_version").value(version);
    w.end_object();
    return json_response(w.take());
}

Response MetaService::metrics(const Request& req) {
    req.query.only({});
    try {
        readyz(req);
    } catch (const std::exception&) {  // NOLINT(bugprone-empty-catch): trackd_ready says it
    }
    Response r;
    r.content_type = std::string(core::metrics::kContentType);
    r.body = core::metrics::render_process_metrics();
    return r;
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
