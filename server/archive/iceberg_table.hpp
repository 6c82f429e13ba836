// One Iceberg v2 table in a local folder or on object storage (FileIO), committed through a
// Catalog: create, append a snapshot, and the maintenance that keeps it readable after a year of
// commits.
//
// Every commit follows the spec's optimistic protocol: build the new metadata from the current
// one, write it to a new file, swap the catalog pointer from base to new; when another writer
// moved the pointer first, reload and rebuild on top of it. When the swap's outcome is unknown
// (the answer to COMMIT was lost), the catalog is read back on a new connection and the outcome
// decided from it; a file the new version references is deleted only when the swap is known not
// to have happened. If the outcome cannot be learnt yet, CommitStateUnknown is thrown with every
// file kept (the caller starts over from the table; orphan clean-up removes what nothing
// references). The table's properties carry the archive's progress (trackd.archive-seq,
// kafka.offsets), and so does each archive snapshot's summary, so the table itself says what it
// holds. One object per thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "catalog.hpp"
#include "file_io.hpp"
#include "manifest.hpp"
#include "table_schema.hpp"

namespace trackd::archive {

// What the archive has committed: every batch with archive_seq <= archived_seq, and per Kafka
// partition the offset after the newest archived message.
struct Progress {
    std::int64_t archived_seq = 0;
    std::optional<std::int64_t> max_ingest_batch_id;
    std::map<std::int32_t, std::int64_t> kafka_offsets;
};

struct MaintenanceOptions {
    std::int64_t snapshot_max_age_ms = 0;
    int min_snapshots_to_keep = 1;
    int max_manifests = 8;
    std::int64_t orphan_min_age_ms = 0;
};

struct CompactionOptions {
    std::int64_t target_file_bytes = 128LL << 20;  // output files roll near this size
    std::int64_t small_file_bytes = 96LL << 20;    // files under this are rewritten...
    int min_files = 8;  // ...in a partition holding at least this many of them
};

struct CompactionReport {
    int partitions = 0;       // partitions rewritten
    int files_rewritten = 0;  // small files replaced
    int files_written = 0;
    std::int64_t rows = 0;
    int data_files_before = 0;  // live data files of the current snapshot
    int data_files_after = 0;
    int max_small_files_per_partition = 0;  // afterwards
};

class IcebergTable {
  public:
    // `partition`: the partition spec of a table this creates; an existing table partitioned
    // otherwise is refused by refresh() (the spec is fixed at creation).
    // Every file goes through `io`.
    IcebergTable(Catalog& catalog, FileIO& io, TableIdent ident, std::string location_uri,
                 int metadata_versions_max, PartitionUnit partition = PartitionUnit::day);

    // Reads the current metadata through the catalog, creating the table when it is missing.
    void refresh();
    [[nodiscard]] const nlohmann::ordered_json& metadata() const { return metadata_; }
    [[nodiscard]] const std::string& metadata_location() const { return metadata_location_; }
    [[nodiscard]] Progress progress() const;

    // Commits `files` as one append snapshot whose summary and the table properties say
    // `next`. `expected` is the progress the files continue from: if the table's progress is
    // not `expected.archived_seq` when committing (another archiver got there), nothing is
    // committed and false is returned: the files are referenced by nothing. Refreshes and
    // retries on catalog conflicts. Throws CommitStateUnknown when a commit's outcome cannot be
    // learnt: the files must be kept (they may be in the table).
    bool append(const std::vector<DataFile>& files, const Progress& expected, const Progress& next);

    // The maintenance steps, which Archiver::maintain runs each on its own, in this order.
    // merge_manifests and expire_snapshots build on metadata() as it is: refresh() first.
    // Merges the current snapshot's small data manifests into one (a "replace" snapshot) when it
    // has more than options.max_manifests; returns how many were replaced.
    int merge_manifests(const MaintenanceOptions& options);
    // Expires old snapshots; after the commit deletes the files only they referenced. Returns
    // (snapshots expired, files deleted).
    std::pair<int, int> expire_snapshots(const MaintenanceOptions& options);
    // Rewrites the small data files of each partition that has at least options.min_files of
    // them into files near options.target_file_bytes, in the table's sort order, committed as
    // a "replace" snapshot that carries the progress over. Beside other writers: on a conflict
    // it rebuilds its manifests on the new version, and gives up (deleting what it wrote) when
    // one of its input files is no longer live there. The replaced files stay for the snapshots
    // that still reference them, and go with snapshot expiry.
    CompactionReport compact(const CompactionOptions& options);
    // Deletes files under data/ and metadata/ that the current version does not reference and
    // that are older than options.orphan_min_age_ms; returns how many.
    int delete_orphans(const MaintenanceOptions& options);
    // Aborts the multipart uploads begun under the table's location and neither completed nor
    // aborted (an archiver killed while a large file went up) that are older than
    // options.orphan_min_age_ms; returns how many. Nothing for a local table, or when the
    // uploads cannot be listed (no key pair: logged).
    int abort_stale_uploads(const MaintenanceOptions& options);

    // A new file URI under the table's data/ directory for a partition value.
    [[nodiscard]] std::string new_data_file(std::int32_t partition) const;
    [[nodiscard]] FileIO& io() const { return io_; }
    [[nodiscard]] PartitionUnit partition_unit() const { return partition_; }

  private:
    using json = nlohmann::ordered_json;

    // The storage's time now (FileIO::stamp_now) less options.orphan_min_age_ms: what is older
    // than this may go. Warns when the storage's clock is a minute or more from this host's.
    std::chrono::system_clock::time_point storage_horizon(const MaintenanceOptions& options);
    // After a load from the catalog: the credentials it vended with the table, if any, are
    // the ones the table's files are reached with from now on.
    void adopt_vended_credentials();

    // One new table version, built by a commit step on the current one.
    struct NextVersion {
        json metadata;
        std::optional<CommitProgress> progress;
        // Files written for this attempt only (URIs): deleted when it is known not committed.
        std::vector<std::string> attempt_files;
    };
    // Builds the next version on metadata_ for attempt number `attempt`, or nullopt when there
    // is nothing (left) to commit.
    using Builder = std::function<std::optional<NextVersion>(int attempt)>;
    enum class Swap { committed, not_committed };

    // The optimistic commit loop every step shares: build, write, swap; on a conflict delete the
    // attempt's files, refresh and build again. True when committed, false when `build` found
    // nothing to do. Throws CommitStateUnknown (every file kept) when an outcome stays unknown.
    bool commit_with_retries(const char* operation, const Builder& build);
    // Writes `next` as the following metadata version and swaps the catalog pointer from
    // metadata_location_ to it, learning the outcome from the catalog if the answer was lost.
    Swap commit_metadata(json next, const std::optional<CommitProgress>& progress);
    // After a lost answer: did the swap from `base` to `next` happen? Reads the catalog once no
    // commit is in flight (new connection); `next` when it did, nullopt when not; throws
    // CommitStateUnknown when it cannot tell.
    std::optional<std::string> settle(const std::string& base, const std::string& next);
    // The same for a catalog that writes metadata itself: is the change from `base` to `next`
    // in the table the catalog holds once the lost request can no longer apply? Decided by the
    // snapshot the change adds (or the snapshots it removes). The current location when it is.
    std::optional<std::string> settle_change(const json& base, const json& next);
    json load_metadata(const std::string& location) const;
    // Throws, naming archive.partition, when `md`'s partition spec is not partition_'s.
    void check_partition_spec(const json& md) const;
    std::string write_metadata_file(const json& md) const;
    void delete_dropped_metadata(const json& before, const json& after) const;

    Catalog& catalog_;
    FileIO& io_;
    TableIdent ident_;
    std::string location_;  // URI, no trailing slash
    int metadata_versions_max_;
    PartitionUnit partition_;
    std::string metadata_location_;
    json metadata_;
};

}  // namespace trackd::archive
