// The audit's queries. Each check is one statement over the whole (or windowed) tables; the
// client receives summaries, the first `limit` violations of each kind and their totals.
#include "trackd/audit/audit.hpp"

#include <fmt/format.h>

#include "trackd/core/error.hpp"

namespace trackd::audit {
namespace {

// RFC 3339 in UTC with microseconds, whatever the session's time zone.
std::string utc(const std::string& expr) {
    return fmt::format(R"(to_char(({}) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))",
                       expr);
}

std::int64_t to_i64(const std::optional<std::string>& v) { return v ? std::stoll(*v) : 0; }

std::optional<std::int64_t> opt_i64(const std::optional<std::string>& v) {
    if (!v) return std::nullopt;
    return std::stoll(*v);
}

// Rolls back on the way out: the audit writes nothing, and an error leaves no open transaction.
class ReadOnlySnapshot {
  public:
    explicit ReadOnlySnapshot(db::Connection& conn) : conn_(conn) {
        conn_.exec_script("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
    }
    ~ReadOnlySnapshot() {
        try {
            conn_.exec_script("ROLLBACK");
        } catch (...) {  // NOLINT(bugprone-empty-catch): the connection is gone, so is the snapshot
        }
    }
    ReadOnlySnapshot(const ReadOnlySnapshot&) = delete;
    ReadOnlySnapshot& operator=(const ReadOnlySnapshot&) = delete;

  private:
    db::Connection& conn_;
};

void require_schema(db::Connection& conn, const Scope& scope) {
    auto r = conn.query(
        "SELECT to_regclass('trackd.vehicle_telemetry_history') IS NOT NULL "
        "AND to_regclass('trackd.vehicle_current_state') IS NOT NULL "
        "AND to_regclass('trackd.dead_letters') IS NOT NULL "
        "AND to_regclass('trackd.kafka_offsets') IS NOT NULL, current_database()");
    if (r.at(0, 0) != "t") {
        throw core::StartupError("database " + r.at(0, 1) +
                                 " lacks trackd's tables; nothing to audit (run `trackd migrate` "
                                 "against the database trackd ingests into)");
    }
    // Rows stored, but offsets only for other streams: the audit was pointed at the wrong
    // topic or group, and would report every row as beyond the committed offsets.
    auto o = conn.query(
        "SELECT EXISTS (SELECT 1 FROM trackd.kafka_offsets WHERE topic = $1 AND "
        "consumer_group = $2), "
        "(SELECT string_agg(DISTINCT format('topic %L group %L', topic, consumer_group), ', ') "
        "FROM trackd.kafka_offsets), "
        "EXISTS (SELECT 1 FROM trackd.vehicle_telemetry_history) OR "
        "EXISTS (SELECT 1 FROM trackd.dead_letters WHERE topic = $1)",
        {scope.topic, scope.group});
    if (o.at(0, 0) == "f" && o.get(0, 1) && o.at(0, 2) == "t") {
        throw core::ConfigError("kafka.topic/kafka.group",
                                "trackd.kafka_offsets holds no offsets for topic '" + scope.topic +
                                    "' in group '" + scope.group + "', only for " + *o.get(0, 1) +
                                    "; audit with the topic and group trackd ingests with");
    }
}

// Check 1: one pass over history ∪ dead letters, grouped by (partition, offset); every kind of
// finding is a tagged branch over that one grouped set.
void check_offsets(db::Connection& conn, const Scope& scope, const std::string& window_start,
                   bool with_gaps, int limit, Report& report) {
    auto r = conn.query(
        R"(
WITH o AS (
  SELECT kafka_partition, next_offset FROM trackd.kafka_offsets
   WHERE topic = $1 AND consumer_group = $2
), u AS MATERIALIZED (
  SELECT kafka_partition, kafka_offset,
         count(*) FILTER (WHERE src = 'h') AS h, count(*) FILTER (WHERE src = 'd') AS d
    FROM (SELECT kafka_partition, kafka_offset, 'h' AS src
            FROM trackd.vehicle_telemetry_history WHERE recorded_at >= $3::timestamptz
          UNION ALL
          SELECT kafka_partition, kafka_offset, 'd'
            FROM trackd.dead_letters WHERE topic = $1 AND received_at >= $3::timestamptz) x
   GROUP BY kafka_partition, kafka_offset
), parts AS (
  SELECT coalesce(s.kafka_partition, o.kafka_partition) AS p, o.next_offset, s.h, s.d, s.lo
    FROM (SELECT kafka_partition, sum(h)::bigint AS h, sum(d)::bigint AS d,
                 min(kafka_offset) AS lo
            FROM u GROUP BY kafka_partition) s
    FULL JOIN o ON o.kafka_partition = s.kafka_partition
), dup AS (
  SELECT kafka_partition, kafka_offset, h, d, count(*) OVER () AS total
    FROM u WHERE h + d > 1
   ORDER BY kafka_partition, kafka_offset LIMIT $4
), beyond AS (
  SELECT u.kafka_partition, u.kafka_offset, u.h, u.d, o.next_offset, count(*) OVER () AS total
    FROM u LEFT JOIN o ON o.kafka_partition = u.kafka_partition
   WHERE o.next_offset IS NULL OR u.kafka_offset >= o.next_offset
   ORDER BY u.kafka_partition, u.kafka_offset LIMIT $4
), below AS (
  SELECT u.kafka_partition, u.kafka_offset, o.next_offset,
         lag(u.kafka_offset) OVER w AS prev, lead(u.kafka_offset) OVER w AS next
    FROM u JOIN o ON o.kafka_partition = u.kafka_partition
   WHERE $5::boolean AND u.kafka_offset < o.next_offset
  WINDOW w AS (PARTITION BY u.kafka_partition ORDER BY u.kafka_offset)
), gap AS (
  SELECT kafka_partition, first, last,
         count(*) OVER () AS ranges, sum(last - first + 1) OVER ()::bigint AS offsets
    FROM (SELECT kafka_partition, prev + 1 AS first, kafka_offset - 1 AS last
            FROM below WHERE kafka_offset - prev > 1
          UNION ALL
          SELECT kafka_partition, kafka_offset + 1, next_offset - 1
            FROM below WHERE next IS NULL AND kafka_offset + 1 < next_offset) g
   ORDER BY kafka_partition, first LIMIT $4
)
SELECT 'partition' AS kind, p, next_offset, h, d, lo, NULL::bigint, NULL::bigint FROM parts
UNION ALL
SELECT 'duplicate', kafka_partition, kafka_offset, h, d, NULL, total, NULL FROM dup
UNION ALL
SELECT 'beyond', kafka_partition, kafka_offset, h, d, next_offset, total, NULL FROM beyond
UNION ALL
SELECT 'gap', kafka_partition, first, last, NULL, NULL, ranges, offsets FROM gap
ORDER BY 1, 2, 3)",
        {scope.topic, scope.group, window_start, std::to_string(limit), with_gaps ? "t" : "f"});
    report.gaps_checked = with_gaps;
    for (int i = 0; i < r.rows(); ++i) {
        const std::string kind = r.at(i, 0);
        const auto partition = static_cast<std::int32_t>(std::stol(r.at(i, 1)));
        if (kind == "partition") {
            report.partitions.push_back(PartitionSummary{partition, opt_i64(r.get(i, 2)),
                                                         to_i64(r.get(i, 3)), to_i64(r.get(i, 4)),
                                                         opt_i64(r.get(i, 5))});
        } else if (kind == "duplicate") {
            report.duplicates.push_back(Duplicate{partition, std::stoll(r.at(i, 2)),
                                                  std::stoll(r.at(i, 3)), std::stoll(r.at(i, 4))});
            report.duplicates_total = std::stoll(r.at(i, 6));
        } else if (kind == "beyond") {
            report.beyond.push_back(BeyondCommitted{partition, std::stoll(r.at(i, 2)),
                                                    std::stoll(r.at(i, 3)), std::stoll(r.at(i, 4)),
                                                    opt_i64(r.get(i, 5))});
            report.beyond_total = std::stoll(r.at(i, 6));
        } else if (kind == "gap") {
            report.gaps.push_back(Gap{partition, std::stoll(r.at(i, 2)), std::stoll(r.at(i, 3))});
            report.gap_ranges_total = std::stoll(r.at(i, 6));
            report.gap_offsets_total = std::stoll(r.at(i, 7));
        }
    }
}

// Check 2: the latest history row per vehicle (DISTINCT ON, in the order the ingest's upsert
// uses: recorded_at, then kafka_offset) against trackd.vehicle_current_state, both ways.
void check_current_state(db::Connection& conn, const std::string& window_start, int limit,
                         Report& report) {
    auto r = conn.query(fmt::format(
                            R"(
WITH latest AS MATERIALIZED (
  SELECT DISTINCT ON (vehicle_id) vehicle_id, recorded_at, kafka_partition, kafka_offset, geom
    FROM trackd.vehicle_telemetry_history
   WHERE recorded_at >= $1::timestamptz
   ORDER BY vehicle_id, recorded_at DESC, kafka_offset DESC, kafka_partition DESC
), floor AS (
  -- Rows before the oldest time partition may have been dropped by retention.
  SELECT greatest($1::timestamptz,
                  coalesce((SELECT min(range_from) FROM trackd.history_partitions()
                             WHERE NOT is_default), '-infinity')) AS t
), problems AS (
  SELECT l.vehicle_id,
         CASE WHEN s.vehicle_id IS NULL THEN 'missing' ELSE 'not_latest' END AS problem,
         s.last_updated AS s_time, s.kafka_partition AS s_part, s.kafka_offset AS s_off,
         l.recorded_at AS l_time, l.kafka_partition AS l_part, l.kafka_offset AS l_off
    FROM latest l
    LEFT JOIN trackd.vehicle_current_state s ON s.vehicle_id = l.vehicle_id
   WHERE s.vehicle_id IS NULL
      OR s.last_updated <> l.recorded_at OR s.kafka_offset <> l.kafka_offset
      -- Same time and offset in another partition: any of the tied rows will do.
      OR ((s.kafka_partition <> l.kafka_partition OR ST_AsEWKB(s.geom) <> ST_AsEWKB(l.geom))
          AND NOT EXISTS (
            SELECT 1 FROM trackd.vehicle_telemetry_history h
             WHERE h.vehicle_id = s.vehicle_id AND h.recorded_at = s.last_updated
               AND h.kafka_partition = s.kafka_partition AND h.kafka_offset = s.kafka_offset
               AND ST_AsEWKB(h.geom) = ST_AsEWKB(s.geom)))
  UNION ALL
  SELECT s.vehicle_id, 'no_history', s.last_updated, s.kafka_partition, s.kafka_offset,
         NULL, NULL, NULL
    FROM trackd.vehicle_current_state s
   WHERE s.last_updated >= (SELECT t FROM floor)
     AND NOT EXISTS (SELECT 1 FROM latest l WHERE l.vehicle_id = s.vehicle_id)
)
SELECT (SELECT count(*) FROM latest),
       (SELECT count(*) FROM trackd.vehicle_current_state
         WHERE last_updated >= $1::timestamptz AND last_updated < (SELECT t FROM floor)),
       (SELECT {} FROM trackd.history_partitions() WHERE NOT is_default
         ORDER BY range_from LIMIT 1),
       p.vehicle_id, p.problem, {}, p.s_part, p.s_off, {}, p.l_part, p.l_off, p.total
  FROM (SELECT 1) AS one
  LEFT JOIN LATERAL (SELECT *, count(*) OVER () AS total FROM problems
                      ORDER BY vehicle_id COLLATE "C" LIMIT $2) p ON true
 ORDER BY p.vehicle_id COLLATE "C")",
                            utc("range_from"), utc("p.s_time"), utc("p.l_time")),
                        {window_start, std::to_string(limit)});
    for (int i = 0; i < r.rows(); ++i) {
        report.vehicles_checked = std::stoll(r.at(i, 0));
        report.vehicles_before_history = std::stoll(r.at(i, 1));
        report.history_start = r.get(i, 2).value_or("");
        if (!r.get(i, 3)) continue;  // no problem at all
        StateViolation v;
        v.vehicle_id = r.at(i, 3);
        v.problem = r.at(i, 4);
        if (r.get(i, 5)) {
            v.current = RowRef{r.at(i, 5), static_cast<std::int32_t>(std::stol(r.at(i, 6))),
                               std::stoll(r.at(i, 7))};
        }
        if (r.get(i, 8)) {
            v.latest = RowRef{r.at(i, 8), static_cast<std::int32_t>(std::stol(r.at(i, 9))),
                              std::stoll(r.at(i, 10))};
        }
        report.state_total = std::stoll(r.at(i, 11));
        report.state.push_back(std::move(v));
    }
}

// Check 3: what trackd.archive_progress claims against the batch log (trackd.ingest_batches,
// written by the sink and the history's trigger) and what its pruning kept of the rows it removed
// (trackd.ingest_batches_pruned, V0012): no stamp beyond the highest given out, no batch id
// beyond the highest among the batches it covers. Cheap: index lookups on small tables.
void check_archive(db::Connection& conn, Report& report) {
    auto exists = conn.query(
        "SELECT to_regclass('trackd.archive_progress') IS NOT NULL "
        "AND to_regclass('trackd.ingest_batches') IS NOT NULL, "
        "to_regclass('trackd.ingest_batches_pruned') IS NOT NULL");
    report.archive_checked = exists.at(0, 0) == "t";
    if (!report.archive_checked) return;
    // Before V0012 nothing was pruned.
    const std::string pruned =
        exists.at(0, 1) == "t"
            ? "(SELECT pruned_seq, max_ingest_batch_id FROM trackd.ingest_batches_pruned)"
            : "(SELECT NULL::bigint AS pruned_seq, NULL::bigint AS max_ingest_batch_id)";
    auto r = conn.query(fmt::format(R"(
SELECT format('%s.%s.%s', p.catalog_name, p.table_namespace, p.table_name),
       p.archived_seq, p.max_ingest_batch_id, b.max_seq, b.max_batch,
       p.archived_seq > coalesce(b.max_seq, 0),
       coalesce(p.max_ingest_batch_id > coalesce(b.max_batch, 0), false)
  FROM trackd.archive_progress p
  LEFT JOIN {} w ON true
  CROSS JOIN LATERAL (
    SELECT greatest((SELECT max(archive_seq) FROM trackd.ingest_batches), w.pruned_seq) AS max_seq,
           greatest((SELECT max(ingest_batch_id) FROM trackd.ingest_batches
                      WHERE archive_seq <= p.archived_seq),
                    CASE WHEN w.pruned_seq <= p.archived_seq
                         THEN w.max_ingest_batch_id END) AS max_batch) b
 ORDER BY 1)",
                                    pruned));
    report.archive_tables = r.rows();
    for (int i = 0; i < r.rows(); ++i) {
        const std::string table = r.at(i, 0);
        if (r.at(i, 5) == "t") {
            report.archive.push_back(ArchiveViolation{
                table, fmt::format("archived_seq {} but the highest archive_seq stamped in "
                                   "trackd.ingest_batches (pruned rows included) is {}",
                                   r.at(i, 1), r.get(i, 3).value_or("none"))});
        }
        if (r.at(i, 6) == "t") {
            report.archive.push_back(ArchiveViolation{
                table,
                fmt::format("max_ingest_batch_id {} but the highest batch with archive_seq <= {} "
                            "in trackd.ingest_batches (pruned rows included) is {}",
                            r.at(i, 2), r.at(i, 1), r.get(i, 4).value_or("none"))});
        }
    }
}

}  // namespace

Report run(db::Connection& conn, const Scope& scope, const Options& options) {
    ReadOnlySnapshot snapshot(conn);
    require_schema(conn, scope);
    Report report;
    report.scope = scope;
    report.since_s = options.since_s;
    report.limit = options.limit;
    // The window's start, fixed once: now() is the snapshot's start in this transaction.
    auto w = conn.query(
        "SELECT current_database(), coalesce(now() - make_interval(secs => $1::bigint), "
        "'-infinity'::timestamptz)::text, " +
            utc("now() - make_interval(secs => $1::bigint)"),
        {options.since_s ? std::optional(std::to_string(*options.since_s)) : std::nullopt});
    report.database = w.at(0, 0);
    const std::string window_start = w.at(0, 1);
    report.window_start = w.get(0, 2).value_or("");
    check_offsets(conn, scope, window_start, !options.since_s, options.limit, report);
    check_current_state(conn, window_start, options.limit, report);
    check_archive(conn, report);
    return report;
}

}  // namespace trackd::audit
