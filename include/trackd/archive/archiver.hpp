// The Iceberg archive: copies committed history rows from PostGIS into an Apache Iceberg v2
// table (Parquet data, Avro manifests, JDBC catalog in the same PostgreSQL), exactly once.
//
// Contract: one archiver per table at a time, enforced by a PostgreSQL advisory lock held by the
// Archiver's own session; an Archiver that does not hold it archives nothing. Progress lives in
// the table (snapshot summary and properties), so a restarted archiver resumes from the table.
// Every method may throw db::DbError (PostgreSQL unavailable) or std::runtime_error (files),
// but maintain(), which reports its steps' failures instead; run() catches those itself, logs,
// backs off and goes on until `stop`. Not thread-safe: one Archiver, one thread. Uses its own
// connections, never the ingest path's.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "trackd/config/config.hpp"

namespace trackd::archive {

struct ArchiveReport {
    int commits = 0;
    std::int64_t rows = 0;
    std::int64_t files = 0;
    std::int64_t bytes = 0;         // Parquet bytes written
    std::int64_t archived_seq = 0;  // the table's progress afterwards
    int partitions_dropped = 0;     // by postgis.retention
};

// A maintenance step that failed: its name (merge_manifests, expire_snapshots, delete_orphans,
// abort_stale_uploads, apply_retention, prune_ledger) and its error.
struct MaintenanceFailure {
    std::string step;
    std::string error;
};

struct MaintainReport {
    int manifests_merged = 0;
    int snapshots_expired = 0;
    int files_deleted = 0;
    int orphans_deleted = 0;
    int uploads_aborted = 0;
    int partitions_dropped = 0;
    std::int64_t batches_pruned = 0;           // from the ledger trackd.ingest_batches (V0012)
    std::vector<MaintenanceFailure> failures;  // the steps that failed; the others ran
};

struct CompactReport {
    int partitions = 0;
    int files_rewritten = 0;
    int files_written = 0;
    std::int64_t rows = 0;
    int data_files_before = 0;
    int data_files_after = 0;
    int max_small_files_per_partition = 0;  // afterwards
};

class Archiver {
  public:
    explicit Archiver(const config::Config& config);
    ~Archiver();
    Archiver(const Archiver&) = delete;
    Archiver& operator=(const Archiver&) = delete;

    // Takes the one-archiver lock if it is free or becomes free within `wait`; true when this
    // Archiver holds it. (A one-shot command waits a little: the session of an archiver that
    // just exited may still hold the lock for a moment on a busy server.)
    bool try_lock(std::chrono::milliseconds wait = std::chrono::milliseconds(0));
    // Archives every batch committed so far (as many snapshots as archive.target_file_bytes
    // needs), then applies postgis.retention. Requires the lock.
    ArchiveReport archive_pending();
    // Merge manifests, expire snapshots, delete orphans, abort stale uploads, apply retention,
    // prune the batch ledger: each step on its own, so one that fails (logged, counted in
    // trackd_archive_maintenance_failures_total and listed in the report's failures) does not
    // keep the others from running. Requires the lock; throws only without it.
    MaintainReport maintain();
    // Rewrites small data files (archive.compact_min_files, archive.target_file_bytes). Needs
    // no lock: it commits beside a running archiver (each retries on the other's commit).
    CompactReport compact();
    // The loop of `trackd archive` and of `trackd run` with archive.enabled: waits for the lock,
    // commits when archive.target_file_bytes are pending or the oldest pending batch is
    // archive.commit_interval_s old, maintains every archive.maintenance_interval_s and compacts
    // every archive.compaction_interval_s (each interval from the start of the last run, failed
    // or not: a step that fails waits for the next one). Returns when `stop` is set.
    void run(const std::atomic<bool>& stop);

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace trackd::archive
