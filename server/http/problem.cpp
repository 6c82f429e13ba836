#include "problem.hpp"

#include <array>

#include "json_writer.hpp"

namespace trackd::http {
namespace {

constexpr std::array<ProblemKindInfo, 15> kKinds = {{
    {ProblemKind::bad_request, 400, "bad-request", "Malformed HTTP request"},
    {ProblemKind::bad_parameter, 400, "bad-parameter", "Invalid parameter"},
    {ProblemKind::bad_body, 400, "bad-body", "Invalid request body"},
    {ProblemKind::unauthorized, 401, "unauthorized", "Bearer token required"},
    {ProblemKind::forbidden, 403, "forbidden", "Insufficient scope"},
    {ProblemKind::not_found, 404, "not-found", "No such path"},
    {ProblemKind::resource_not_found, 404, "resource-not-found", "No such resource"},
    {ProblemKind::method_not_allowed, 405, "method-not-allowed", "Method not allowed"},
    {ProblemKind::request_timeout, 408, "request-timeout", "Request not received in time"},
    {ProblemKind::payload_too_large, 413, "payload-too-large", "Request body too large"},
    {ProblemKind::unsupported_media_type, 415, "unsupported-media-type",
     "Unsupported content type"},
    {ProblemKind::invalid_geometry, 422, "invalid-geometry", "Invalid geometry"},
    {ProblemKind::headers_too_large, 431, "headers-too-large", "Request headers too large"},
    {ProblemKind::internal, 500, "internal", "Internal error"},
    {ProblemKind::unavailable, 503, "unavailable", "Service unavailable"},
}};

}  // namespace

const ProblemKindInfo& info(ProblemKind kind) {
    for (const auto& k : kKinds) {
        if (k.kind == kind) return k;
    }
    return kKinds.back();
}

std::string problem_json(const Problem& p, std::string_view instance) {
    const auto& k = info(p.kind);
    JsonWriter w;
    w.begin_object();
    w.key("type").value("urn:trackd:problem:" + std::string(k.slug));
    w.key("title").value(k.title);
    w.key("status").value(k.status);
    w.key("detail").value(p.detail);
    if (!p.parameter.empty()) w.key("parameter").value(p.parameter);
    w.key("instance").value(instance);
    w.end_object();
    return w.take();
}

void bad_parameter(const std::string& name, const std::string& problem) {
    throw ProblemError(ProblemKind::bad_parameter, name + ": " + problem, name);
}

}  // namespace trackd::http
