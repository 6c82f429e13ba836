#include "connection_pool.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <functional>
#include <system_error>

#include <boost/asio/async_result.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>
#include <sys/socket.h>
#include <unistd.h>

#include "trackd/core/log.hpp"

#include "problem.hpp"

namespace trackd::http {

namespace net = boost::asio;

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
        // Opening the connection blocks this thread, at most pg.connect_timeout_s.
        auto conn = std::make_unique<db::Connection>(settings_.dsn, "trackd http",
                                                     settings_.connect_timeout_s);
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

void ConnectionPool::set_reachable(bool reachable, bool probe) {
    const std::lock_guard lock(mutex_);
    unreachable_ = !reachable;
    if (probe) probing_ = false;
}

net::awaitable<db::Result> ConnectionPool::answer(db::Connection& conn) {
    if (conn.answer_ready()) co_return conn.answer();
    const auto limit = std::chrono::milliseconds(settings_.statement_timeout_ms) + kAnswerMargin;
    const auto ex = co_await net::this_coro::executor;
    // A copy of libpq's socket, owned by the descriptor: libpq may close its own (a broken
    // connection) while this one is still registered in the event loop.
    const int fd = ::dup(conn.socket());
    if (fd < 0) {
        conn.close();
        throw db::DbError(
            "cannot watch the connection's socket: " + std::system_category().message(errno),
            "08000");
    }
    net::posix::stream_descriptor socket(ex, fd);
    // Past the deadline the socket is shut down, which ends the wait below from any thread
    // without touching the descriptor object; `done` keeps a late expiry off the socket once
    // this call has returned (and closed its copy).
    struct Deadline {
        std::mutex mutex;
        bool done = false;
        bool expired = false;
    };
    const auto deadline = std::make_shared<Deadline>();
    net::steady_timer timer(ex, limit);
    timer.async_wait([deadline, fd](boost::system::error_code ec) {
        if (ec) return;
        const std::lock_guard lock(deadline->mutex);
        if (deadline->done) return;
        deadline->expired = true;
        ::shutdown(fd, SHUT_RDWR);
    });
    struct Finish {
        Deadline& d;
        net::steady_timer& timer;
        ~Finish() {
            {
                const std::lock_guard lock(d.mutex);
                d.done = true;
            }
            timer.cancel();
        }
    } finish{*deadline, timer};
    for (;;) {
        boost::system::error_code ec;  // an error shows in answer_ready()
        co_await socket.async_wait(net::posix::stream_descriptor::wait_read,
                                   net::redirect_error(net::use_awaitable, ec));
        {
            const std::lock_guard lock(deadline->mutex);
            if (deadline->expired) break;
        }
        if (conn.answer_ready()) co_return conn.answer();
    }
    conn.close();
    throw db::DbTimeout(fmt::format(
        "PostgreSQL did not answer within {} ms; the connection was closed", limit.count()));
}

net::awaitable<db::Result> ConnectionPool::execute(Slot& slot, const Statement& st,
                                                   const db::Params& params) {
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
