// trackd's one HTTP client (Boost.Beast, TLS through Boost.Asio SSL and OpenSSL), for the
// services trackd calls: the Iceberg REST catalog (archive/) and the schema registry
// (registry/). Blocking, one connection per request.
//
// Contract: send() returns any answer the server gave, whatever its status; it throws
// HttpRequestError when no answer came, saying at which step (resolve, connect, TLS handshake,
// send, read the answer) and whether any of the request had left by then (sent(): the server
// may have received all of it and acted on it) or not. Resolving, connecting and the TLS
// handshake are bounded by connect_timeout; sending and reading the answer by read_timeout.
//
// https:// is verified, always: the server's chain against the system's trust store (or, when
// TlsOptions::ca_file is set, against the certificates in that file alone, like curl's
// --cacert), its name (or IP address) against the certificate's, and its validity dates. SNI is
// sent for host names. There is no switch to turn verification off: a private CA or a
// self-signed certificate goes in ca_file, and a catalog token sent to an unverified server is a
// token given away.
//
// Thread-safe: send() may be called from several threads at once (no state is shared between
// calls but the TLS context, which OpenSSL allows).
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>

namespace trackd::net {

// "http[s]://[user:password@]host[:port][/path]". path has no trailing slash ("" for none);
// port defaults to 80 or 443; an IPv6 host is written [::1] and kept without brackets.
struct Uri {
    std::string scheme;  // "http" or "https"
    std::string userinfo;
    std::string host;
    std::string port;
    std::string path;

    [[nodiscard]] bool tls() const { return scheme == "https"; }
    // scheme://host:port, for messages (never the userinfo).
    [[nodiscard]] std::string origin() const;
    // The Host header sent for it: an IPv6 address in brackets, the port only when not the
    // scheme's default (what a request signature over the Host header must use too).
    [[nodiscard]] std::string host_header() const;
};
// Throws std::invalid_argument for anything but an http:// or https:// URI with a host.
Uri parse_uri(const std::string& text);

struct TlsOptions {
    std::string ca_file;  // PEM; empty: the system's trust store
    // The setting ca_file comes from, named in certificate errors (e.g. "archive.rest_ca_file").
    std::string ca_setting;
};

struct HttpOptions {
    std::chrono::milliseconds connect_timeout{10000};
    std::chrono::milliseconds read_timeout{30000};
    std::size_t body_limit = std::size_t{256} << 20U;
    TlsOptions tls;
};

struct HttpResponse {
    int status = 0;
    std::string body;
};

class HttpRequestError : public std::runtime_error {
  public:
    HttpRequestError(const std::string& where, std::string step, std::string detail, bool sent)
        : std::runtime_error(where + ": " + step + ": " + detail),
          step_(std::move(step)),
          detail_(std::move(detail)),
          sent_(sent) {}
    [[nodiscard]] bool sent() const { return sent_; }
    [[nodiscard]] const std::string& step() const { return step_; }
    [[nodiscard]] const std::string& detail() const { return detail_; }

  private:
    std::string step_;
    std::string detail_;
    bool sent_;
};

class HttpClient {
  public:
    // Loads the trust store (throws std::runtime_error naming tls.ca_setting when ca_file
    // holds no certificate OpenSSL can read).
    explicit HttpClient(HttpOptions options);
    ~HttpClient();
    HttpClient(const HttpClient&) = delete;
    HttpClient& operator=(const HttpClient&) = delete;
    HttpClient(HttpClient&&) noexcept;
    HttpClient& operator=(HttpClient&&) noexcept;

    // `target` is the path (and query) after the URI's host; headers are added as given.
    HttpResponse send(const Uri& uri, const std::string& method, const std::string& target,
                      const std::string& body = {}, const std::string& content_type = {},
                      const std::map<std::string, std::string>& headers = {}) const;

  private:
    struct Tls;
    HttpOptions options_;
    std::unique_ptr<Tls> tls_;
};

// application/x-www-form-urlencoded and URI query escaping.
std::string url_encode(const std::string& text);

}  // namespace trackd::net
