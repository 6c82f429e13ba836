// The archive's view of PostGIS: which committed ingest batches are not archived yet, in commit
// order, and their rows.
//
// Progress marker (docs/archive.md, "Exactly once"): batch ids come from a sequence and several
// writers commit in parallel, so they do not commit in id order. stamp() gives every committed,
// unstamped batch in trackd.ingest_batches an archive_seq from its own sequence, under a
// transaction-level advisory lock: a stamping transaction sees only committed batches, and any
// later one (which waits for the lock) draws larger numbers. So once stamped, the set of batches
// with archive_seq <= N never changes, and "archived_seq = N" says exactly which rows the table
// holds. One object per connection, one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "trackd/db/connection.hpp"

#include "parquet_file_writer.hpp"

namespace trackd::archive {

struct Pending {
    std::int64_t batches = 0;
    std::int64_t rows = 0;
    double oldest_age_s = 0;  // age of the oldest stamped, unarchived batch (database clock)
};

// A contiguous range of stamps (after, upto] and what it holds.
struct Chunk {
    std::int64_t after = 0;
    std::int64_t upto = 0;
    std::int64_t rows = 0;
    std::int64_t min_batch = 0;
    std::int64_t max_batch = 0;
};

class HistorySource {
  public:
    explicit HistorySource(db::Connection& conn) : conn_(conn) {}

    // Stamps the batches committed since the last call; returns how many.
    std::int64_t stamp();
    Pending pending(std::int64_t archived_seq);
    // The next range after `archived_seq` holding at most about `max_rows` rows (at least one
    // batch), or nullopt when nothing is stamped beyond it.
    std::optional<Chunk> next_chunk(std::int64_t archived_seq, std::int64_t max_rows);
    // Streams the chunk's rows ordered by the partition (`partition_unit` "day" or "hour" of
    // recorded_at), vehicle_id (bytewise), recorded_at, kafka partition and offset: the
    // table's partitioning and sort order.
    void read(const Chunk& chunk, const std::string& partition_unit,
              const std::function<void(const ArchiveRow&)>& sink);

  private:
    db::Connection& conn_;
};

}  // namespace trackd::archive
