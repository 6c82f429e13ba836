#include "connection_pool.hpp"

#include <chrono>
#include <functional>

#include <fmt/format.h>

#include "trackd/core/log.hpp"

#include "problem.hpp"

namespace trackd::http {

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

ConnectionPool::Slot* ConnectionPool::acquire() {
    std::unique_lock lock(mutex_);
    const auto wait = std::chrono::milliseconds(settings_.statement_timeout_ms);
    if (!available_.wait_for(lock, wait, [this] { return !free_.empty(); })) {
        throw ProblemError(ProblemKind::unavailable,
                           fmt::format("all {} database connections stayed busy for {} ms; retry",
                                       settings_.size, settings_.statement_timeout_ms));
    }
    Slot* slot = free_.back();
    free_.pop_back();
    return slot;
}

void ConnectionPool::release(Slot* slot) {
    {
        const std::lock_guard lock(mutex_);
        free_.push_back(slot);
    }
    available_.notify_one();
}

void ConnectionPool::connect(Slot& slot) {
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
        auto conn = std::make_unique<db::Connection>(settings_.dsn, "trackd http",
                                                     settings_.connect_timeout_s);
        conn->set_answer_timeout(std::chrono::milliseconds(settings_.statement_timeout_ms) +
                                 kAnswerMargin);
        // The API only reads (and writes geofences): a statement running longer than this is a
        // query the caller should narrow, not one to wait for.
        conn->query(fmt::format("SET statement_timeout = {}", settings_.statement_timeout_ms));
        conn->query("SET TIME ZONE 'UTC'");
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

db::Result ConnectionPool::execute(Slot& slot, const Statement& st, const db::Params& params) {
    if (slot.prepared.count(st.name) == 0) {
        // Statements built per request (a constant limit, the OGC filters present) are many
        // kinds: a connection keeps at most kMaxPrepared, then starts over.
        if (slot.prepared.size() >= kMaxPrepared) {
            slot.conn->exec_script("DEALLOCATE ALL");
            slot.prepared.clear();
        }
        slot.conn->prepare(st.name, st.sql);
        slot.prepared.insert(st.name);
    }
    return slot.conn->query_prepared(st.name, params, st.results);
}

db::Result ConnectionPool::run(const Statement& statement, const db::Params& params) {
    Slot* slot = acquire();
    struct Release {
        ConnectionPool* pool;
        Slot* slot;
        ~Release() { pool->release(slot); }
    } release{this, slot};

    for (int attempt = 0;; ++attempt) {
        if (!slot->conn || !slot->conn->ok()) connect(*slot);
        try {
            return execute(*slot, statement, params);
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
