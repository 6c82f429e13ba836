// sink::Sink on PostgreSQL/PostGIS (include/trackd/sink/sink.hpp states the contract): COPY
// binary of the history rows straight into their time partitions (the batch's ledger row
// written by the sink), the current state through a staging table and one upsert, dead
// letters through a staging table ON CONFLICT DO NOTHING, the conditional offsets update
// first. Partition DDL waits at most postgis.ddl_lock_timeout_ms and is tried again later.
// Owned by one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "trackd/config/config.hpp"
#include "trackd/sink/sink.hpp"

namespace trackd::db {
class Connection;
class DbError;
}  // namespace trackd::db

namespace trackd::sink::postgis {

// A history partition was attached while this transaction wrote rows of its range into the
// DEFAULT partition (another writer's or instance's create_history_partitions): PostgreSQL
// refuses the COPY ("new row for relation ..._default violates partition constraint") or the
// ATTACH ("updated partition constraint for default partition ... would be violated"). Nothing
// was stored; a retry routes the rows to the new partition. (SQLSTATE 23514 naming the DEFAULT
// partition: relation names are never translated, and no other constraint of the ingest
// transaction is on that table.)
bool default_partition_race(const db::DbError& e);

// A time partition of the history the sink COPYs into directly: rows with recorded_at in
// [from_us, to_us) (microseconds since the Unix epoch).
struct HistoryPartition {
    std::string table;  // schema-qualified, quoted: trackd."vehicle_telemetry_history_p20261202"
    std::int64_t oid = 0;
    std::int64_t from_us = 0;
    std::int64_t to_us = 0;
};

// The partition of each time in `times` among `partitions` (sorted by from_us, not
// overlapping): its index, or -1 where none holds it (the parent routes such a row, to the
// DEFAULT partition).
std::vector<int> route_to_partitions(const std::vector<HistoryPartition>& partitions,
                                     const std::vector<std::int64_t>& times);

class CopyEncoder;

class PostgisSink final : public Sink {
  public:
    PostgisSink(const config::Config& config, std::string application_name);
    ~PostgisSink() override;
    PostgisSink(const PostgisSink&) = delete;
    PostgisSink& operator=(const PostgisSink&) = delete;

    std::map<std::int32_t, Claim> claim(const std::vector<std::int32_t>& partitions) override;
    // Ends (pg_terminate_backend) trackd ingest sessions of this database that have waited
    // for their client in the middle of a statement for longer than
    // pg.idle_in_transaction_timeout_ms.
    int end_stuck_writers() override;
    void check_group() override;
    CommitResult commit(const batch::Batch& batch,
                        const std::map<std::int32_t, Fence>& fences) override;
    std::unordered_map<std::string, LatestPosition> load_latest_positions(
        const std::vector<std::int32_t>& partitions) override;
    void reconnect() override;

  private:
    db::Connection& connection();
    void ensure_partitions(const batch::Batch& batch);
    // The partition of each row of `batch` (route_to_partitions), reading the partitions
    // again when they are not known or when a row falls outside them (at most every 10 s).
    std::vector<int> route(const batch::Batch& batch);
    // BEGIN and the batch id; when `target` sends rows straight into partitions, also the
    // batch's ledger row, and false when one of those partitions is no longer attached (the
    // transaction is then to be rolled back).
    bool begin_batch(db::Connection& conn, const std::vector<int>& target, std::int64_t& batch_id);
    static void prepare_session(db::Connection& conn);

    const config::Config& config_;
    std::string application_name_;
    std::unique_ptr<db::Connection> conn_;
    // The COPY data of a batch, kept between batches: a fresh megabyte for each batch cost
    // its page faults every time.
    std::unique_ptr<CopyEncoder> encoder_;
    std::set<std::int64_t> partitions_known_;  // interval starts (us) known to exist
    // After partition DDL timed out on a lock: not before this time again.
    std::chrono::steady_clock::time_point ddl_retry_at_{};
    // The time range (us) of the rows committed while partition DDL was put off: they went to
    // the DEFAULT partition, and the next try covers their range too, which moves them out.
    std::optional<std::pair<std::int64_t, std::int64_t>> deferred_range_;
    // The partitions rows are COPYed into directly; read again when partitions_stale_.
    std::vector<HistoryPartition> partitions_;
    bool partitions_stale_ = true;
    std::chrono::steady_clock::time_point partitions_read_at_{};
    // After a failed commit that wrote into partitions directly, the next one goes through
    // the parent table: whatever broke, one way of writing always works.
    bool parent_only_next_ = false;
};

}  // namespace trackd::sink::postgis
