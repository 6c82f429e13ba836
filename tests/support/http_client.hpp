// A blocking HTTP/1.1 client for the HTTP API tests (Boost.Beast), and JSON access via simdjson.
#pragma once

#include <map>
#include <memory>
#include <stdexcept>
#include <string>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <simdjson.h>

namespace trackd::test {

struct HttpResponse {
    int status = 0;
    std::string body;
    std::map<std::string, std::string> headers;  // lower-case names

    [[nodiscard]] std::string header(const std::string& name) const {
        auto it = headers.find(name);
        return it == headers.end() ? "" : it->second;
    }
    // The parsed body (parsed once: elements stay valid as long as the response); throws if
    // it is not JSON.
    [[nodiscard]] simdjson::dom::element json() const {
        if (!parser_) {
            parser_ = std::make_shared<simdjson::dom::parser>();
            doc_ = parser_->parse(body);
        }
        return doc_;
    }

  private:
    mutable std::shared_ptr<simdjson::dom::parser> parser_;
    mutable simdjson::dom::element doc_;
};

class HttpClient {
  public:
    explicit HttpClient(unsigned short port, std::string token = {})
        : port_(port), token_(std::move(token)) {}

    HttpResponse request(const std::string& method, const std::string& target,
                         const std::string& body = {}, const std::string& content_type = {},
                         const std::map<std::string, std::string>& headers = {}) const {
        namespace bhttp = boost::beast::http;
        boost::asio::io_context ioc;
        boost::beast::tcp_stream stream(ioc);
        stream.connect(
            boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), port_));
        bhttp::request<bhttp::string_body> req{bhttp::string_to_verb(method), target, 11};
        req.set(bhttp::field::host, "127.0.0.1:" + std::to_string(port_));
        if (!token_.empty()) req.set(bhttp::field::authorization, "Bearer " + token_);
        if (!content_type.empty()) req.set(bhttp::field::content_type, content_type);
        for (const auto& [k, v] : headers) req.set(k, v);
        req.body() = body;
        req.prepare_payload();
        bhttp::write(stream, req);
        boost::beast::flat_buffer buffer;
        bhttp::response_parser<bhttp::string_body> parser;
        parser.body_limit(256 * 1024 * 1024);
        bhttp::read(stream, buffer, parser);
        HttpResponse out;
        auto& res = parser.get();
        out.status = static_cast<int>(res.result_int());
        out.body = res.body();
        for (const auto& f : res) {
            std::string name(f.name_string());
            for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
            out.headers[name] = std::string(f.value());
        }
        boost::beast::error_code ec;
        stream.socket().shutdown(boost::asio::ip::tcp::socket::shutdown_both, ec);
        return out;
    }

    HttpResponse get(const std::string& target) const { return request("GET", target); }

  private:
    unsigned short port_;
    std::string token_;
};

// "http://127.0.0.1:1234/v1/x?y" -> "/v1/x?y"
inline std::string path_of(const std::string& url) {
    const auto scheme = url.find("://");
    const auto slash = url.find('/', scheme == std::string::npos ? 0 : scheme + 3);
    return slash == std::string::npos ? "/" : url.substr(slash);
}

// The href of the link with this rel, or "".
inline std::string link(simdjson::dom::element doc, const std::string& rel) {
    for (auto l : doc["links"].get_array()) {
        if (std::string_view(l["rel"]) == rel) return std::string(std::string_view(l["href"]));
    }
    return "";
}

inline std::string str(simdjson::dom::element e) { return std::string(std::string_view(e)); }

}  // namespace trackd::test
