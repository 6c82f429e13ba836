#include "trackd/net/http_client.hpp"

#include <cctype>
#include <future>
#include <memory>
#include <system_error>
#include <thread>
#include <utility>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <fmt/format.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

namespace trackd::net {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;

// Starts one asynchronous operation with `start(handler)`, runs it to its end and returns its
// error: the steps below read like blocking calls, and each has the deadline of the tcp_stream
// (which the TLS stream's reads and writes go through).
template <class Start>
beast::error_code complete(asio::io_context& ioc, Start&& start) {
    beast::error_code result = asio::error::would_block;
    std::forward<Start>(start)(
        [&result](beast::error_code ec, auto&&... /*results*/) { result = ec; });
    ioc.restart();
    ioc.run();
    return result;
}

bool is_ip_address(const std::string& host) {
    beast::error_code ec;
    asio::ip::make_address(host, ec);
    return !ec;
}

// The endpoints of host:port, looked up within `limit` (beast::error::timeout past it). A host
// name is looked up on a thread of its own: getaddrinfo has no deadline and cannot be cancelled
// (asio's resolver cancels only a lookup not yet started), so a DNS server that does not answer
// would hold the caller until the C library gives up. A lookup given up on finishes alone.
tcp::resolver::results_type resolve_within(const std::string& host, const std::string& port,
                                           std::chrono::milliseconds limit, beast::error_code& ec) {
    if (is_ip_address(host)) {  // no lookup: at once
        asio::io_context ioc;
        tcp::resolver resolver(ioc);
        return resolver.resolve(host, port, ec);
    }

    using Answer = std::pair<beast::error_code, tcp::resolver::results_type>;
    auto answer = std::make_shared<std::promise<Answer>>();
    auto future = answer->get_future();
    try {
        std::thread([answer, host, port] {
            asio::io_context own;
            tcp::resolver r(own);
            beast::error_code e;
            auto results = r.resolve(host, port, e);
            answer->set_value({e, std::move(results)});
        }).detach();
    } catch (const std::system_error& e) {
        ec = beast::error_code(e.code().value(), boost::system::system_category());
        return {};
    }
    if (future.wait_for(limit) != std::future_status::ready) {
        ec = beast::error::timeout;
        return {};
    }
    auto [e, results] = future.get();
    ec = e;
    return results;
}

}  // namespace

std::string Uri::origin() const {
    const bool v6 = host.find(':') != std::string::npos;
    return scheme + "://" + (v6 ? "[" + host + "]" : host) + ":" + port;
}

std::string Uri::host_header() const {
    const bool v6 = host.find(':') != std::string::npos;
    const auto name = v6 ? "[" + host + "]" : host;
    return port == (tls() ? "443" : "80") ? name : name + ":" + port;
}

Uri parse_uri(const std::string& text) {
    Uri u;
    std::string rest;
    for (const char* scheme : {"http", "https"}) {
        const std::string prefix = std::string(scheme) + "://";
        if (text.rfind(prefix, 0) == 0) {
            u.scheme = scheme;
            rest = text.substr(prefix.size());
        }
    }
    if (u.scheme.empty()) throw std::invalid_argument("not an http:// or https:// URI: " + text);
    const auto slash = rest.find('/');
    auto authority = rest.substr(0, slash);
    if (slash != std::string::npos) u.path = rest.substr(slash);
    while (!u.path.empty() && u.path.back() == '/') u.path.pop_back();
    if (const auto at = authority.rfind('@'); at != std::string::npos) {
        u.userinfo = authority.substr(0, at);
        authority = authority.substr(at + 1);
    }
    const auto colon = authority.rfind(':');
    if (colon != std::string::npos && authority.find(']', colon) == std::string::npos) {
        u.host = authority.substr(0, colon);
        u.port = authority.substr(colon + 1);
    } else {
        u.host = authority;
        u.port = u.tls() ? "443" : "80";
    }
    if (u.host.size() >= 2 && u.host.front() == '[' && u.host.back() == ']') {
        u.host = u.host.substr(1, u.host.size() - 2);
    }
    if (u.host.empty() || u.port.empty()) throw std::invalid_argument("no host in URI: " + text);
    return u;
}

std::string url_encode(const std::string& text) {
    std::string out;
    for (const unsigned char c : text) {
        if (std::isalnum(c) != 0 || c == '-' || c == '_' || c == '.' || c == '~') {
            out += static_cast<char>(c);
        } else {
            out += fmt::format("%{:02X}", c);
        }
    }
    return out;
}

struct HttpClient::Tls {
    ssl::context context{ssl::context::tls_client};
};

HttpClient::HttpClient(HttpOptions options)
    : options_(std::move(options)), tls_(std::make_unique<Tls>()) {
    auto& ctx = tls_->context;
    SSL_CTX_set_min_proto_version(ctx.native_handle(), TLS1_2_VERSION);
    ctx.set_verify_mode(ssl::verify_peer);
    const auto& t = options_.tls;
    try {
        if (t.ca_file.empty()) {
            ctx.set_default_verify_paths();
        } else {
            ctx.load_verify_file(t.ca_file);
        }
    } catch (const boost::system::system_error& e) {
        throw std::runtime_error(fmt::format(
            "{}: cannot load the trusted certificates{}: {}",
            t.ca_setting.empty() ? std::string("TLS") : t.ca_setting,
            t.ca_file.empty() ? " of the system" : " from '" + t.ca_file + "'", e.what()));
    }
}

HttpClient::~HttpClient() = default;
HttpClient::HttpClient(HttpClient&&) noexcept = default;
HttpClient& HttpClient::operator=(HttpClient&&) noexcept = default;

HttpResponse HttpClient::send(const Uri& uri, const std::string& method, const std::string& target,
                              const std::string& body, const std::string& content_type,
                              const std::map<std::string, std::string>& headers) const {
    const auto where = fmt::format("{} {}{}", method, uri.origin(), target);
    const auto fail = [&](const std::string& step, const beast::error_code& ec,
                          std::chrono::milliseconds limit, bool sent) {
        return HttpRequestError(where, step,
                                ec == beast::error::timeout
                                    ? fmt::format("no answer within {} ms", limit.count())
                                    : ec.message(),
                                sent);
    };

    asio::io_context ioc;
    beast::error_code resolved;
    const auto endpoints = resolve_within(uri.host, uri.port, options_.connect_timeout, resolved);
    if (resolved) throw fail("resolve", resolved, options_.connect_timeout, false);

    bhttp::request<bhttp::string_body> req{bhttp::string_to_verb(method), target, 11};
    req.set(bhttp::field::host, uri.host_header());
    req.set(bhttp::field::user_agent, "trackd");
    req.set(bhttp::field::accept, "application/json");
    if (!content_type.empty()) req.set(bhttp::field::content_type, content_type);
    for (const auto& [k, v] : headers) req.set(k, v);
    req.body() = body;
    req.prepare_payload();

    // Connected (and for https, handshaken): the request goes out, the answer comes back.
    const auto exchange = [&](auto& stream, beast::tcp_stream& tcp) {
        tcp.expires_after(options_.read_timeout);
        std::size_t written = 0;
        auto ec = complete(ioc, [&](auto handler) {
            bhttp::async_write(stream, req,
                               [&written, handler](beast::error_code e, std::size_t n) mutable {
                                   written = n;
                                   handler(e);
                               });
        });
        // Once any byte left, the server may receive the whole request and act on it.
        if (ec) throw fail("send", ec, options_.read_timeout, written > 0);
        beast::flat_buffer buffer;
        bhttp::response_parser<bhttp::string_body> parser;
        parser.body_limit(options_.body_limit);
        tcp.expires_after(options_.read_timeout);
        ec = complete(ioc,
                      [&](auto handler) { bhttp::async_read(stream, buffer, parser, handler); });
        if (ec) throw fail("read the answer", ec, options_.read_timeout, true);
        // One request per connection: closed without waiting for the server's close_notify.
        beast::error_code ignored;
        tcp.socket().shutdown(tcp::socket::shutdown_both, ignored);
        auto res = parser.release();
        return HttpResponse{static_cast<int>(res.result_int()), std::move(res.body())};
    };

    if (!uri.tls()) {
        beast::tcp_stream stream(ioc);
        stream.expires_after(options_.connect_timeout);
        const auto ec =
            complete(ioc, [&](auto handler) { stream.async_connect(endpoints, handler); });
        if (ec) throw fail("connect", ec, options_.connect_timeout, false);
        return exchange(stream, stream);
    }

    beast::ssl_stream<beast::tcp_stream> stream(ioc, tls_->context);
    auto& tcp = beast::get_lowest_layer(stream);
    SSL* ssl = stream.native_handle();
    if (is_ip_address(uri.host)) {
        // No SNI for an address (RFC 6066); the certificate must name the address itself.
        X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), uri.host.c_str());
    } else {
        // SSL_set_tlsext_host_name() without its macro's C cast.
        SSL_ctrl(ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
                 const_cast<char*>(uri.host.c_str()));
        SSL_set1_host(ssl, uri.host.c_str());
    }
    tcp.expires_after(options_.connect_timeout);
    auto ec = complete(ioc, [&](auto handler) { tcp.async_connect(endpoints, handler); });
    if (ec) throw fail("connect", ec, options_.connect_timeout, false);
    tcp.expires_after(options_.connect_timeout);
    ec = complete(ioc,
                  [&](auto handler) { stream.async_handshake(ssl::stream_base::client, handler); });
    if (ec) {
        const auto verify = SSL_get_verify_result(ssl);
        if (verify != X509_V_OK && ec != beast::error::timeout) {
            const auto& t = options_.tls;
            throw HttpRequestError(
                where, "TLS handshake",
                fmt::format(
                    "the server's certificate is not trusted: {} (trusted: {})",
                    X509_verify_cert_error_string(verify),
                    t.ca_file.empty()
                        ? "the system's CA certificates" +
                              (t.ca_setting.empty() ? std::string()
                                                    : "; set " + t.ca_setting + " for a private CA")
                        : t.ca_setting + " = '" + t.ca_file + "'"),
                false);
        }
        throw fail("TLS handshake", ec, options_.connect_timeout, false);
    }
    return exchange(stream, tcp);
}

}  // namespace trackd::net
