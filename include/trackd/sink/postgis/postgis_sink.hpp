// Writes batches to PostGIS, one transaction per batch, exactly once.
//
// Contract: commit() writes, in ONE transaction, the batch's history rows (COPY binary, in
// time order), the current-state upsert (latest row per vehicle, applied only where newer),
// the dead letters and the per-partition next offsets, the offsets only WHERE owner_epoch is
// ours. If a partition's epoch moved (another instance claimed it) nothing is written and the
// fenced partitions are returned, so the caller can drop them and commit the rest.
// Database errors propagate as db::DbError (connection_lost() says whether reconnecting
// helps). Owned by one thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "trackd/batch/batch.hpp"
#include "trackd/config/config.hpp"

namespace trackd::db {
class Connection;
}

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

struct CommitResult {
    std::set<std::int32_t> fenced;  // non-empty: nothing was committed
    std::int64_t ingest_batch_id = 0;
};

class PostgisSink {
  public:
    PostgisSink(const config::Config& config, std::string application_name);
    ~PostgisSink();
    PostgisSink(const PostgisSink&) = delete;
    PostgisSink& operator=(const PostgisSink&) = delete;

    // Takes ownership of partitions: bumps each one's owner epoch and returns it with the
    // stored next offset. Concurrent commits by a previous owner are fenced from then on.
    std::map<std::int32_t, Claim> claim(const std::vector<std::int32_t>& partitions);

    CommitResult commit(const batch::Batch& batch,
                        const std::map<std::int32_t, std::int64_t>& epochs);

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
};

}  // namespace trackd::sink::postgis
