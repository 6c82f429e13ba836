// RFC 7807 problem documents: every error trackd's API answers is one of these.
//
// Contract: a Problem is data; ProblemError carries one out of parameter parsing and services
// to the router, which turns it into an `application/problem+json` response. The table in
// problem.cpp (kinds()) is the one list of problem types, their HTTP status and title; docs/api.md
// and the OpenAPI document repeat it.
#pragma once

#include <exception>
#include <string>
#include <string_view>

namespace trackd::http {

enum class ProblemKind {
    bad_request,             // 400: malformed HTTP
    bad_parameter,           // 400: a query or path parameter is malformed or out of range
    bad_body,                // 400: the body is not JSON / not GeoJSON
    unauthorized,            // 401: no or unknown bearer token
    forbidden,               // 403: the token lacks the scope
    not_found,               // 404: no such path
    resource_not_found,      // 404: no such vehicle, zone, collection or feature
    method_not_allowed,      // 405
    request_timeout,         // 408: the request did not arrive within http.read_timeout_ms
    payload_too_large,       // 413: body above http.max_body_bytes
    unsupported_media_type,  // 415: PUT without a JSON content type
    invalid_geometry,        // 422: a geofence GEOS refuses
    headers_too_large,       // 431: headers above http.max_header_bytes
    internal,                // 500: a bug; logged
    unavailable,             // 503: database unreachable, statement timeout, pool exhausted
};

struct ProblemKindInfo {
    ProblemKind kind;
    int status;
    std::string_view slug;   // urn:trackd:problem:<slug>
    std::string_view title;  // the same for every occurrence of the kind (RFC 7807 3.1)
};

const ProblemKindInfo& info(ProblemKind kind);

struct Problem {
    ProblemKind kind = ProblemKind::internal;
    std::string detail;     // what is wrong and how to fix it; names the parameter
    std::string parameter;  // the offending parameter ("bbox", "body"), or empty
};

// The problem document's JSON; `instance` is the request path.
std::string problem_json(const Problem& p, std::string_view instance);

class ProblemError : public std::exception {
  public:
    explicit ProblemError(Problem p) : problem_(std::move(p)) {}
    ProblemError(ProblemKind kind, std::string detail, std::string parameter = {})
        : problem_{kind, std::move(detail), std::move(parameter)} {}
    [[nodiscard]] const Problem& problem() const noexcept { return problem_; }
    [[nodiscard]] const char* what() const noexcept override { return problem_.detail.c_str(); }

  private:
    Problem problem_;
};

// Shorthand for the most common case: a bad query or path parameter.
[[noreturn]] void bad_parameter(const std::string& name, const std::string& problem);

}  // namespace trackd::http
