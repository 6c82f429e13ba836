// One client connection: reads requests with limits and timeouts, hands each to the Api, writes
// the response, keeps the connection alive between requests.
//
// Contract: all of a session's work runs on the one event loop (and thread) it was accepted into;
// a request's handler is a coroutine there, so while it waits for the database the thread serves
// other connections. Timeouts: http.idle_timeout_ms while
// waiting for the first byte of the next request, http.read_timeout_ms from that byte to the end
// of the request (so a slow client cannot hold a connection forever), and the same bound for
// writing the response (each write of a streaming response too; a stream otherwise lasts until
// the client or the server ends it). Oversized headers answer 431, oversized bodies 413,
// unparseable requests 400; each of those closes the connection after the answer.
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "trackd/config/config.hpp"

#include "api.hpp"

namespace trackd::http {

class Session;

// What the listener, the sessions and Server::stop() share.
struct SharedState {
    SharedState(const Api& a, const config::HttpConfig& c, bool metrics)
        : api(a), http(c), metrics_only(metrics) {}
    const Api& api;
    const config::HttpConfig& http;
    const bool metrics_only;  // the metrics.listen address: /metrics and /healthz only
    std::atomic<bool> stopping{false};
    std::mutex mutex;
    std::unordered_map<Session*, std::weak_ptr<Session>> sessions;
};

class Session : public std::enable_shared_from_this<Session> {
  public:
    Session(boost::asio::ip::tcp::socket&& socket, std::shared_ptr<SharedState> state);
    ~Session();
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

    void run();
    // Server::stop(): close now if waiting for a request; otherwise after the current response.
    void shutdown_if_idle();
    boost::asio::any_io_executor executor() { return stream_.get_executor(); }

  private:
    void wait_for_request();
    void on_first_bytes(boost::beast::error_code ec, std::size_t n);
    void read_request();
    void on_read(boost::beast::error_code ec, std::size_t n);
    void send(Response r, bool keep_alive, const std::string& method, const std::string& path);
    void on_write(bool keep_alive, boost::beast::error_code ec, std::size_t n);
    void start_stream(Response r, const std::string& method, const std::string& path);
    void watch_stream_client();
    void stream_write(std::string text);
    void stream_poll();
    void on_stream_next(const std::exception_ptr& error, std::string text);
    void end_stream();
    void drain_and_close();
    void drain_some(std::size_t drained);
    void close();

    boost::beast::tcp_stream stream_;
    boost::beast::flat_buffer buffer_;
    std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
    boost::beast::http::response<boost::beast::http::string_body> res_;
    std::shared_ptr<SharedState> state_;
    std::array<char, 4096> drain_{};
    // A streaming response (Server-Sent Events) in progress.
    std::shared_ptr<BodyStream> body_stream_;
    boost::asio::steady_timer stream_timer_;
    std::string stream_out_;
    std::chrono::steady_clock::time_point stream_last_write_{};
    unsigned version_ = 11;
    bool idle_ = false;
};

}  // namespace trackd::http
