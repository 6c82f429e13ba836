#include "session.hpp"

#include <chrono>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/write.hpp>

#include "trackd/core/log.hpp"

#include "problem.hpp"
#include "router.hpp"

namespace trackd::http {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

// Bounds the lingering read after an answer that closes the connection (drain_and_close).
constexpr std::chrono::seconds kDrainTimeout{1};

// The Api's answer to a request it owns until then.
net::awaitable<Response> answer(std::shared_ptr<SharedState> state, Request request) {
    if (state->metrics_only) co_return co_await state->api.handle_metrics(request);
    co_return co_await state->api.handle(request);
}

Request to_request(bhttp::request<bhttp::string_body>& m) {
    Target t = parse_target(std::string_view(m.target().data(), m.target().size()));
    Request r;
    r.method = std::string(m.method_string());
    r.path = std::move(t.path);
    r.segments = std::move(t.segments);
    r.query = std::move(t.query);
    // An absolute-form target's host stands for the Host header (RFC 9112 3.2.2).
    r.host = t.authority.empty() ? std::string(m[bhttp::field::host]) : std::move(t.authority);
    r.authorization = std::string(m[bhttp::field::authorization]);
    r.content_type = std::string(m[bhttp::field::content_type]);
    r.last_event_id = std::string(m["Last-Event-ID"]);
    r.if_none_match = std::string(m[bhttp::field::if_none_match]);
    r.body = std::move(m.body());
    return r;
}

}  // namespace

Session::Session(tcp::socket&& socket, std::shared_ptr<SharedState> state)
    : stream_(std::move(socket)), state_(std::move(state)), stream_timer_(stream_.get_executor()) {}

Session::~Session() {
    const std::lock_guard lock(state_->mutex);
    state_->sessions.erase(this);
}

void Session::run() {
    {
        const std::lock_guard lock(state_->mutex);
        state_->sessions.emplace(this, weak_from_this());
    }
    net::dispatch(stream_.get_executor(),
                  beast::bind_front_handler(&Session::wait_for_request, shared_from_this()));
}

void Session::shutdown_if_idle() {
    if (idle_) close();
}

void Session::wait_for_request() {
    if (state_->stopping.load()) return close();
    // Bytes of a pipelined request were read already: no idle wait.
    if (buffer_.size() > 0) return read_request();
    idle_ = true;
    stream_.expires_after(std::chrono::milliseconds(state_->http.idle_timeout_ms));
    stream_.async_read_some(
        buffer_.prepare(4096),
        beast::bind_front_handler(&Session::on_first_bytes, shared_from_this()));
}

void Session::on_first_bytes(beast::error_code ec, std::size_t n) {
    idle_ = false;
    if (ec) return close();  // idle timeout, client gone, or shutdown
    buffer_.commit(n);
    read_request();
}

void Session::read_request() {
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(state_->http.max_header_bytes));
    parser_->body_limit(static_cast<std::uint64_t>(state_->http.max_body_bytes));
    stream_.expires_after(std::chrono::milliseconds(state_->http.read_timeout_ms));
    bhttp::async_read(stream_, buffer_, *parser_,
                      beast::bind_front_handler(&Session::on_read, shared_from_this()));
}

void Session::on_read(beast::error_code ec, std::size_t /*n*/) {
    if (ec == bhttp::error::end_of_stream || ec == net::error::operation_aborted ||
        ec == bhttp::error::partial_message) {
        return close();
    }
    if (ec == beast::error::timeout) {
        // The stream's timer has closed the socket already: nobody is left to answer.
        core::log::debug("http: request not received within http.read_timeout_ms");
        return close();
    }
    if (ec == bhttp::error::header_limit) {
        return send(problem_response({ProblemKind::headers_too_large,
                                      "the request line and headers exceed "
                                      "http.max_header_bytes (" +
                                          std::to_string(state_->http.max_header_bytes) + " bytes)",
                                      ""},
                                     "/"),
                    false, "-", "-");
    }
    if (ec == bhttp::error::body_limit) {
        return send(problem_response({ProblemKind::payload_too_large,
                                      "body: larger than http.max_body_bytes (" +
                                          std::to_string(state_->http.max_body_bytes) + " bytes)",
                                      "body"},
                                     "/"),
                    false, "-", "-");
    }
    if (ec && ec.category() == bhttp::make_error_code(bhttp::error::bad_target).category()) {
        return send(problem_response({ProblemKind::bad_request,
                                      "the request is not valid HTTP/1.1: " + ec.message(), ""},
                                     "/"),
                    false, "-", "-");
    }
    if (ec) return close();

    auto& message = parser_->get();
    version_ = message.version();
    const bool keep_alive = message.keep_alive() && !state_->stopping.load();
    std::string method(message.method_string());
    const std::string target(message.target());
    std::string path = target.substr(0, target.find('?'));
    Request request;
    try {
        request = to_request(message);
    } catch (const ProblemError& e) {  // from parse_target: a malformed target
        return send(problem_response(e.problem(), path), keep_alive, method, path);
    }
    path = request.path;  // an absolute-form target's path without its scheme and host
    // The handler waits for the database in the event loop; this thread serves others meanwhile.
    net::co_spawn(
        stream_.get_executor(), answer(state_, std::move(request)),
        [self = shared_from_this(), keep_alive, method = std::move(method), path = std::move(path)](
            const std::exception_ptr& error, Response response) {
            if (error) {  // the router answers every exception itself: only a bug gets here
                response = problem_response(
                    {ProblemKind::internal, "an internal error occurred; it was logged", ""}, path);
                core::log::error("http: a request ended without an answer", {{"path", path}});
            }
            if (response.stream) return self->start_stream(std::move(response), method, path);
            self->send(std::move(response), keep_alive, method, path);
        });
}

// A streaming response (Server-Sent Events): the head and the first bytes, then whatever the
// body stream yields, until the client goes or the server stops. No Content-Length and no
// chunking: the body ends when the connection closes, so the connection is not reused.
void Session::start_stream(Response r, const std::string& method, const std::string& path) {
    core::log::debug("http request",
                     {{"method", method}, {"path", path}, {"status", std::to_string(r.status)}});
    body_stream_ = std::move(r.stream);
    std::string head = std::string(version_ == 10 ? "HTTP/1.0 " : "HTTP/1.1 ") +
                       std::to_string(r.status) + " " +
                       std::string(bhttp::obsolete_reason(static_cast<bhttp::status>(r.status))) +
                       "\r\nServer: trackd\r\nContent-Type: " + r.content_type + "\r\n";
    for (const auto& [name, value] : r.headers) {
        head.append(name).append(": ").append(value).append("\r\n");
    }
    head += "Connection: close\r\n\r\n";
    // Only a closed connection ends the stream early: watch for it while waiting to write.
    stream_.expires_never();
    watch_stream_client();
    stream_write(head + r.body);
}

void Session::watch_stream_client() {
    stream_.async_read_some(
        net::buffer(drain_), [self = shared_from_this()](beast::error_code ec, std::size_t) {
            if (ec) return self->end_stream();
            self->watch_stream_client();  // a client has nothing to say here: discard it
        });
}

void Session::stream_write(std::string text) {
    stream_out_ = std::move(text);
    // A client that stops reading holds the connection at most this long.
    stream_.expires_after(std::chrono::milliseconds(state_->http.read_timeout_ms));
    net::async_write(stream_, net::buffer(stream_out_),
                     [self = shared_from_this()](beast::error_code ec, std::size_t) {
                         if (ec) return self->end_stream();
                         self->stream_.expires_never();
                         self->stream_last_write_ = std::chrono::steady_clock::now();
                         self->stream_poll();
                     });
}

void Session::stream_poll() {
    if (!body_stream_ || state_->stopping.load()) return end_stream();
    // The handler owns the stream as well: a client that goes while next() waits for the
    // database ends the stream (end_stream() lets go of body_stream_), and next() still runs on
    // the stream's members until it returns.
    net::co_spawn(stream_.get_executor(), body_stream_->next(),
                  [self = shared_from_this(), stream = body_stream_](
                      const std::exception_ptr& error, std::string text) {
                      self->on_stream_next(error, std::move(text));
                  });
}

void Session::on_stream_next(const std::exception_ptr& error, std::string text) {
    if (error) {
        try {
            std::rethrow_exception(error);
        } catch (const std::exception& e) {
            // The client reconnects (with Last-Event-ID) and resumes where it was.
            core::log::warn("http: event stream ended", {{"error", e.what()}});
        }
        return end_stream();
    }
    if (!body_stream_ || state_->stopping.load()) return end_stream();
    if (!text.empty()) return stream_write(std::move(text));
    if (std::chrono::steady_clock::now() - stream_last_write_ >= body_stream_->heartbeat()) {
        return stream_write(": keep-alive\n\n");
    }
    stream_timer_.expires_after(body_stream_->poll_interval());
    stream_timer_.async_wait(
        [self = shared_from_this()](beast::error_code) { self->stream_poll(); });
}

void Session::end_stream() {
    body_stream_.reset();
    stream_timer_.cancel();
    close();
}

void Session::send(Response r, bool keep_alive, const std::string& method,
                   const std::string& path) {
    // Method, path and status only: never the query (ids) nor the Authorization header.
    core::log::debug("http request",
                     {{"method", method}, {"path", path}, {"status", std::to_string(r.status)}});
    res_ = {};
    res_.version(version_);
    res_.result(static_cast<unsigned>(r.status));
    res_.set(bhttp::field::server, "trackd");
    if (!r.content_type.empty()) res_.set(bhttp::field::content_type, r.content_type);
    for (const auto& [name, value] : r.headers) res_.set(name, value);
    res_.keep_alive(keep_alive);
    res_.body() = std::move(r.body);
    res_.prepare_payload();
    stream_.expires_after(std::chrono::milliseconds(state_->http.read_timeout_ms));
    bhttp::async_write(
        stream_, res_,
        beast::bind_front_handler(&Session::on_write, shared_from_this(), keep_alive));
}

void Session::on_write(bool keep_alive, beast::error_code ec, std::size_t /*n*/) {
    if (ec) return close();
    if (!keep_alive) return drain_and_close();
    wait_for_request();
}

// After an answer that ends the connection: half-close, then read and discard what the client
// is still sending, briefly. Closing with unread data makes the kernel send a reset, and the
// client could lose the answer it has not read yet (a 413 while it is still sending the body).
void Session::drain_and_close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    if (ec) return close();
    // One deadline for the whole drain (a tcp_stream's expiry covers every later operation).
    stream_.expires_after(kDrainTimeout);
    drain_some(0);
}

void Session::drain_some(std::size_t drained) {
    // Enough for what a client typically has in flight; a client sending more gets the reset.
    const std::size_t cap = 4 * static_cast<std::size_t>(state_->http.max_body_bytes);
    stream_.async_read_some(net::buffer(drain_), [self = shared_from_this(), drained, cap](
                                                     beast::error_code e, std::size_t n) {
        if (e || drained + n > cap) return self->close();
        self->drain_some(drained + n);
    });
}

void Session::close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.socket().close(ec);
}

}  // namespace trackd::http
