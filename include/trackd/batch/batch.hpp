// A batch: the unit of one PostGIS transaction.
//
// Contract: rows and dead letters are collected in Kafka order per partition; `next_offsets`
// holds, per partition, the offset after the last message the batch covers, so committing a
// batch means "every message of these partitions below these offsets is in the database".
// BatchBuilder is used by one thread; a finished Batch is handed over by move.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "trackd/core/position.hpp"
#include "trackd/core/rejection.hpp"

namespace trackd::batch {

struct Row {
    core::Position position;
    std::int32_t partition = 0;
    std::int64_t offset = 0;
    std::int64_t kafka_timestamp_ms = 0;  // the broker's timestamp, for freshness
    // trackd held no position of this vehicle when it read the row (none committed from the
    // partitions it owns, none read before): the current state most likely has no row for it.
    // A batch of such vehicles only is inserted without the upsert (docs/ingest.md, Delivery).
    bool first_seen = false;
};

struct DeadLetter {
    std::int32_t partition = 0;
    std::int64_t offset = 0;
    core::Reason reason = core::Reason::malformed_json;
    std::string detail;
    std::string payload;
};

struct Batch {
    std::vector<Row> rows;
    std::vector<DeadLetter> dead_letters;
    std::map<std::int32_t, std::int64_t> next_offsets;
    std::size_t bytes = 0;  // payload bytes of the messages it covers (the in-flight measure)

    [[nodiscard]] bool empty() const { return next_offsets.empty(); }
    [[nodiscard]] std::size_t messages() const { return rows.size() + dead_letters.size(); }

    // Removes everything belonging to `partition` (it was fenced or revoked).
    void drop_partition(std::int32_t partition);
};

struct Limits {
    std::size_t max_rows = 20000;
    std::size_t max_bytes = 16U << 20U;
    std::chrono::milliseconds max_age{500};
    // A batch whose writer is idle commits once its oldest message is this old (capped at
    // max_age): at a live rate rows wait for the database, not for the clock.
    std::chrono::milliseconds min_age{50};
};

class BatchBuilder {
  public:
    using Clock = std::chrono::steady_clock;

    explicit BatchBuilder(Limits limits) : limits_(limits) {}

    void add_row(Row row, std::size_t payload_bytes, Clock::time_point now);
    void add_dead_letter(DeadLetter dead, Clock::time_point now);

    // True when the batch reached max_rows or max_bytes, or holds anything older than max_age.
    [[nodiscard]] bool should_flush(Clock::time_point now) const;
    // True when the batch holds anything at least min_age old: it commits now if its writer
    // is idle (the caller knows).
    [[nodiscard]] bool may_flush_early(Clock::time_point now) const;
    [[nodiscard]] const Batch& current() const { return batch_; }
    Batch take();
    // Drops a revoked partition's rows. A batch left with no partition is never flushed, so
    // its bytes would stay counted in flight: they are returned (0 otherwise, the batch's bytes
    // then being released when it commits) and the batch starts afresh.
    std::size_t drop_partition(std::int32_t partition) {
        batch_.drop_partition(partition);
        if (!batch_.next_offsets.empty()) return 0;
        const std::size_t bytes = batch_.bytes;
        batch_ = Batch{};
        return bytes;
    }

  private:
    void touch(std::int32_t partition, std::int64_t offset, std::size_t bytes,
               Clock::time_point now);

    Limits limits_;
    Batch batch_;
    Clock::time_point first_added_{};
};

// Indices into batch.rows of the newest row per vehicle (by recorded_at, then Kafka order),
// which is what the current-state upsert needs: PostgreSQL refuses to update one row twice in
// one statement.
std::vector<std::size_t> latest_per_vehicle(const Batch& batch);

}  // namespace trackd::batch
