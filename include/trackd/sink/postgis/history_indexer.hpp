// Builds the closed indexes of history partitions whose time range has ended
// (postgis.defer_indexes; docs/ingest.md, "History index layout").
//
// Contract: one pass (run_once) looks at every time partition whose upper bound is at least
// postgis.index_grace_s in the past (with postgis.defer_indexes off: every partition); for each
// that lacks a closed index (the GiST on geom, the (vehicle_id, recorded_at DESC) btree:
// trackd.history_closed_indexes()) or has one left invalid by an interrupted build, it drops the
// invalid ones, builds the missing ones with CREATE INDEX CONCURRENTLY (ingest keeps writing to the
// partition, late rows included), and once both are valid drops the partition's hot BRINs. Every
// step is idempotent, so a pass cut short anywhere (connection lost, backend terminated, trackd
// killed) is finished by the next one. Beside that, whatever the setting, it summarizes the new
// block ranges of the BRIN indexes on the partitions being written (trackd.summarize_history_brins,
// V0017) and analyzes those that hold rows but have no statistics yet
// (trackd.analyze_new_history_partitions, V0020); run() does this on a second connection and
// thread, so that a build does not hold it up. One instance at a time builds (a session advisory
// lock); the others skip their builds. The connection's role must own the history table (as for
// postgis.retention). Threading: one thread owns an instance; run() starts a second one for the
// builds and joins it before it returns.
#pragma once

#include <atomic>
#include <memory>

#include "trackd/config/config.hpp"

namespace trackd::db {
class Connection;
}

namespace trackd::sink::postgis {

struct IndexPass {
    int partitions = 0;           // partitions finished in this pass (closed indexes valid, no hot)
    int indexes_built = 0;        // CREATE INDEX CONCURRENTLY that completed
    int invalid_dropped = 0;      // invalid indexes (interrupted builds) dropped before rebuilding
    int hot_dropped = 0;          // hot indexes dropped after the closed ones were valid
    int ranges_summarized = 0;    // BRIN block ranges of the partitions being written (V0017)
    int partitions_analyzed = 0;  // partitions being written analyzed for the first time (V0020)
    bool skipped = false;         // another instance holds the builder lock
};

class HistoryIndexer {
  public:
    explicit HistoryIndexer(const config::Config& config);
    ~HistoryIndexer();
    HistoryIndexer(const HistoryIndexer&) = delete;
    HistoryIndexer& operator=(const HistoryIndexer&) = delete;

    // With postgis.defer_indexes: gives the empty partitions not yet past the hot indexes
    // instead of the closed ones (made ahead before the setting was on); called before ingest
    // starts. Returns how many it changed; throws db::DbError.
    int defer_open_partitions();
    // One pass (see above): maintain_open_partitions() then close_partitions(); throws
    // db::DbError.
    IndexPass run_once();
    // The partitions being written: their BRINs' new ranges summarized, analyzed if they have
    // no statistics yet (fills ranges_summarized and partitions_analyzed). Needs no lock of
    // its own: another instance doing the same at once is skipped by the lock waits in SQL.
    IndexPass maintain_open_partitions();
    // The partitions due to close, under the builder lock (fills the rest). Without
    // postgis.defer_indexes every partition that still has hot indexes is due at once,
    // whatever its range (the setting was switched off): its rows get the closed indexes too.
    IndexPass close_partitions();
    // Until `stop`, on two threads and two connections: maintain_open_partitions() and
    // close_partitions(), each every postgis.index_check_interval_s, so that a build of
    // minutes holds up no summary. Database errors are logged and the step is tried again at
    // the next interval, on a new connection.
    void run(const std::atomic<bool>& stop);

  private:
    db::Connection& connection();
    db::Connection& open_connection();
    using Step = IndexPass (HistoryIndexer::*)();
    // Runs `step` every postgis.index_check_interval_s until `stop`; `conn` is the step's
    // connection, dropped after an error so that the next try starts a fresh session.
    void every_interval(const std::atomic<bool>& stop, Step step,
                        std::unique_ptr<db::Connection>& conn);

    const config::Config& config_;
    std::unique_ptr<db::Connection> conn_;       // close_partitions()
    std::unique_ptr<db::Connection> open_conn_;  // maintain_open_partitions()
};

}  // namespace trackd::sink::postgis
