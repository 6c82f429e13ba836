#include "trackd/archive/archiver.hpp"

#include <array>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string_view>
#include <thread>
#include <tuple>

#include <fmt/format.h>

#include "trackd/core/log.hpp"
#include "trackd/core/metrics.hpp"
#include "trackd/core/pause_point.hpp"
#include "trackd/db/connection.hpp"

#include "catalog.hpp"
#include "file_io.hpp"
#include "history_source.hpp"
#include "iceberg_table.hpp"
#include "parquet_file_writer.hpp"
#include "table_schema.hpp"

namespace trackd::archive {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// "/var/lib/x" or "file:///var/lib/x" -> "file:///var/lib/x/<namespace>/<table>";
// "s3://bucket/prefix/" -> "s3://bucket/prefix/<namespace>/<table>".
// Empty with a REST catalog and no warehouse: the catalog chooses.
std::string table_location(const config::ArchiveConfig& c) {
    if (c.warehouse.empty()) return {};
    if (is_s3_uri(c.warehouse)) {
        const auto [bucket, prefix] = split_s3_uri(c.warehouse);
        return "s3://" + bucket + "/" + (prefix.empty() ? "" : prefix + "/") + c.namespace_ + "/" +
               c.table;
    }
    std::string path = local_path(c.warehouse);
    path = fs::absolute(path).lexically_normal().string();
    while (path.size() > 1 && path.back() == '/') path.pop_back();
    return "file://" + path + "/" + c.namespace_ + "/" + c.table;
}

void sleep_unless(const std::atomic<bool>& stop, std::chrono::milliseconds total) {
    const auto until = Clock::now() + total;
    while (!stop.load() && Clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
}

// The steps of maintenance, in the order they run (docs/archive.md, "Maintenance").
constexpr std::array<const char*, 6> kMaintenanceSteps = {"merge_manifests", "expire_snapshots",
                                                          "delete_orphans",  "abort_stale_uploads",
                                                          "apply_retention", "prune_ledger"};

// The archive metrics (docs/operations.md). The lag gauges are set by the archiver holding the
// lock only, each time it looks for pending batches.
struct Metrics {
    core::metrics::Gauge& lag_batches = core::metrics::gauge(
        "trackd_archive_lag_batches", "Committed ingest batches not yet in the Iceberg archive");
    core::metrics::Gauge& lag_rows = core::metrics::gauge(
        "trackd_archive_lag_rows", "History rows not yet in the Iceberg archive");
    core::metrics::Gauge& lag_seconds = core::metrics::gauge(
        "trackd_archive_lag_seconds",
        "Age of the oldest committed batch not yet in the Iceberg archive (0: none pending)");
    core::metrics::Gauge& lock_held = core::metrics::gauge(
        "trackd_archive_lock_held", "1 when this process holds the archiver lock");
    core::metrics::Histogram& commit_seconds = core::metrics::histogram(
        "trackd_archive_commit_duration_seconds",
        "Time of one archive snapshot: read history, write Parquet, commit the Iceberg metadata",
        core::metrics::exponential_buckets(0.01, 2, 15));  // 10 ms .. 160 s
    core::metrics::Counter& rows = core::metrics::counter(
        "trackd_archive_rows_total", "History rows committed to the Iceberg archive");
    core::metrics::Counter& commits = core::metrics::counter(
        "trackd_archive_commits_total", "Iceberg snapshots committed by the archiver");
    core::metrics::Counter& failures = core::metrics::counter(
        "trackd_archive_failures_total", "Archive rounds that failed and were retried");

    // By step (kMaintenanceSteps), each series there at 0 from the start.
    core::metrics::Counter& maintenance_failures(std::string_view step) const {
        return core::metrics::counter("trackd_archive_maintenance_failures_total",
                                      "Archive maintenance steps that failed (the other steps "
                                      "still ran), by step",
                                      {{"step", std::string(step)}});
    }
    Metrics() {
        for (const auto* step : kMaintenanceSteps) maintenance_failures(step);
    }
};

Metrics& metrics() {
    static Metrics m;
    return m;
}

}  // namespace

struct Archiver::Impl {
    const config::Config& config;
    TableIdent ident;
    std::string location;
    FileIO io;  // every archive file, for as long as the Archiver lives
    std::unique_ptr<db::Connection> lock_conn;  // holds the session advisory lock, nothing else
    std::unique_ptr<db::Connection> conn;       // stamps, reads the history, retention
    std::unique_ptr<Catalog> catalog;  // on its own connection(s): "trackd archive catalog"
    std::unique_ptr<IcebergTable> table;
    bool locked = false;
    const std::atomic<bool>* stop = nullptr;  // run()'s: a backlog stops between snapshots
    double bytes_per_row = 40;                // Parquet bytes per row, learnt from each commit

    explicit Impl(const config::Config& c)
        : config(c),
          ident{c.archive.catalog, c.archive.namespace_, c.archive.table},
          location(table_location(c.archive)),
          io(resolve_s3_settings(c.archive, aws_environment())) {
        // A warehouse that cannot work stops start-up here, naming the key, rather than in the
        // retry loop. Not with vended credentials: the catalog gives them at the first load.
        if (c.archive.rest_access_delegation.empty()) io.check_warehouse(c.archive.warehouse);
    }

    void connect() {
        if (conn && conn->ok() && lock_conn && lock_conn->ok()) return;
        reset();
        lock_conn = std::make_unique<db::Connection>(config.pg, "trackd archive lock");
        conn = std::make_unique<db::Connection>(config.pg, "trackd archive");
        // The catalog's commits run on their own session, which it replaces whenever one
        // breaks or loses a commit's answer (the outcome is then read on a new one).
        if (config.archive.catalog_type == "rest") {
            catalog = make_rest_catalog(config.archive);
        } else {
            catalog = make_jdbc_catalog([this] {
                return std::make_unique<db::Connection>(config.pg, "trackd archive catalog");
            });
        }
        table = std::make_unique<IcebergTable>(*catalog, io, ident, location,
                                               config.archive.metadata_versions_max,
                                               partition_unit(config.archive.partition));
    }

    void reset() {
        table.reset();
        catalog.reset();
        conn.reset();
        lock_conn.reset();  // closing the session releases its advisory lock
        locked = false;
    }

    bool try_lock() {
        connect();
        if (locked) return true;
        locked = lock_conn
                     ->query("SELECT pg_try_advisory_lock(hashtextextended($1, 0))",
                             {"trackd.archive " + ident.catalog + "." + ident.dotted()})
                     .at(0, 0) == "t";
        if (locked) register_table();
        return locked;
    }

    // From now on the retention guard protects every row this table has not archived, even
    // before its first commit, and the ledger keeps every batch it has not archived. Under the
    // pruning lock: a prune either ran before (its watermark is then visible here) or runs
    // after and counts this table.
    void register_table() {
        table->refresh();
        const auto seq = table->progress().archived_seq;
        conn->exec_script("BEGIN");
        try {
            conn->query(
                "SELECT pg_advisory_xact_lock(hashtextextended('trackd.ingest_batches prune', 0))");
            conn->query(
                "INSERT INTO trackd.archive_progress (catalog_name, table_namespace, table_name, "
                "archived_seq, metadata_location) VALUES ($1, $2, $3, $4, $5) "
                "ON CONFLICT DO NOTHING",
                {ident.catalog, ident.namespace_, ident.name, std::to_string(seq),
                 table->metadata_location()});
            const auto pruned =
                conn->query("SELECT max(pruned_seq) FROM trackd.ingest_batches_pruned").get(0, 0);
            conn->exec_script("COMMIT");
            if (pruned && std::stoll(*pruned) > seq) {
                core::log::warn(
                    "the batch ledger was pruned before this archive table was registered: the "
                    "batches up to archive_seq " +
                        *pruned + " are not archived into it",
                    {{"table", ident.dotted()}, {"archived_seq", std::to_string(seq)}});
            }
        } catch (const db::DbError&) {
            try {
                conn->exec_script("ROLLBACK");
            } catch (const db::DbError&) {
                // The connection is gone; the transaction with it.
            }
            throw;
        }
        mirror_progress();
    }

    // The ledger rows of batches every archive table holds (docs/archive.md, "The ledger").
    std::int64_t prune_ledger() const {
        return std::stoll(conn->query("SELECT trackd.prune_ingest_batches()").at(0, 0));
    }

    // A catalog outside PostgreSQL (REST) cannot record the progress in its commit: the mirror
    // follows each commit instead (and at start, for a commit whose mirror a crash cut off), so
    // it is behind the table for a moment at most, never ahead.
    void mirror_progress() {
        if (config.archive.catalog_type != "rest") return;
        const auto p = table->progress();
        const auto& md = table->metadata();
        const bool has_snapshot = md.contains("current-snapshot-id") &&
                                  md["current-snapshot-id"].is_number() &&
                                  md["current-snapshot-id"].get<std::int64_t>() >= 0;
        conn->query(
            "UPDATE trackd.archive_progress SET archived_seq = $4, max_ingest_batch_id = "
            "coalesce($5::bigint, max_ingest_batch_id), snapshot_id = $6, metadata_location = $7, "
            "updated_at = now() WHERE catalog_name = $1 AND table_namespace = $2 AND table_name "
            "= $3 AND archived_seq <= $4",
            {ident.catalog, ident.namespace_, ident.name, std::to_string(p.archived_seq),
             p.max_ingest_batch_id ? std::optional(std::to_string(*p.max_ingest_batch_id))
                                   : std::nullopt,
             has_snapshot
                 ? std::optional(std::to_string(md["current-snapshot-id"].get<std::int64_t>()))
                 : std::nullopt,
             table->metadata_location()});
    }

    void require_lock() const {
        if (!locked) throw std::logic_error("archive: the archiver lock is not held");
    }

    std::int64_t chunk_rows() const {
        // Tests that need many small snapshots make them in one run (the rows of one batch
        // are never split, so 1 gives one snapshot per batch).
        static const char* test_rows = std::getenv("TRACKD_TEST_ARCHIVE_CHUNK_ROWS");
        if (test_rows != nullptr) return std::max<std::int64_t>(std::atoll(test_rows), 1);
        // About four target-sized files per snapshot when there is a backlog.
        const auto rows = static_cast<std::int64_t>(
            4.0 * static_cast<double>(config.archive.target_file_bytes) / bytes_per_row);
        return std::max<std::int64_t>(rows, 10000);
    }

    // One snapshot: the chunk's rows into day-partitioned, size-bounded Parquet files.
    bool archive_chunk(HistorySource& source, const Chunk& chunk, const Progress& before,
                       ArchiveReport& report) {
        std::vector<DataFile> files;
        std::unique_ptr<ParquetFileWriter> writer;
        std::int32_t day = 0;
        Progress next = before;
        next.archived_seq = chunk.upto;
        next.max_ingest_batch_id =
            std::max(before.max_ingest_batch_id.value_or(chunk.max_batch), chunk.max_batch);
        std::vector<std::string> written;  // URIs, removed if the commit is abandoned
        const auto started = Clock::now();
        try {
            source.read(chunk, to_string(table->partition_unit()), [&](const ArchiveRow& row) {
                const auto d = partition_of(table->partition_unit(), row.recorded_at_us);
                if (writer &&
                    (d != day || writer->approximate_bytes() >= config.archive.target_file_bytes)) {
                    files.push_back(writer->finish());
                    writer.reset();
                }
                if (!writer) {
                    day = d;
                    const auto uri = table->new_data_file(day);
                    written.push_back(uri);
                    writer = std::make_unique<ParquetFileWriter>(io, uri, day);
                }
                writer->append(row);
                auto& off = next.kafka_offsets[row.kafka_partition];
                off = std::max(off, row.kafka_offset + 1);
            });
            if (writer) files.push_back(writer->finish());
            static core::PausePoint pause("TRACKD_TEST_ARCHIVE_PAUSE_AT", "archive");
            pause.at("data-files-written");
            if (!table->append(files, before, next)) {
                for (const auto& p : written) io.remove(p);
                return false;
            }
        } catch (const CommitStateUnknown&) {
            // The snapshot may be in the table: its files stay. The next round resumes from the
            // table's progress; if the snapshot is not there, orphan clean-up removes them.
            throw;
        } catch (...) {
            // Known not committed, so unreferenced: removing them now saves the orphan sweep
            // the work.
            for (const auto& p : written) io.remove(p);
            throw;
        }
        // Committed: the snapshot references the files from here on, so a failure mirroring
        // its progress into PostgreSQL (a restart of the server) must not remove them. The
        // table's own progress stays the one that counts; the next round mirrors it again.
        mirror_progress();
        std::int64_t rows = 0;
        std::int64_t bytes = 0;
        for (const auto& f : files) {
            rows += f.record_count;
            bytes += f.file_size_in_bytes;
        }
        if (rows > 0)
            bytes_per_row = std::max(4.0, static_cast<double>(bytes) / static_cast<double>(rows));
        metrics().commit_seconds.observe(
            std::chrono::duration<double>(Clock::now() - started).count());
        metrics().rows.inc(static_cast<std::uint64_t>(rows));
        metrics().commits.inc();
        ++report.commits;
        report.rows += rows;
        report.files += static_cast<std::int64_t>(files.size());
        report.bytes += bytes;
        core::log::info("archive committed",
                        {{"table", ident.dotted()},
                         {"rows", std::to_string(rows)},
                         {"files", std::to_string(files.size())},
                         {"archived_seq", std::to_string(next.archived_seq)},
                         {"max_ingest_batch_id", std::to_string(chunk.max_batch)}});
        return true;
    }

    // `retention`: also apply postgis.retention afterwards (--once); the loop leaves that to
    // its maintenance schedule.
    ArchiveReport archive_pending(bool retention) {
        require_lock();
        ArchiveReport report;
        table->refresh();
        HistorySource source(*conn);
        source.stamp();
        while (stop == nullptr || !stop->load()) {
            const auto before = table->progress();
            const auto chunk = source.next_chunk(before.archived_seq, chunk_rows());
            if (!chunk) break;
            if (!archive_chunk(source, *chunk, before, report)) table->refresh();
        }
        report.archived_seq = table->progress().archived_seq;
        if (retention) report.partitions_dropped = apply_retention();
        return report;
    }

    int apply_retention() {
        if (config.postgis.retention.empty()) return 0;
        // The function keeps every partition holding rows not yet in the archive (V0006). It
        // locks the history table ACCESS EXCLUSIVE, and every ingest COPY queues behind a lock
        // request that waits: so it waits at most postgis.ddl_lock_timeout_ms for a long reader
        // (a QGIS session idle in a transaction) and gives way, to try again next time.
        int n = 0;
        try {
            conn->exec_script(fmt::format("BEGIN; SET LOCAL lock_timeout = {}",
                                          config.postgis.ddl_lock_timeout_ms));
            n = std::stoi(
                conn->query("SELECT trackd.drop_history_partitions_before(now() - $1::interval)",
                            {config.postgis.retention})
                    .at(0, 0));
            conn->exec_script("COMMIT");
        } catch (const db::DbError& e) {
            try {
                conn->exec_script("ROLLBACK");
            } catch (const db::DbError&) {  // NOLINT(bugprone-empty-catch): connection gone
            }
            if (e.sqlstate() != "55P03") throw;
            core::log::warn("retention put off: a lock is held on the history table",
                            {{"error", e.what()}});
            return 0;
        }
        if (n > 0) {
            core::log::info(
                "history partitions dropped by retention",
                {{"count", std::to_string(n)}, {"retention", config.postgis.retention}});
        }
        return n;
    }

    CompactReport compact() {
        connect();
        CompactionOptions o;
        o.target_file_bytes = config.archive.target_file_bytes;
        o.small_file_bytes = config.archive.target_file_bytes * 3 / 4;
        o.min_files = config.archive.compact_min_files;
        const auto r = table->compact(o);
        return CompactReport{r.partitions,
                             r.files_rewritten,
                             r.files_written,
                             r.rows,
                             r.data_files_before,
                             r.data_files_after,
                             r.max_small_files_per_partition};
    }

    MaintainReport maintain() {
        require_lock();
        MaintenanceOptions o;
        o.snapshot_max_age_ms = config.archive.snapshot_max_age_s * 1000;
        o.min_snapshots_to_keep = config.archive.min_snapshots_to_keep;
        o.max_manifests = config.archive.max_manifests;
        o.orphan_min_age_ms = config.archive.orphan_min_age_s * 1000;
        MaintainReport r;
        // Each step on its own: one that fails (the store refusing a listing, the catalog away, a
        // lock timeout) is logged, counted and reported, and the steps after it still run. The
        // table steps read the table first: what a step before changed, or another writer.
        const auto step = [&](std::string_view name, const std::function<void()>& run) {
            try {
                run();
            } catch (const std::exception& e) {
                metrics().maintenance_failures(name).inc();
                core::log::warn(
                    "archive maintenance step failed",
                    {{"table", ident.dotted()}, {"step", std::string(name)}, {"error", e.what()}});
                r.failures.push_back({std::string(name), e.what()});
            }
        };
        step(kMaintenanceSteps[0], [&] {
            table->refresh();
            r.manifests_merged = table->merge_manifests(o);
        });
        step(kMaintenanceSteps[1], [&] {
            table->refresh();
            std::tie(r.snapshots_expired, r.files_deleted) = table->expire_snapshots(o);
        });
        step(kMaintenanceSteps[2], [&] { r.orphans_deleted = table->delete_orphans(o); });
        step(kMaintenanceSteps[3], [&] { r.uploads_aborted = table->abort_stale_uploads(o); });
        step(kMaintenanceSteps[4], [&] { r.partitions_dropped = apply_retention(); });
        step(kMaintenanceSteps[5], [&] { r.batches_pruned = prune_ledger(); });
        std::string failed;
        for (const auto& f : r.failures) failed += (failed.empty() ? "" : ",") + f.step;
        core::log::info("archive maintenance done",
                        {{"table", ident.dotted()},
                         {"manifests_merged", std::to_string(r.manifests_merged)},
                         {"snapshots_expired", std::to_string(r.snapshots_expired)},
                         {"files_deleted", std::to_string(r.files_deleted)},
                         {"orphans_deleted", std::to_string(r.orphans_deleted)},
                         {"uploads_aborted", std::to_string(r.uploads_aborted)},
                         {"ledger_batches_pruned", std::to_string(r.batches_pruned)},
                         {"failed_steps", failed}});
        return r;
    }
};

Archiver::Archiver(const config::Config& config) : impl_(std::make_unique<Impl>(config)) {}
Archiver::~Archiver() = default;

bool Archiver::try_lock(std::chrono::milliseconds wait) {
    const auto until = Clock::now() + wait;
    while (!impl_->try_lock()) {
        if (Clock::now() >= until) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return true;
}
ArchiveReport Archiver::archive_pending() { return impl_->archive_pending(true); }
MaintainReport Archiver::maintain() { return impl_->maintain(); }
CompactReport Archiver::compact() { return impl_->compact(); }

void Archiver::run(const std::atomic<bool>& stop) {
    auto& m = *impl_;
    m.stop = &stop;
    const auto& c = m.config.archive;
    const auto poll = std::chrono::milliseconds(c.poll_interval_ms);
    auto last_maintenance = Clock::now();
    auto last_compaction = Clock::now();
    bool said_waiting = false;
    auto backoff = std::chrono::milliseconds(100);
    // A store or database that stays away fails every round: logged when it starts, once a
    // minute while it lasts, and when it ends.
    core::log::Recurring failing(core::log::Level::warn, "archive failed, retrying");
    while (!stop.load()) {
        try {
            const bool locked = m.try_lock();
            metrics().lock_held.set(locked ? 1 : 0);
            if (!locked) {
                if (!said_waiting) {
                    core::log::warn("another archiver holds the archive lock; waiting",
                                    {{"table", m.ident.dotted()}});
                    said_waiting = true;
                }
                sleep_unless(stop, std::max(poll, std::chrono::milliseconds(1000)));
                continue;
            }
            if (said_waiting) {
                core::log::info("archiver running",
                                {{"table", m.ident.dotted()}, {"location", m.location}});
            }
            said_waiting = false;
            m.table->refresh();
            HistorySource source(*m.conn);
            source.stamp();
            const auto pending = source.pending(m.table->progress().archived_seq);
            metrics().lag_batches.set(static_cast<double>(pending.batches));
            metrics().lag_rows.set(static_cast<double>(pending.rows));
            metrics().lag_seconds.set(pending.batches > 0 ? pending.oldest_age_s : 0.0);
            const auto pending_bytes = static_cast<double>(pending.rows) * m.bytes_per_row;
            if (pending.batches > 0 && (pending_bytes >= static_cast<double>(c.target_file_bytes) ||
                                        pending.oldest_age_s >= c.commit_interval_s)) {
                m.archive_pending(false);
            }
            // Each interval counts from the start of the last run, so a step that fails waits
            // for the next one rather than being tried again every round (maintenance reports
            // its failing steps and runs the others; a failing compaction fails the round).
            if (c.maintenance_interval_s > 0 &&
                Clock::now() - last_maintenance >= std::chrono::seconds(c.maintenance_interval_s)) {
                last_maintenance = Clock::now();
                m.maintain();
            }
            if (c.compaction_interval_s > 0 &&
                Clock::now() - last_compaction >= std::chrono::seconds(c.compaction_interval_s)) {
                last_compaction = Clock::now();
                m.compact();
            }
            backoff = std::chrono::milliseconds(100);
            failing.over("archive works again", {{"table", m.ident.dotted()}});
        } catch (const std::exception& e) {
            // PostgreSQL away, a disk error, a conflicting writer: nothing archived is lost
            // (the table says what it holds), so start over on new connections after a pause.
            metrics().failures.inc();
            metrics().lock_held.set(0);
            failing.occurred(
                {{"error", e.what()}, {"retry_in_ms", std::to_string(backoff.count())}});
            m.reset();
            sleep_unless(stop, backoff);
            backoff = std::min(backoff * 2, std::chrono::milliseconds(5000));
            continue;
        }
        sleep_unless(stop, poll);
    }
    m.reset();
    metrics().lock_held.set(0);
}

}  // namespace trackd::archive
