// A blocking HTTP/1.1 client (Boost.Beast) for the Iceberg REST catalog: one connection per
// request, every step (resolve, connect, send, answer) bounded by the client's timeout.
//
// Contract: send() returns any answer the server gave, whatever its status; it throws
// HttpRequestError when no answer came, saying whether any of the request had left by then
// (sent(): the server may have received all of it and acted on it) or not.
// Thread-safe: no shared state between calls.
#pragma once

#include <chrono>
#include <map>
#include <stdexcept>
#include <string>

namespace trackd::archive {

// "http://host[:port][/path]": path without a trailing slash ("" for none).
struct HttpUri {
    std::string host;
    std::string port = "80";
    std::string path;
};
// Throws std::invalid_argument for anything but an http:// URI with a host.
HttpUri parse_http_uri(const std::string& uri);

struct HttpResponse {
    int status = 0;
    std::string body;
};

class HttpRequestError : public std::runtime_error {
  public:
    HttpRequestError(const std::string& what, bool sent) : std::runtime_error(what), sent_(sent) {}
    [[nodiscard]] bool sent() const { return sent_; }

  private:
    bool sent_;
};

class HttpClient {
  public:
    explicit HttpClient(std::chrono::milliseconds timeout) : timeout_(timeout) {}
    // `target` is the path (and query) after the URI's host; headers are added as given.
    HttpResponse send(const HttpUri& uri, const std::string& method, const std::string& target,
                      const std::string& body = {}, const std::string& content_type = {},
                      const std::map<std::string, std::string>& headers = {}) const;

  private:
    std::chrono::milliseconds timeout_;
};

// application/x-www-form-urlencoded and URI query escaping.
std::string url_encode(const std::string& text);

}  // namespace trackd::archive
