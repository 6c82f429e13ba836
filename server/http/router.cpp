#include "router.hpp"

#include <chrono>
#include <set>

#include "trackd/core/log.hpp"
#include "trackd/core/metrics.hpp"
#include "trackd/db/connection.hpp"

#include "problem.hpp"

namespace trackd::http {
namespace {

std::vector<std::string> split_pattern(const std::string& pattern) {
    std::vector<std::string> out;
    std::size_t start = 1;
    while (start <= pattern.size()) {
        auto end = pattern.find('/', start);
        if (end == std::string::npos) end = pattern.size();
        if (end > start) out.push_back(pattern.substr(start, end - start));
        start = end + 1;
    }
    return out;
}

bool matches(const std::vector<std::string>& pattern, const std::vector<std::string>& segments,
             std::vector<std::string>& args) {
    if (pattern.size() != segments.size()) return false;
    args.clear();
    for (std::size_t i = 0; i < pattern.size(); ++i) {
        if (pattern[i] == "{}") {
            args.push_back(segments[i]);
        } else if (pattern[i] != segments[i]) {
            return false;
        }
    }
    return true;
}

}  // namespace

Response problem_response(const Problem& p, const std::string& instance) {
    Response r;
    r.status = info(p.kind).status;
    r.content_type = "application/problem+json";
    r.body = problem_json(p, instance);
    if (p.kind == ProblemKind::unauthorized) {
        r.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"trackd\"");
    } else if (p.kind == ProblemKind::forbidden) {
        r.headers.emplace_back("WWW-Authenticate",
                               "Bearer realm=\"trackd\", error=\"insufficient_scope\", "
                               "scope=\"write\"");
    }
    return r;
}

void Router::add(const std::string& method, const std::string& pattern, Access access,
                 Handler handler) {
    routes_.push_back({method, split_pattern(pattern), pattern, access, std::move(handler)});
}

boost::asio::awaitable<Response> Router::dispatch(const Request& req, Matched& matched) const {
    std::vector<std::string> args;
    std::set<std::string> allowed;
    for (const auto& route : routes_) {
        if (!matches(route.pattern, req.segments, args)) continue;
        matched.route = route.pattern_text;
        if (route.method != req.method) {
            allowed.insert(route.method);
            continue;
        }
        matched.method = route.method;
        // Open routes ignore the Authorization header altogether: a health probe with a stale
        // token must still see the health.
        switch (route.access) {
            case Access::open:
                break;
            case Access::landing:
                if (!open_landing_pages_) {
                    Authenticator::require(auth_.identify(req.authorization), Scope::read);
                }
                break;
            case Access::read:
                Authenticator::require(auth_.identify(req.authorization), Scope::read);
                break;
            case Access::write:
                Authenticator::require(auth_.identify(req.authorization), Scope::write);
                break;
        }
        co_return co_await route.handler(req, args);
    }
    if (allowed.empty()) {
        throw ProblemError(ProblemKind::not_found,
                           "no endpoint at " + req.path + " (see /api for the list)");
    }
    std::string allow;
    for (const auto& m : allowed) allow += (allow.empty() ? "" : ", ") + m;
    Response r = problem_response(
        {ProblemKind::method_not_allowed, req.method + " is not allowed here; use " + allow, ""},
        req.path);
    r.headers.emplace_back("Allow", allow);
    co_return r;
}

boost::asio::awaitable<Response> Router::handle(const Request& req) const {
    const auto start = std::chrono::steady_clock::now();
    Matched matched;
    Response r = co_await handle_unmeasured(req, matched);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    core::metrics::counter("trackd_http_requests_total",
                           "HTTP requests answered, by route pattern, method and status",
                           {{"route", matched.route},
                            {"method", matched.method},
                            {"status", std::to_string(r.status)}})
        .inc();
    core::metrics::histogram("trackd_http_request_duration_seconds",
                             "Time to handle an HTTP request (routing to response body), by route",
                             core::metrics::exponential_buckets(0.0005, 2, 16),  // 0.5 ms .. 16 s
                             {{"route", matched.route}})
        .observe(seconds);
    co_return r;
}

boost::asio::awaitable<Response> Router::handle_unmeasured(const Request& req,
                                                           Matched& matched) const {
    try {
        co_return co_await dispatch(req, matched);
    } catch (const ProblemError& e) {
        if (e.problem().kind == ProblemKind::internal) {
            core::log::error("http: internal error",
                             {{"path", req.path}, {"error", e.problem().detail}});
        }
        co_return problem_response(e.problem(), req.path);
    } catch (const db::DbError& e) {
        core::log::error("http: database error",
                         {{"path", req.path}, {"sqlstate", e.sqlstate()}, {"error", e.what()}});
        co_return problem_response(
            e.retryable()
                ? Problem{ProblemKind::unavailable, "the database is busy; retry", ""}
                : Problem{ProblemKind::internal, "a database error occurred; it was logged", ""},
            req.path);
    } catch (const std::exception& e) {
        core::log::error("http: internal error", {{"path", req.path}, {"error", e.what()}});
        co_return problem_response(
            {ProblemKind::internal, "an internal error occurred; it was logged", ""}, req.path);
    }
}

}  // namespace trackd::http
