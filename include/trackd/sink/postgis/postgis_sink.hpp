// Writes batches to PostGIS, one transaction per batch, exactly once.
//
// Contract: commit() writes, in ONE transaction, the batch's history rows (COPY binary, in
// time order), the current-state upsert (latest row per vehicle by (recorded_at, offset),
// applied only where newer), the dead letters (a replayed one is a no-op) and the
// per-partition next offsets. The offsets update is the fence and comes first: it applies only
// WHERE owner_epoch is ours AND next_offset is the offset the batch starts from. So a batch is
// never stored twice: re-running a batch whose COMMIT reply was lost finds its own offsets
// already stored, writes nothing and says so (already_committed). If a partition's epoch moved
// (another instance claimed it) nothing is written and the fenced partitions are returned, so
// the caller can drop them and commit the rest. A stored offset that is neither where the
// batch starts nor where it ends (changed underneath trackd) throws OffsetConflict.
// Database errors propagate as db::DbError (connection_lost() says whether reconnecting
// helps). Owned by one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "trackd/batch/batch.hpp"
#include "trackd/config/config.hpp"

namespace trackd::db {
class Connection;
class DbError;
}  // namespace trackd::db

namespace trackd::sink::postgis {

struct Claim {
    std::int64_t epoch = 0;
    std::optional<std::int64_t> next_offset;  // nullopt: nothing stored yet for the partition
};

struct LatestPosition {
    std::int64_t recorded_at_us = 0;
    double longitude = 0;
    double latitude = 0;
    std::int32_t partition = 0;  // the Kafka partition it was read from
};

// What a batch's commit of one partition requires of the stored offsets row.
struct Fence {
    std::int64_t epoch = 0;
    // The next offset stored before this batch: where the batch starts (-1: nothing stored).
    std::int64_t expected_offset = -1;
};

struct CommitResult {
    std::set<std::int32_t> fenced;   // non-empty: nothing was committed
    bool already_committed = false;  // the batch was in before this call (a lost reply)
    std::int64_t ingest_batch_id = 0;
};

// The stored offsets moved in a way no trackd instance of this group does (rewound or
// advanced by hand, or a second writer outside the protocol): going on could store rows twice.
class OffsetConflict : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

// Another consumer group already stores offsets of the topic in this database: a second group
// would store every message again.
class GroupConflict : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

// A history partition was attached while this transaction wrote rows of its range into the
// DEFAULT partition (another writer's or instance's create_history_partitions): PostgreSQL
// refuses the COPY ("new row for relation ..._default violates partition constraint") or the
// ATTACH ("updated partition constraint for default partition ... would be violated"). Nothing
// was stored; a retry routes the rows to the new partition. (SQLSTATE 23514 naming the DEFAULT
// partition: relation names are never translated, and no other constraint of the ingest
// transaction is on that table.)
bool default_partition_race(const db::DbError& e);

class PostgisSink {
  public:
    PostgisSink(const config::Config& config, std::string application_name);
    ~PostgisSink();
    PostgisSink(const PostgisSink&) = delete;
    PostgisSink& operator=(const PostgisSink&) = delete;

    // Takes ownership of partitions: bumps each one's owner epoch and returns it with the
    // stored next offset. Concurrent commits by a previous owner are fenced from then on.
    // Waits at most pg.lock_timeout_ms for a previous owner's open batch (DbError 55P03, to be
    // retried). Throws GroupConflict when another group owns the topic here.
    std::map<std::int32_t, Claim> claim(const std::vector<std::int32_t>& partitions);

    // Throws GroupConflict, naming the other group and the fix, when trackd.kafka_offsets holds
    // offsets of this topic for a consumer group other than kafka.group.
    void check_group();

    CommitResult commit(const batch::Batch& batch, const std::map<std::int32_t, Fence>& fences);

    // The latest committed position of every vehicle whose latest position came from one of
    // `partitions` (messages are keyed by vehicle, so that is the vehicle's partition).
    std::unordered_map<std::string, LatestPosition> load_latest_positions(
        const std::vector<std::int32_t>& partitions);

    // Drops the connection and connects again (after connection_lost()).
    void reconnect();

  private:
    db::Connection& connection();
    void ensure_partitions(const batch::Batch& batch);
    static void prepare_session(db::Connection& conn);

    const config::Config& config_;
    std::string application_name_;
    std::unique_ptr<db::Connection> conn_;
    std::set<std::int64_t> partitions_known_;  // interval starts (us) known to exist
    // After partition DDL timed out on a lock: not before this time again.
    std::chrono::steady_clock::time_point ddl_retry_at_{};
    // The time range (us) of the rows committed while partition DDL was put off: they went to
    // the DEFAULT partition, and the next try covers their range too, which moves them out.
    std::optional<std::pair<std::int64_t, std::int64_t>> deferred_range_;
};

}  // namespace trackd::sink::postgis
