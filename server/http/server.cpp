#include "trackd/http/server.hpp"

#include <chrono>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

#include "trackd/core/error.hpp"
#include "trackd/core/log.hpp"

#include "api.hpp"
#include "problem.hpp"
#include "session.hpp"

namespace trackd::http {

namespace net = boost::asio;
namespace beast = boost::beast;
using tcp = net::ip::tcp;

namespace {

// How long stop() lets requests in progress finish before it ends the I/O threads.
constexpr std::chrono::seconds kStopGrace{5};
// metrics.listen's own threads: /healthz there answers whatever the API's loops are busy with
// (answers of 18 kB, a burst of clients), and either thread can serve while the other works.
constexpr int kMetricsThreads = 2;
// After a failed accept (e.g. out of file descriptors) before trying again: without a pause the
// acceptor would fail at once, again and again, spinning a core and flooding the log.
constexpr std::chrono::milliseconds kAcceptRetry{100};

// A connection beyond http.max_connections: one 503 written without waiting (the socket's send
// buffer is empty, so it fits), then closed. Nothing is read and nothing waits on the client.
void refuse(tcp::socket socket, int max_connections) {
    const std::string body = problem_json({ProblemKind::unavailable,
                                           "too many open connections (http.max_connections = " +
                                               std::to_string(max_connections) + "); retry later",
                                           ""},
                                          "/");
    const std::string message =
        "HTTP/1.1 503 Service Unavailable\r\nServer: trackd\r\n"
        "Content-Type: application/problem+json\r\nRetry-After: 1\r\nConnection: close\r\n"
        "Content-Length: " +
        std::to_string(body.size()) + "\r\n\r\n" + body;
    beast::error_code ec;
    socket.non_blocking(true, ec);
    if (!ec) net::write(socket, net::buffer(message), ec);
    socket.shutdown(tcp::socket::shutdown_both, ec);
    socket.close(ec);
}

// One event loop per I/O thread. A connection stays on the loop it was accepted into, so a
// request's work never moves between threads (no strands, no wake-up of another thread for each
// step) and the database waits of ConnectionPool::run() run in the same loop.
class Loops {
  public:
    explicit Loops(int threads) {
        for (int i = 0; i < threads; ++i) {
            loops_.push_back(std::make_unique<net::io_context>(1));
            guards_.emplace_back(net::make_work_guard(*loops_.back()));
        }
    }
    net::io_context& first() { return *loops_.front(); }
    // Round robin: where the next connection goes.
    net::io_context& next() { return *loops_[next_++ % loops_.size()]; }
    // Runs loop `i` on the calling thread until stop().
    void run(std::size_t i) {
        auto& ioc = *loops_[i];
        while (true) {
            try {
                ioc.run();
                return;
            } catch (const std::exception& e) {
                // A handler threw (it should not): keep the thread serving.
                core::log::error("http: unexpected exception", {{"error", e.what()}});
            }
        }
    }
    void stop() {
        guards_.clear();
        for (auto& l : loops_) l->stop();
    }
    [[nodiscard]] std::size_t size() const { return loops_.size(); }

  private:
    std::vector<std::unique_ptr<net::io_context>> loops_;
    std::vector<net::executor_work_guard<net::io_context::executor_type>> guards_;
    std::size_t next_ = 0;  // only the accepting loop's thread uses it
};

// Accepts connections and starts a Session for each, on the next loop.
class Listener : public std::enable_shared_from_this<Listener> {
  public:
    Listener(Loops& loops, tcp::acceptor acceptor, std::shared_ptr<SharedState> state)
        : loops_(loops),
          acceptor_(std::move(acceptor)),
          retry_(acceptor_.get_executor()),
          state_(std::move(state)) {}

    void run() { accept(); }
    void stop() {
        net::post(acceptor_.get_executor(), [self = shared_from_this()] {
            beast::error_code ec;
            self->acceptor_.close(ec);
        });
    }

  private:
    void accept() {
        acceptor_.async_accept(loops_.next(),
                               beast::bind_front_handler(&Listener::on_accept, shared_from_this()));
    }
    void on_accept(beast::error_code ec, tcp::socket socket) {
        if (!acceptor_.is_open() || state_->stopping.load()) return;
        if (ec) {
            // E.g. out of file descriptors: log and accept again after a pause, the condition
            // may clear.
            core::log::warn("http: accept failed", {{"error", ec.message()}});
            retry_.expires_after(kAcceptRetry);
            // After stop() the acceptor is closed: that accept ends at once (on_accept returns).
            retry_.async_wait([self = shared_from_this()](beast::error_code) { self->accept(); });
            return;
        }
        if (open_sessions() >= static_cast<std::size_t>(state_->http.max_connections)) {
            core::log::debug("http: connection refused: http.max_connections reached");
            refuse(std::move(socket), state_->http.max_connections);
        } else {
            std::make_shared<Session>(std::move(socket), state_)->run();
        }
        accept();
    }
    std::size_t open_sessions() {
        const std::lock_guard lock(state_->mutex);
        return state_->sessions.size();
    }

    Loops& loops_;
    tcp::acceptor acceptor_;
    net::steady_timer retry_;
    std::shared_ptr<SharedState> state_;
};

// `key` names the setting in errors: http.listen or metrics.listen.
tcp::acceptor bind_listener(net::io_context& ioc, const std::string& listen, const char* key) {
    const auto colon = listen.rfind(':');
    std::string host = listen.substr(0, colon);
    const std::string port = listen.substr(colon + 1);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
        host = host.substr(1, host.size() - 2);
    }
    beast::error_code ec;
    tcp::resolver resolver(ioc);
    const auto results = resolver.resolve(host, port, tcp::resolver::passive, ec);
    if (ec || results.empty()) {
        throw core::StartupError(std::string(key) + ": cannot resolve '" + listen +
                                 "': " + ec.message());
    }
    const tcp::endpoint endpoint = results.begin()->endpoint();
    tcp::acceptor acceptor(ioc);
    const auto fail = [&](const char* what) {
        throw core::StartupError(std::string(key) + ": cannot " + what + " " + listen + ": " +
                                 ec.message());
    };
    if (acceptor.open(endpoint.protocol(), ec)) fail("open");
    if (acceptor.set_option(net::socket_base::reuse_address(true), ec)) fail("configure");
    if (acceptor.bind(endpoint, ec)) fail("bind");
    if (acceptor.listen(net::socket_base::max_listen_connections, ec)) fail("listen on");
    return acceptor;
}

}  // namespace

struct Server::Impl {
    Impl(const config::Config& config)
        : http(config.http),
          config_metrics_listen(config.metrics.listen),
          api(config, config.http.listen),
          loops(config.http.threads),
          metrics_loops(kMetricsThreads),
          state(std::make_shared<SharedState>(api, http, false)),
          metrics_state(std::make_shared<SharedState>(api, http, true)) {
        if (http.enabled) {
            auto acceptor = bind_listener(loops.first(), http.listen, "http.listen");
            port = acceptor.local_endpoint().port();
            listener = std::make_shared<Listener>(loops, std::move(acceptor), state);
        }
        if (!config.metrics.listen.empty()) {
            auto acceptor =
                bind_listener(metrics_loops.first(), config.metrics.listen, "metrics.listen");
            metrics_port = acceptor.local_endpoint().port();
            metrics_listener =
                std::make_shared<Listener>(metrics_loops, std::move(acceptor), metrics_state);
        }
    }

    [[nodiscard]] std::vector<std::pair<std::shared_ptr<Listener>, std::shared_ptr<SharedState>>>
    listeners() const {
        std::vector<std::pair<std::shared_ptr<Listener>, std::shared_ptr<SharedState>>> out;
        if (listener) out.emplace_back(listener, state);
        if (metrics_listener) out.emplace_back(metrics_listener, metrics_state);
        return out;
    }

    config::HttpConfig http;
    std::string config_metrics_listen;
    Api api;
    Loops loops;          // http.listen: http.threads
    Loops metrics_loops;  // metrics.listen: kMetricsThreads of its own
    std::shared_ptr<SharedState> state;
    std::shared_ptr<SharedState> metrics_state;
    std::shared_ptr<Listener> listener;          // http.listen, when http.enabled
    std::shared_ptr<Listener> metrics_listener;  // metrics.listen, when set
    std::vector<std::thread> threads;
    unsigned short port = 0;
    unsigned short metrics_port = 0;
    bool started = false;
    bool stopped = false;
};

Server::Server(const config::Config& config) : impl_(std::make_unique<Impl>(config)) {}

Server::~Server() { stop(); }

unsigned short Server::port() const { return impl_->port; }
unsigned short Server::metrics_port() const { return impl_->metrics_port; }

void Server::start() {
    if (impl_->started) return;
    impl_->started = true;
    for (auto& [l, s] : impl_->listeners()) l->run();
    if (impl_->listener) {
        for (std::size_t i = 0; i < impl_->loops.size(); ++i) {
            impl_->threads.emplace_back([this, i] { impl_->loops.run(i); });
        }
    }
    if (impl_->metrics_listener) {
        for (std::size_t i = 0; i < impl_->metrics_loops.size(); ++i) {
            impl_->threads.emplace_back([this, i] { impl_->metrics_loops.run(i); });
        }
    }
    if (impl_->listener) {
        core::log::info("http: listening", {{"listen", impl_->http.listen},
                                            {"port", std::to_string(impl_->port)},
                                            {"threads", std::to_string(impl_->http.threads)}});
    }
    if (impl_->metrics_listener) {
        core::log::info("http: serving /metrics", {{"listen", impl_->config_metrics_listen},
                                                   {"port", std::to_string(impl_->metrics_port)}});
    }
}

void Server::stop() {
    if (impl_->stopped) return;
    impl_->stopped = true;
    // Collect under the lock, post outside it: a session whose last owner is this list runs
    // its destructor here, and the destructor takes the same lock.
    std::vector<std::shared_ptr<Session>> live;
    for (auto& [listener, state] : impl_->listeners()) {
        state->stopping.store(true);
        listener->stop();
        const std::lock_guard lock(state->mutex);
        for (auto& [ptr, weak] : state->sessions) {
            if (auto s = weak.lock()) live.push_back(std::move(s));
        }
    }
    for (auto& s : live) net::post(s->executor(), [s] { s->shutdown_if_idle(); });
    live.clear();
    if (impl_->started) {
        const auto until = std::chrono::steady_clock::now() + kStopGrace;
        while (std::chrono::steady_clock::now() < until) {
            bool idle = true;
            for (auto& [listener, state] : impl_->listeners()) {
                const std::lock_guard lock(state->mutex);
                idle = idle && state->sessions.empty();
            }
            if (idle) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
    }
    impl_->loops.stop();
    impl_->metrics_loops.stop();
    for (auto& t : impl_->threads) t.join();
    impl_->threads.clear();
    // Requests still waiting (past the grace) end with their loops, here on this thread.
    impl_->api.stop();
    core::log::info("http: stopped");
}

}  // namespace trackd::http
