#include "trackd/sink/postgis/history_indexer.hpp"

#include <chrono>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "trackd/core/log.hpp"
#include "trackd/core/metrics.hpp"
#include "trackd/db/connection.hpp"

namespace trackd::sink::postgis {
namespace {

core::metrics::Counter& indexes_built() {
    static auto& c = core::metrics::counter(
        "trackd_history_indexes_built_total",
        "Closed indexes (GiST, btree) built on history partitions whose range ended "
        "(postgis.defer_indexes)");
    return c;
}

core::metrics::Counter& invalid_dropped() {
    static auto& c = core::metrics::counter(
        "trackd_history_invalid_indexes_dropped_total",
        "Invalid history partition indexes (an interrupted CREATE INDEX CONCURRENTLY) dropped "
        "to be built again");
    return c;
}

core::metrics::Counter& ranges_summarized() {
    static auto& c = core::metrics::counter(
        "trackd_history_brin_ranges_summarized_total",
        "Block ranges of the history partitions' BRIN indexes summarized by trackd's index "
        "maintenance (trackd.summarize_history_brins)");
    return c;
}

core::metrics::Counter& partitions_analyzed() {
    static auto& c = core::metrics::counter(
        "trackd_history_partitions_analyzed_total",
        "History partitions being written that trackd's index maintenance analyzed because they "
        "held rows and had no statistics yet (trackd.analyze_new_history_partitions)");
    return c;
}

core::metrics::Counter& index_failures() {
    static auto& c = core::metrics::counter(
        "trackd_history_index_pass_failures_total",
        "Index maintenance passes of the history cut short by a database error (tried again "
        "at the next postgis.index_check_interval_s)");
    return c;
}

std::vector<std::string> column(const db::Result& r) {
    std::vector<std::string> out;
    out.reserve(static_cast<std::size_t>(r.rows()));
    for (int i = 0; i < r.rows(); ++i) out.push_back(r.at(i, 0));
    return out;
}

}  // namespace

HistoryIndexer::HistoryIndexer(const config::Config& config) : config_(config) {}
HistoryIndexer::~HistoryIndexer() = default;

db::Connection& HistoryIndexer::connection() {
    if (!conn_ || !conn_->ok()) {
        conn_ = std::make_unique<db::Connection>(config_.pg, "trackd history indexer");
    }
    return *conn_;
}

db::Connection& HistoryIndexer::open_connection() {
    if (!open_conn_ || !open_conn_->ok()) {
        open_conn_ = std::make_unique<db::Connection>(config_.pg, "trackd history summaries");
    }
    return *open_conn_;
}

int HistoryIndexer::defer_open_partitions() {
    const auto n =
        std::stoi(connection()
                      .query("SELECT trackd.defer_open_history_partition_indexes($1::int)",
                             {std::to_string(config_.postgis.ddl_lock_timeout_ms)})
                      .at(0, 0));
    if (n > 0) {
        core::log::info("open history partitions made ahead now have the hot indexes",
                        {{"partitions", std::to_string(n)}});
    }
    return n;
}

IndexPass HistoryIndexer::maintain_open_partitions() {
    IndexPass pass;
    auto& conn = open_connection();
    // The BRINs of the partitions being written: their new block ranges get a summary here,
    // since PostgreSQL's own requests (autosummarize) overflow under a heavy ingest (V0017).
    pass.ranges_summarized = std::stoi(conn.query("SELECT trackd.summarize_history_brins($1::int)",
                                                  {std::to_string(config_.postgis.index_grace_s)})
                                           .at(0, 0));
    ranges_summarized().inc(pass.ranges_summarized);
    // A partition being written that autovacuum has not analyzed yet: without statistics the
    // planner reads a time window through the whole btree instead of the BRIN (V0020).
    pass.partitions_analyzed =
        std::stoi(conn.query("SELECT trackd.analyze_new_history_partitions($1::int)",
                             {std::to_string(config_.postgis.index_grace_s)})
                      .at(0, 0));
    if (pass.partitions_analyzed > 0) {
        partitions_analyzed().inc(pass.partitions_analyzed);
        core::log::info("analyzed history partitions being written that had no statistics",
                        {{"partitions", std::to_string(pass.partitions_analyzed)}});
    }
    return pass;
}

IndexPass HistoryIndexer::run_once() {
    IndexPass pass = maintain_open_partitions();
    const IndexPass closed = close_partitions();
    pass.partitions = closed.partitions;
    pass.indexes_built = closed.indexes_built;
    pass.invalid_dropped = closed.invalid_dropped;
    pass.hot_dropped = closed.hot_dropped;
    pass.skipped = closed.skipped;
    return pass;
}

IndexPass HistoryIndexer::close_partitions() {
    IndexPass pass;
    auto& conn = connection();
    // Held by the session: released when the pass ends, or when the connection dies.
    if (conn.query("SELECT pg_try_advisory_lock(hashtext('trackd.vehicle_telemetry_history "
                   "indexes'))")
            .at(0, 0) != "t") {
        pass.skipped = true;
        return pass;
    }
    struct Unlock {
        db::Connection& c;
        ~Unlock() {
            try {
                c.query(
                    "SELECT pg_advisory_unlock(hashtext('trackd.vehicle_telemetry_history "
                    "indexes'))");
            } catch (const db::DbError&) {  // a lost session has released it already
            }
        }
    } unlock{conn};

    const auto due =
        column(conn.query("SELECT partition_name FROM trackd.history_partition_indexes() "
                          "WHERE (range_to <= now() - make_interval(secs => $1::int) OR NOT "
                          "$2::boolean) "
                          "AND cardinality(closed_missing) + cardinality(closed_invalid) + "
                          "cardinality(hot_present) > 0 ORDER BY range_to",
                          {std::to_string(config_.postgis.index_grace_s),
                           config_.postgis.defer_indexes ? "true" : "false"}));
    for (const auto& partition : due) {
        // An index left by an interrupted CREATE INDEX CONCURRENTLY is invalid (the planner
        // ignores it, writes still maintain it): drop it and build it again.
        for (const auto& stmt :
             column(conn.query("SELECT format('DROP INDEX CONCURRENTLY IF EXISTS trackd.%I', n) "
                               "FROM trackd.history_partition_indexes(), unnest(closed_invalid) n "
                               "WHERE partition_name = $1",
                               {partition}))) {
            conn.exec_script(stmt);
            ++pass.invalid_dropped;
            invalid_dropped().inc();
            core::log::warn("dropped an invalid history index to build it again",
                            {{"partition", partition}, {"statement", stmt}});
        }
        // CONCURRENTLY: a late row for this partition must never wait for the build.
        for (const auto& stmt : column(conn.query(
                 "SELECT format('CREATE INDEX CONCURRENTLY IF NOT EXISTS %I ON trackd.%I %s', "
                 "$1 || c.suffix, $1, c.definition) FROM trackd.history_closed_indexes() c "
                 "WHERE to_regclass(format('trackd.%I', $1 || c.suffix)) IS NULL",
                 {partition}))) {
            const auto t0 = std::chrono::steady_clock::now();
            conn.exec_script(stmt);
            ++pass.indexes_built;
            indexes_built().inc();
            core::log::info("built a history partition index",
                            {{"partition", partition},
                             {"statement", stmt},
                             {"seconds", std::to_string(std::chrono::duration<double>(
                                                            std::chrono::steady_clock::now() - t0)
                                                            .count())}});
        }
        const auto left = conn.query(
            "SELECT cardinality(closed_missing) + cardinality(closed_invalid) "
            "FROM trackd.history_partition_indexes() WHERE partition_name = $1",
            {partition});
        if (left.rows() == 0) continue;      // dropped meanwhile (retention)
        if (left.at(0, 0) != "0") continue;  // a concurrent DDL interfered: next pass
        for (const auto& stmt :
             column(conn.query("SELECT format('DROP INDEX CONCURRENTLY IF EXISTS trackd.%I', n) "
                               "FROM trackd.history_partition_indexes(), unnest(hot_present) n "
                               "WHERE partition_name = $1",
                               {partition}))) {
            conn.exec_script(stmt);
            ++pass.hot_dropped;
        }
        ++pass.partitions;
    }
    if (pass.partitions > 0) {
        core::log::info("history partitions closed",
                        {{"partitions", std::to_string(pass.partitions)},
                         {"indexes_built", std::to_string(pass.indexes_built)},
                         {"invalid_dropped", std::to_string(pass.invalid_dropped)}});
    }
    return pass;
}

void HistoryIndexer::every_interval(const std::atomic<bool>& stop, Step step,
                                    std::unique_ptr<db::Connection>& conn) {
    const auto interval = std::chrono::seconds(config_.postgis.index_check_interval_s);
    auto next = std::chrono::steady_clock::now();
    // PostgreSQL away fails every pass: logged when it starts, once a minute, and when it ends.
    core::log::Recurring cut_short(core::log::Level::warn,
                                   "history index maintenance cut short; tried again later");
    while (!stop.load()) {
        if (std::chrono::steady_clock::now() >= next) {
            try {
                (this->*step)();
                cut_short.over("history index maintenance works again");
            } catch (const db::DbError& e) {
                index_failures().inc();
                conn.reset();  // a fresh session next time (an advisory lock goes with it)
                cut_short.occurred({{"error", e.what()}, {"sqlstate", e.sqlstate()}});
            } catch (const std::exception& e) {
                index_failures().inc();
                conn.reset();
                core::log::error("history index maintenance failed; tried again later",
                                 {{"error", e.what()}});
            }
            next = std::chrono::steady_clock::now() + interval;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
}

void HistoryIndexer::run(const std::atomic<bool>& stop) {
    // Two loops, two connections: a closed partition's build takes minutes on a large
    // partition, and the partitions being written must not wait that long for their summaries.
    std::thread builder(
        [this, &stop] { every_interval(stop, &HistoryIndexer::close_partitions, conn_); });
    every_interval(stop, &HistoryIndexer::maintain_open_partitions, open_conn_);
    builder.join();
}

}  // namespace trackd::sink::postgis
