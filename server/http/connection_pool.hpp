// The HTTP API's PostgreSQL connections: a fixed-size pool with prepared statements and a
// per-statement timeout.
//
// Contract: run() is a coroutine on the caller's executor (an HTTP I/O thread) that never blocks
// that thread on the database: it borrows a connection (waiting at most http.statement_timeout_ms
// for one), prepares the statement on that connection the first time it sees it, executes it with
// bound text parameters and returns the rows, sending each statement (nonblocking libpq) and
// waiting for its answer on the connection's socket in the event loop. A connection is opened by
// libpq's blocking connect on a thread of its own (libpq looks host names up only by blocking), the
// request waiting for it in the event loop at most pg.connect_timeout_s; while the database is
// unreachable one request at a time tries to connect, the others answer 503 at once. Every
// statement runs under `statement_timeout`, so a slow query ends with SQLSTATE 57014 instead of
// hanging. Connections are opened lazily and replaced when they break; a statement that failed
// because its connection was lost is retried once on a new one (API statements are single,
// idempotent statements). A server that does not answer at all (frozen, or cut off the network) is
// given statement_timeout_ms + kAnswerMargin, then the connection is closed. Failures that the
// caller cannot fix (timeout, database unreachable or not answering, pool exhausted) throw
// ProblemError 503; other database errors throw db::DbError. Thread-safe: requests on any of the
// I/O threads share it.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "trackd/core/log.hpp"
#include "trackd/db/connection.hpp"

namespace trackd::http {

// A SQL statement. Its text is built from constant fragments only; values are parameters.
// `results`: the format its values come back in (binary for the feature queries, whose columns
// feature_writer.hpp reads that way). A named statement is prepared once per connection and its
// plan cached (after five executions PostgreSQL may keep a generic plan, made without the
// values); one without a name is planned with its values at every execution.
struct Statement {
    std::string name;
    std::string sql;
    db::Format results = db::Format::text;
};

// A statement whose name derives from its text: for SQL assembled from optional fragments.
Statement statement_for(const std::string& sql, db::Format results = db::Format::text);
// A statement planned with its values each time: for queries whose best plan depends on them so
// much that a generic plan is no plan at all (a bbox and a time window over the history, where
// which index to read depends on how much of the partition each selects; a page of the vehicles
// in a large box, box_planned_each_time()).
Statement planned_each_time(const std::string& sql, db::Format results = db::Format::text);

struct PoolSettings {
    std::string dsn;
    int size = 4;
    int statement_timeout_ms = 5000;
    int connect_timeout_s = 10;
};

class ConnectionPool {
  public:
    explicit ConnectionPool(PoolSettings settings);
    ~ConnectionPool();
    ConnectionPool(const ConnectionPool&) = delete;
    ConnectionPool& operator=(const ConnectionPool&) = delete;

    boost::asio::awaitable<db::Result> run(const Statement& statement,
                                           const db::Params& params = {});
    // Once the event loops have stopped (no thread runs them): the requests still waiting for a
    // connection are dropped, and those still waiting on the database give their connections
    // back without resuming anyone when their loops destroy them.
    void stop();

    // Beyond statement_timeout_ms: the server's own timeout answers first when it can.
    static constexpr std::chrono::milliseconds kAnswerMargin{1000};

  private:
    static constexpr std::size_t kMaxPrepared = 256;
    struct Slot {
        std::unique_ptr<db::Connection> conn;
        std::set<std::string> prepared;
    };

    struct Waiter;       // a request waiting for a free connection
    struct WaitForSlot;  // the asynchronous operation acquire() waits on

    boost::asio::awaitable<Slot*> acquire();
    void release(Slot* slot);
    // WaitForSlot's halves: queue the waiter (or hand it a slot freed meanwhile), and take it off
    // the queue once its deadline has passed.
    void wait_for_slot(const std::shared_ptr<Waiter>& waiter, std::function<void()> resume);
    void deadline_passed(const std::shared_ptr<Waiter>& waiter);
    boost::asio::awaitable<db::Result> execute(Slot& slot, const Statement& statement,
                                               const db::Params& params);
    boost::asio::awaitable<void> connect(Slot& slot);
    // A new connection, opened within pg.connect_timeout_s (DbError otherwise).
    boost::asio::awaitable<std::unique_ptr<db::Connection>> open() const;
    // The answer to what was sent on `conn`, waited for in the event loop, at most
    // statement_timeout_ms + kAnswerMargin; past that the connection is closed (DbTimeout).
    boost::asio::awaitable<db::Result> answer(db::Connection& conn) const;
    // `probe`: this was the one connect allowed while unreachable.
    void set_reachable(bool reachable, bool probe);

    PoolSettings settings_;
    std::vector<std::unique_ptr<Slot>> slots_;
    std::vector<Slot*> free_;
    std::deque<std::shared_ptr<Waiter>> waiters_;  // first come, first served
    std::mutex mutex_;
    // After a failed connect (or a server that did not answer), one request at a time tries to
    // connect again; the others answer 503 at once instead of each waiting
    // pg.connect_timeout_s for a server that is away. Guarded by mutex_.
    bool unreachable_ = false;
    bool probing_ = false;
    bool stopped_ = false;  // guarded by mutex_
    // Every request tries to connect while PostgreSQL is away: said once a minute, not each time.
    core::log::Recurring unreachable_log_{core::log::Level::warn, "http: PostgreSQL unreachable"};
};

}  // namespace trackd::http
