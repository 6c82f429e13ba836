#include "trackd/net/http_client.hpp"

#include <chrono>
#include <fstream>
#include <future>
#include <stdexcept>
#include <string>

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "support/held_lookup.hpp"

namespace trackd::net {
namespace {

TEST(ParseUri, SchemesPortsPathsAndUserinfo) {
    auto u = parse_uri("http://catalog:8181/api/catalog/");
    EXPECT_EQ(u.scheme, "http");
    EXPECT_FALSE(u.tls());
    EXPECT_EQ(u.host, "catalog");
    EXPECT_EQ(u.port, "8181");
    EXPECT_EQ(u.path, "/api/catalog");
    u = parse_uri("https://polaris.example.com");
    EXPECT_TRUE(u.tls());
    EXPECT_EQ(u.port, "443");
    EXPECT_EQ(u.path, "");
    EXPECT_EQ(parse_uri("http://registry").port, "80");
    u = parse_uri("https://user:pa:ss@registry.example:8443/apis/ccompat/v7");
    EXPECT_EQ(u.userinfo, "user:pa:ss");
    EXPECT_EQ(u.host, "registry.example");
    EXPECT_EQ(u.port, "8443");
    EXPECT_EQ(u.origin(), "https://registry.example:8443");
    u = parse_uri("https://[::1]:8443/v1");
    EXPECT_EQ(u.host, "::1");
    EXPECT_EQ(u.origin(), "https://[::1]:8443");
    EXPECT_EQ(u.host_header(), "[::1]:8443");
    EXPECT_EQ(parse_uri("https://[::1]").port, "443");
    EXPECT_EQ(parse_uri("https://[::1]").host_header(), "[::1]");
    EXPECT_EQ(parse_uri("http://catalog:8181/x").host_header(), "catalog:8181");
    EXPECT_EQ(parse_uri("http://catalog:80").host_header(), "catalog");
    EXPECT_EQ(parse_uri("https://catalog:80").host_header(), "catalog:80");
    EXPECT_THROW(parse_uri("ftp://catalog"), std::invalid_argument);
    EXPECT_THROW(parse_uri("https://"), std::invalid_argument);
    EXPECT_THROW(parse_uri("catalog:8181"), std::invalid_argument);
}

TEST(UrlEncode, UnreservedCharactersStay) {
    EXPECT_EQ(url_encode("a-Z_0.~"), "a-Z_0.~");
    EXPECT_EQ(url_encode("s3cret&=value /"), "s3cret%26%3Dvalue%20%2F");
}

TEST(HttpClient, ACaFileWithoutCertificatesIsRefusedNamingTheSetting) {
    const std::string path =
        ::testing::TempDir() + "trackd-net-bad-ca-" + std::to_string(getpid()) + ".pem";
    std::ofstream(path) << "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n";
    HttpOptions o;
    o.tls = {path, "archive.rest_ca_file"};
    try {
        HttpClient client(o);
        ADD_FAILURE() << "no error";
    } catch (const std::runtime_error& e) {
        EXPECT_EQ(std::string(e.what()).find("archive.rest_ca_file: cannot load the trusted "
                                             "certificates from '" +
                                             path + "'"),
                  0U)
            << e.what();
    }
    std::remove(path.c_str());
}

// A loopback socket that listens and never accepts: connections complete in the kernel's
// backlog, and nothing is ever answered.
class SilentServer {
  public:
    SilentServer() : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof addr;
        if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
            ::listen(fd_, 8) != 0 ||
            ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
            throw std::runtime_error("cannot listen on loopback");
        }
        port_ = ntohs(addr.sin_port);
    }
    ~SilentServer() { ::close(fd_); }
    SilentServer(const SilentServer&) = delete;
    SilentServer& operator=(const SilentServer&) = delete;
    [[nodiscard]] std::string port() const { return std::to_string(port_); }

  private:
    int fd_;
    unsigned short port_ = 0;
};

HttpRequestError error_of(const HttpClient& client, const std::string& uri) {
    try {
        client.send(parse_uri(uri), "POST", "/v1/commit", "{}", "application/json");
    } catch (const HttpRequestError& e) {
        return e;
    }
    throw std::runtime_error("no error from " + uri);
}

// Connects and answers given up after 300 ms.
HttpOptions short_limits() {
    HttpOptions o;
    o.connect_timeout = std::chrono::milliseconds(300);
    o.read_timeout = std::chrono::milliseconds(300);
    return o;
}

// Whether the request may have reached the server decides how a commit's unknown outcome is
// handled: a request that was written and not answered may have been applied; a connection or
// a TLS handshake that never completed sent nothing of it.
TEST(HttpClient, SaysAtWhichStepItFailedAndWhetherTheRequestLeft) {
    const HttpClient client(short_limits());
    const SilentServer silent;

    auto e = error_of(client, "http://127.0.0.1:" + silent.port());
    EXPECT_EQ(e.step(), "read the answer");
    EXPECT_EQ(e.detail(), "no answer within 300 ms");
    EXPECT_TRUE(e.sent());
    EXPECT_EQ(std::string(e.what()), "POST http://127.0.0.1:" + silent.port() +
                                         "/v1/commit: read the answer: no answer within 300 ms");

    e = error_of(client, "https://127.0.0.1:" + silent.port());
    EXPECT_EQ(e.step(), "TLS handshake");
    EXPECT_EQ(e.detail(), "no answer within 300 ms");
    EXPECT_FALSE(e.sent());

    // Nothing listens on the discard port here.
    e = error_of(client, "https://127.0.0.1:9");
    EXPECT_EQ(e.step(), "connect");
    EXPECT_FALSE(e.sent());
}

// A host name whose lookup does not end (support/held_lookup.hpp, as behind a DNS server that
// does not answer) is given up at connect_timeout, as a connect is: asio's resolver has no
// deadline, and cancelling it does not end a lookup already running. Once the name answers
// again, requests to it go on to the server.
TEST(HttpClient, AHostNameLookupThatDoesNotEndIsGivenUpAtTheConnectTimeout) {
    const HttpClient client(short_limits());
    const SilentServer silent;
    const std::string uri = "http://catalog.held.test:" + silent.port();
    test::HeldLookup lookup("catalog.held.test");

    auto failed = std::async(std::launch::async, [&] { return error_of(client, uri); });
    // Far past the connect timeout: the request waited for the lookup.
    const auto status = failed.wait_for(std::chrono::seconds(20));
    EXPECT_EQ(lookup.wait_held(1, std::chrono::seconds(0)), 1)
        << "the name was not looked up, or its lookup not held: the test shows nothing";
    lookup.release();
    ASSERT_EQ(status, std::future_status::ready) << "the request waited for the lookup";
    auto e = failed.get();
    EXPECT_EQ(e.step(), "resolve");
    EXPECT_EQ(e.detail(), "no answer within 300 ms");
    EXPECT_FALSE(e.sent());

    e = error_of(client, uri);
    EXPECT_EQ(e.step(), "read the answer");
    EXPECT_TRUE(e.sent());
}

}  // namespace
}  // namespace trackd::net
