#include "http_client.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <fmt/format.h>

namespace trackd::archive {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace asio = boost::asio;

HttpUri parse_http_uri(const std::string& uri) {
    constexpr std::string_view scheme = "http://";
    if (uri.rfind(scheme, 0) != 0) throw std::invalid_argument("not an http:// URI: " + uri);
    const auto rest = uri.substr(scheme.size());
    const auto slash = rest.find('/');
    const auto authority = rest.substr(0, slash);
    HttpUri u;
    if (slash != std::string::npos) u.path = rest.substr(slash);
    while (!u.path.empty() && u.path.back() == '/') u.path.pop_back();
    const auto colon = authority.rfind(':');
    if (colon != std::string::npos && authority.find(']', colon) == std::string::npos) {
        u.host = authority.substr(0, colon);
        u.port = authority.substr(colon + 1);
    } else {
        u.host = authority;
    }
    if (!u.host.empty() && u.host.front() == '[' && u.host.back() == ']') {
        u.host = u.host.substr(1, u.host.size() - 2);
    }
    if (u.host.empty() || u.port.empty()) throw std::invalid_argument("no host in URI: " + uri);
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

HttpResponse HttpClient::send(const HttpUri& uri, const std::string& method,
                              const std::string& target, const std::string& body,
                              const std::string& content_type,
                              const std::map<std::string, std::string>& headers) const {
    asio::io_context ioc;
    beast::tcp_stream stream(ioc);
    bool sent = false;
    const auto where = fmt::format("{} http://{}:{}{}", method, uri.host, uri.port, target);
    try {
        asio::ip::tcp::resolver resolver(ioc);
        stream.expires_after(timeout_);
        stream.connect(resolver.resolve(uri.host, uri.port));
        bhttp::request<bhttp::string_body> req{bhttp::string_to_verb(method), target, 11};
        req.set(bhttp::field::host, uri.host + ":" + uri.port);
        req.set(bhttp::field::user_agent, "trackd");
        req.set(bhttp::field::accept, "application/json");
        if (!content_type.empty()) req.set(bhttp::field::content_type, content_type);
        for (const auto& [k, v] : headers) req.set(k, v);
        req.body() = body;
        req.prepare_payload();
        stream.expires_after(timeout_);
        // Once any byte left, the server may receive the whole request and act on it.
        bhttp::request_serializer<bhttp::string_body> serializer(req);
        beast::error_code ec;
        while (!serializer.is_done()) {
            bhttp::write_some(stream, serializer, ec);
            if (ec) throw beast::system_error(ec);
            sent = true;
        }
        beast::flat_buffer buffer;
        bhttp::response_parser<bhttp::string_body> parser;
        parser.body_limit(256U << 20);  // a table's metadata grows with its snapshots
        stream.expires_after(timeout_);
        bhttp::read(stream, buffer, parser);
        stream.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ec);
        const auto& res = parser.get();
        return HttpResponse{static_cast<int>(res.result_int()), res.body()};
    } catch (const beast::system_error& e) {
        throw HttpRequestError(where + ": " + e.code().message(), sent);
    }
}

}  // namespace trackd::archive
