// A parsed HTTP request and the response to it, independent of Beast, so that routing, access
// control and parameter validation are tested without sockets.
//
// Contract: parse_target() splits a request target into percent-decoded path segments and query
// parameters; it throws ProblemError (400) for malformed escapes, invalid UTF-8, NUL bytes and
// parameters given twice, so that no such text ever reaches SQL or a response.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/awaitable.hpp>

namespace trackd::http {

class QueryParams {
  public:
    QueryParams() = default;
    explicit QueryParams(std::vector<std::pair<std::string, std::string>> items)
        : items_(std::move(items)) {}

    [[nodiscard]] std::optional<std::string> get(std::string_view name) const;
    [[nodiscard]] const std::vector<std::pair<std::string, std::string>>& items() const {
        return items_;
    }
    // Throws 400 naming the first parameter not in `allowed`.
    void only(std::initializer_list<std::string_view> allowed) const;

  private:
    std::vector<std::pair<std::string, std::string>> items_;
};

struct Request {
    std::string method;                 // "GET", "PUT", ...
    std::string path;                   // as received, without the query
    std::vector<std::string> segments;  // decoded; a trailing empty segment is dropped
    QueryParams query;
    std::string host;           // Host header (validated), used to build absolute links
    std::string authorization;  // Authorization header; never logged
    std::string content_type;
    std::string last_event_id;  // Last-Event-ID header (Server-Sent Events resume)
    std::string if_none_match;  // If-None-Match header (conditional GET of tiles)
    std::string body;
};

// A response body that goes on after the first bytes (Server-Sent Events). The session sends
// the response's `body` first, then awaits next() on its loop: text to send now, or empty
// when there is nothing yet (it asks again after poll_interval(), and sends a comment line
// after heartbeat() of silence). The stream ends when the client goes, the server stops, or
// next() throws. The connection is not reused afterwards.
class BodyStream {
  public:
    BodyStream() = default;
    virtual ~BodyStream() = default;
    BodyStream(const BodyStream&) = delete;
    BodyStream& operator=(const BodyStream&) = delete;
    // The next bytes to send (empty: nothing new); a coroutine, so that it may read the
    // database without holding the I/O thread.
    virtual boost::asio::awaitable<std::string> next() = 0;
    [[nodiscard]] virtual std::chrono::milliseconds poll_interval() const = 0;
    [[nodiscard]] virtual std::chrono::milliseconds heartbeat() const = 0;
};

struct Response {
    int status = 200;
    std::string content_type = "application/json";
    std::string body;
    std::vector<std::pair<std::string, std::string>> headers;
    std::shared_ptr<BodyStream> stream;  // set: `body` is only the beginning
};

// A JSON (application/json) or GeoJSON (application/geo+json) response.
Response json_response(std::string body, int status = 200);
Response geojson_response(std::string body, int status = 200);

struct Target {
    std::string path;
    std::vector<std::string> segments;
    QueryParams query;
    std::string authority;  // of an absolute-form target (RFC 9112 3.2.2), else ""
};

// An origin-form target ("/path?query"), or an absolute-form one ("http://host/path?query"),
// which a server must accept too; its authority then stands for the Host header.
Target parse_target(std::string_view target);

// Percent-decoding ('+' is a space only in query strings); nullopt if an escape is malformed.
std::optional<std::string> percent_decode(std::string_view s, bool plus_is_space);

// Percent-encoding of one path segment or query value (RFC 3986 unreserved kept).
std::string percent_encode(std::string_view s);

bool valid_utf8(std::string_view s);

// A header's value as a problem's detail may quote it: as it is when it is UTF-8, percent-encoded
// otherwise, since no text but UTF-8 reaches a response (Beast admits any byte above 0x7F in a
// header's value).
std::string quotable(std::string_view header_value);

}  // namespace trackd::http
