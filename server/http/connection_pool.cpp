#include "connection_pool.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <functional>
#include <system_error>
#include <thread>

#include <boost/asio/async_result.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "trackd/core/log.hpp"

#include "problem.hpp"

namespace trackd::http {

namespace net = boost::asio;

namespace {

// Waits in the event loop until a descriptor is ready (a libpq connection's socket, or an
// Opening's eventfd), at most until a deadline. It watches a copy of the descriptor, owned by it:
// libpq may close its own (a broken connection) while the copy is still registered in the event
// loop. The deadline's timer and the wait run on the same single-threaded loop (the request's),
// so the timer may cancel the wait directly; `done` keeps a late expiry off a finished wait.
class SocketWait {
  public:
    static constexpr auto read = net::posix::stream_descriptor::wait_read;
    static constexpr auto write = net::posix::stream_descriptor::wait_write;

    SocketWait(const net::any_io_executor& ex, db::Connection& conn,
               std::chrono::steady_clock::time_point deadline)
        : SocketWait(ex, copy_of(conn), deadline, Adopt{}) {}
    SocketWait(const net::any_io_executor& ex, int fd,
               std::chrono::steady_clock::time_point deadline)
        : SocketWait(ex, copy_of(fd), deadline, Adopt{}) {}
    ~SocketWait() {
        state_->done = true;
        timer_.cancel();
    }
    SocketWait(const SocketWait&) = delete;
    SocketWait& operator=(const SocketWait&) = delete;
    SocketWait(SocketWait&&) = delete;
    SocketWait& operator=(SocketWait&&) = delete;

    // True once the descriptor is ready for `what` (or failed: libpq reports that), false if the
    // deadline passed first.
    net::awaitable<bool> ready(net::posix::stream_descriptor::wait_type what) {
        boost::system::error_code ec;  // an error shows in what libpq reads next
        co_await socket_.async_wait(what, net::redirect_error(net::use_awaitable, ec));
        co_return !state_->expired;
    }

  private:
    struct Adopt {};
    struct State {
        bool done = false;
        bool expired = false;
    };
    SocketWait(const net::any_io_executor& ex, int copy,
               std::chrono::steady_clock::time_point deadline, Adopt)
        : socket_(ex, copy), timer_(ex, deadline), state_(std::make_shared<State>()) {
        timer_.async_wait([this, state = state_](boost::system::error_code ec) {
            if (ec || state->done) return;
            state->expired = true;
            boost::system::error_code ignored;
            socket_.cancel(ignored);
        });
    }
    static int copy_of(int fd) {
        const int copy = ::dup(fd);
        if (copy < 0) {
            throw db::DbError("cannot watch a descriptor: " + std::system_category().message(errno),
                              "08000");
        }
        return copy;
    }
    static int copy_of(db::Connection& conn) {
        try {
            return copy_of(conn.socket());
        } catch (const db::DbError&) {
            conn.close();
            throw;
        }
    }

    net::posix::stream_descriptor socket_;
    net::steady_timer timer_;
    std::shared_ptr<State> state_;
};

// A connection being opened on a thread of its own. Shared by that thread and the request
// waiting for it, so that a request that stops waiting leaves the thread an object to finish
// with: the connection it opens late is closed when the thread lets go of it.
struct Opening {
    Opening() : done(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}
    ~Opening() {
        if (done >= 0) ::close(done);
    }
    Opening(const Opening&) = delete;
    Opening& operator=(const Opening&) = delete;
    Opening(Opening&&) = delete;
    Opening& operator=(Opening&&) = delete;

    const int done;  // an eventfd, readable once the thread has finished
    std::mutex mutex;
    std::unique_ptr<db::Connection> conn;  // guarded by mutex
    std::exception_ptr error;              // guarded by mutex
};

}  // namespace

// A request waiting for a free connection. Every field is guarded by the pool's mutex.
struct ConnectionPool::Waiter {
    explicit Waiter(const net::any_io_executor& ex) : executor(ex), deadline(ex) {}
    net::any_io_executor executor;  // the waiting request's: it resumes there
    net::steady_timer deadline;
    Slot* slot = nullptr;          // handed over by release()
    std::function<void()> resume;  // posts the suspended acquire() to `executor`
};

Statement statement_for(const std::string& sql, db::Format results) {
    return {fmt::format("trackd_api_{:016x}", std::hash<std::string>{}(sql)), sql, results};
}

Statement planned_each_time(const std::string& sql, db::Format results) {
    return {"", sql, results};
}

ConnectionPool::ConnectionPool(PoolSettings settings) : settings_(std::move(settings)) {
    for (int i = 0; i < settings_.size; ++i) {
        slots_.push_back(std::make_unique<Slot>());
        free_.push_back(slots_.back().get());
    }
}

ConnectionPool::~ConnectionPool() = default;

// Suspends the request until release() hands it a slot or its deadline passes, whichever comes
// first: both decide under the pool's mutex, so neither is lost. A plain function object rather
// than a lambda: GCC 12 mishandles lambda captures inside a co_await expression.
struct ConnectionPool::WaitForSlot {
    ConnectionPool* pool;
    std::shared_ptr<Waiter> waiter;

    template <typename Handler>
    void operator()(Handler handler) const {
        auto resumable = std::make_shared<Handler>(std::move(handler));
        pool->wait_for_slot(waiter, [resumable, ex = waiter->executor] {
            net::post(ex, [resumable] { (*resumable)(); });
        });
    }
};

void ConnectionPool::wait_for_slot(const std::shared_ptr<Waiter>& waiter,
                                   std::function<void()> resume) {
    {
        const std::lock_guard lock(mutex_);
        if (stopped_) return;  // its loop is ending, and destroys it
        if (free_.empty()) {
            // Under the mutex: the deadline's wait starts before release() can resume the
            // waiter, which then cancels it.
            waiter->deadline.async_wait([this, waiter](boost::system::error_code ec) {
                if (!ec) deadline_passed(waiter);  // else cancelled: the waiter had its slot
            });
            waiter->resume = std::move(resume);
            waiters_.push_back(waiter);
            return;
        }
        // Freed since acquire() looked.
        waiter->slot = free_.back();
        free_.pop_back();
    }
    resume();
}

void ConnectionPool::deadline_passed(const std::shared_ptr<Waiter>& waiter) {
    std::function<void()> resume;
    {
        const std::lock_guard lock(mutex_);
        const auto it = std::find(waiters_.begin(), waiters_.end(), waiter);
        if (it == waiters_.end()) return;  // handed a slot just now
        waiters_.erase(it);
        resume = std::move(waiter->resume);
    }
    resume();
}

net::awaitable<ConnectionPool::Slot*> ConnectionPool::acquire() {
    {
        const std::lock_guard lock(mutex_);
        if (!free_.empty()) {
            Slot* slot = free_.back();
            free_.pop_back();
            co_return slot;
        }
    }
    auto waiter = std::make_shared<Waiter>(co_await net::this_coro::executor);
    waiter->deadline.expires_after(std::chrono::milliseconds(settings_.statement_timeout_ms));
    WaitForSlot wait{this, waiter};
    co_await net::async_initiate<decltype(net::use_awaitable), void()>(std::move(wait),
                                                                       net::use_awaitable);
    waiter->deadline.cancel();
    Slot* slot = nullptr;
    {
        const std::lock_guard lock(mutex_);
        slot = waiter->slot;
    }
    if (slot != nullptr) co_return slot;
    throw ProblemError(ProblemKind::unavailable,
                       fmt::format("all {} database connections stayed busy for {} ms; retry",
                                   settings_.size, settings_.statement_timeout_ms));
}

void ConnectionPool::stop() {
    std::deque<std::shared_ptr<Waiter>> dropped;
    {
        const std::lock_guard lock(mutex_);
        stopped_ = true;
        dropped.swap(waiters_);
    }
    for (const auto& waiter : dropped) {
        waiter->deadline.cancel();
        // The suspended request (it holds its waiter too): destroyed here, outside the lock.
        const auto request = std::move(waiter->resume);
    }
}

void ConnectionPool::release(Slot* slot) {
    std::function<void()> resume;
    {
        const std::lock_guard lock(mutex_);
        if (waiters_.empty() || stopped_) {
            free_.push_back(slot);
            return;
        }
        const auto waiter = std::move(waiters_.front());
        waiters_.pop_front();
        waiter->slot = slot;
        resume = std::move(waiter->resume);
    }
    resume();
}

net::awaitable<void> ConnectionPool::connect(Slot& slot) {
    slot.prepared.clear();
    slot.conn.reset();
    bool probe = false;
    {
        const std::lock_guard lock(mutex_);
        if (unreachable_) {
            if (probing_) {
                throw ProblemError(ProblemKind::unavailable,
                                   "the database is unreachable; retry later");
            }
            probing_ = probe = true;
        }
    }
    try {
        auto conn = co_await open();
        // A statement larger than the socket takes at once (a geofence of many vertices) is
        // sent from the event loop too, as the socket takes it (answer()).
        conn->set_nonblocking();
        // The API only reads (and writes geofences): a statement running longer than this is a
        // query the caller should narrow, not one to wait for.
        conn->send_script(fmt::format("SET statement_timeout = {}; SET TIME ZONE 'UTC'",
                                      settings_.statement_timeout_ms));
        (void)co_await answer(*conn);
        slot.conn = std::move(conn);
        set_reachable(true, probe);
        unreachable_log_.over("http: PostgreSQL reachable again");
    } catch (const db::DbError& e) {
        set_reachable(false, probe);
        unreachable_log_.occurred({{"error", e.what()}});
        throw ProblemError(ProblemKind::unavailable, "the database is unreachable; retry later");
    }
}

// libpq cannot look a host name up without blocking (PQconnectStartParams does it on the
// caller's thread), so the connection is opened by libpq's blocking connect on a thread of its
// own, and the request waits for that thread's eventfd in the event loop.
net::awaitable<std::unique_ptr<db::Connection>> ConnectionPool::open() const {
    auto opening = std::make_shared<Opening>();
    if (opening->done < 0) {
        throw db::DbError(
            "cannot connect to PostgreSQL: no eventfd: " + std::system_category().message(errno),
            "");
    }
    auto connect = [opening, dsn = settings_.dsn, timeout_s = settings_.connect_timeout_s] {
        std::unique_ptr<db::Connection> conn;
        std::exception_ptr error;
        try {
            conn = std::make_unique<db::Connection>(dsn, "trackd http", timeout_s);
        } catch (...) {
            error = std::current_exception();
        }
        {
            const std::lock_guard lock(opening->mutex);
            opening->conn = std::move(conn);
            opening->error = error;
        }
        const std::uint64_t one = 1;
        (void)!::write(opening->done, &one, sizeof one);
    };
    try {
        std::thread(std::move(connect)).detach();
    } catch (const std::system_error& e) {
        throw db::DbError(std::string("cannot connect to PostgreSQL: no thread: ") + e.what(), "");
    }

    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(settings_.connect_timeout_s);
    const auto ex = co_await net::this_coro::executor;
    SocketWait finished(ex, opening->done, deadline);
    (void)co_await finished.ready(SocketWait::read);
    std::unique_ptr<db::Connection> conn;
    std::exception_ptr error;
    {
        const std::lock_guard lock(opening->mutex);
        conn = std::move(opening->conn);
        error = opening->error;
    }
    if (error) std::rethrow_exception(error);
    if (!conn) {
        // Still connecting (a host name's lookup that does not end, a frozen server): the thread
        // finishes alone, within libpq's connect_timeout once past the lookup.
        throw db::DbError(fmt::format("cannot connect to PostgreSQL: no answer within "
                                      "pg.connect_timeout_s ({} s)",
                                      settings_.connect_timeout_s),
                          "");
    }
    co_return conn;
}

void ConnectionPool::set_reachable(bool reachable, bool probe) {
    const std::lock_guard lock(mutex_);
    unreachable_ = !reachable;
    if (probe) probing_ = false;
}

net::awaitable<db::Result> ConnectionPool::answer(db::Connection& conn) const {
    const bool sent = conn.flush();
    if (sent && conn.answer_ready()) co_return conn.answer();
    const auto limit = std::chrono::milliseconds(settings_.statement_timeout_ms) + kAnswerMargin;
    SocketWait socket(co_await net::this_coro::executor, conn,
                      std::chrono::steady_clock::now() + limit);
    // The rest of the statement first, as the server reads it, within the same limit.
    bool in_time = true;
    for (bool all_sent = sent; in_time && !all_sent;) {
        in_time = co_await socket.ready(SocketWait::write);
        if (in_time) all_sent = conn.flush();
    }
    while (in_time) {
        in_time = co_await socket.ready(SocketWait::read);
        if (in_time && conn.answer_ready()) co_return conn.answer();
    }
    conn.close();
    throw db::DbTimeout(fmt::format(
        "PostgreSQL did not answer within {} ms; the connection was closed", limit.count()));
}

net::awaitable<db::Result> ConnectionPool::execute(Slot& slot, const Statement& st,
                                                   const db::Params& params) {
    if (st.name.empty()) {
        slot.conn->send_query(st.sql, params, st.results);
        co_return co_await answer(*slot.conn);
    }
    if (slot.prepared.count(st.name) == 0) {
        // Statements built per request (a constant limit, the OGC filters present) are many
        // kinds: a connection keeps at most kMaxPrepared, then starts over.
        if (slot.prepared.size() >= kMaxPrepared) {
            slot.conn->send_script("DEALLOCATE ALL");
            (void)co_await answer(*slot.conn);
            slot.prepared.clear();
        }
        slot.conn->send_prepare(st.name, st.sql);
        (void)co_await answer(*slot.conn);
        slot.prepared.insert(st.name);
    }
    slot.conn->send_prepared(st.name, params, st.results);
    co_return co_await answer(*slot.conn);
}

net::awaitable<db::Result> ConnectionPool::run(const Statement& statement,
                                               const db::Params& params) {
    Slot* slot = co_await acquire();
    struct Release {
        ConnectionPool* pool;
        Slot* slot;
        ~Release() { pool->release(slot); }
    } release{this, slot};

    for (int attempt = 0;; ++attempt) {
        if (!slot->conn || !slot->conn->ok()) co_await connect(*slot);
        try {
            co_return co_await execute(*slot, statement, params);
        } catch (const db::DbTimeout& e) {
            slot->conn.reset();  // closed already
            set_reachable(false, false);
            unreachable_log_.occurred({{"error", e.what()}});
            throw ProblemError(
                ProblemKind::unavailable,
                fmt::format(
                    "the database did not answer within {} ms "
                    "(http.statement_timeout_ms + {} ms); retry later",
                    (std::chrono::milliseconds(settings_.statement_timeout_ms) + kAnswerMargin)
                        .count(),
                    kAnswerMargin.count()));
        } catch (const db::DbError& e) {
            if (e.sqlstate() == "57014") {
                throw ProblemError(
                    ProblemKind::unavailable,
                    fmt::format("the query took longer than http.statement_timeout_ms ({} ms); "
                                "narrow it (smaller bbox, radius, limit or time range) or retry",
                                settings_.statement_timeout_ms));
            }
            if (e.connection_lost()) {
                slot->conn.reset();
                if (attempt == 0) continue;  // the server restarted since: one fresh try
                throw ProblemError(ProblemKind::unavailable,
                                   "the database connection was lost; retry later");
            }
            // A prepared statement the server forgot (e.g. DISCARD by a pooler): re-prepare.
            if (e.sqlstate() == "26000" && attempt == 0) {
                slot->prepared.erase(statement.name);
                continue;
            }
            throw;
        }
    }
}

}  // namespace trackd::http
