// Routing: path pattern + method -> handler, with access control in front.
//
// Contract: handle() never throws and never answers 500 for bad input: an unknown path is 404,
// a known path with another method 405 (with Allow), a missing/unknown token 401, too small a
// scope 403, and a ProblemError from the handler becomes its problem document. Only an
// unexpected exception (a bug, or a database error other than timeout/unreachable) is a 500,
// and it is logged. Patterns are segment lists where "{}" matches any one segment; literal
// segments are tried before "{}" ones because routes are matched in the order added.
// Every request handled is counted in trackd_http_requests_total{route,method,status} and timed
// in trackd_http_request_duration_seconds{route}, labelled by the route's PATTERN
// ("/v1/vehicles/{}"), never by the raw path, so that the label set stays bounded; requests that
// match no route are labelled route="unmatched", method="other".
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "auth.hpp"
#include "problem.hpp"
#include "request.hpp"

namespace trackd::http {

// Who may call a route.
enum class Access {
    open,     // anyone (health checks)
    landing,  // anyone when http.open_landing_pages, else a read token
    read,     // a read or write token
    write,    // a write token
};

// `args` holds the segments that matched "{}", in order. A handler is a coroutine on the I/O
// thread's executor: it waits for the database without holding the thread (ConnectionPool::run).
// `req` and `args` live until it completes. Write each co_await as a statement of its own
// (`const auto r = co_await …;`, `co_return co_await …;`), with its arguments in named variables:
// GCC 12 miscompiles co_await inside a condition, a ?: or a braced argument list.
using Handler = std::function<boost::asio::awaitable<Response>(
    const Request& req, const std::vector<std::string>& args)>;

class Router {
  public:
    Router(const Authenticator& auth, bool open_landing_pages)
        : auth_(auth), open_landing_pages_(open_landing_pages) {}

    void add(const std::string& method, const std::string& pattern, Access access, Handler handler);

    // `req` must live until the answer is there.
    [[nodiscard]] boost::asio::awaitable<Response> handle(const Request& req) const;

  private:
    struct Route {
        std::string method;
        std::vector<std::string> pattern;
        std::string pattern_text;
        Access access;
        Handler handler;
    };
    struct Matched {
        std::string route = "unmatched";
        std::string method = "other";
    };
    [[nodiscard]] boost::asio::awaitable<Response> dispatch(const Request& req,
                                                            Matched& matched) const;
    [[nodiscard]] boost::asio::awaitable<Response> handle_unmeasured(const Request& req,
                                                                     Matched& matched) const;

    const Authenticator& auth_;
    bool open_landing_pages_;
    std::vector<Route> routes_;
};

// The response for a problem; `instance` is the request path.
Response problem_response(const Problem& p, const std::string& instance);

// A handler's answer that needs no waiting, as the coroutine a Handler returns.
inline boost::asio::awaitable<Response> ready(Response r) { co_return r; }

}  // namespace trackd::http
