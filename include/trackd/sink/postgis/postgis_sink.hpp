// sink::Sink on PostgreSQL/PostGIS (include/trackd/sink/sink.hpp states the contract): COPY
// binary of the history rows in time order, the current state through a staging table and one
// upsert, dead letters through a staging table ON CONFLICT DO NOTHING, the conditional offsets
// update first. Partition DDL waits at most postgis.ddl_lock_timeout_ms and is tried again
// later. Owned by one thread.
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
