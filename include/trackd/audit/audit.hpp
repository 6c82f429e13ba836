// `trackd audit`: checks a live database against trackd's delivery promise, read-only.
//
// Checks (docs/operations.md, "Auditing the database"):
//  1. offsets: per Kafka partition of the topic, every offset is in history or dead letters at
//     most once, and none at or beyond the stored next_offset of the group; gaps below it are
//     information (transaction markers, compacted topics), never a violation;
//  2. current state: each vehicle's row is its latest history row by (recorded_at, kafka_offset),
//     and the vehicles of both tables are the same;
//  3. archive: trackd.archive_progress claims no batch that trackd.ingest_batches (with what its
//     pruning left in trackd.ingest_batches_pruned) lacks.
//
// Contract: run() reads in one REPEATABLE READ READ ONLY transaction, so a running trackd is
// seen at one instant (a batch is either wholly there or not at all) and nothing is written; it
// works on a hot standby and with a role in trackd_readonly. Every check is a set-based query;
// only the first `limit` violations of each kind travel to the client, with the total count.
// Throws db::DbError (connection, permissions) and core::ConfigError (a schema without trackd's
// tables, or offsets stored for neither the configured topic nor group while rows exist).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "trackd/db/connection.hpp"

namespace trackd::audit {

struct Options {
    // Checks 1 and 2 cover only history rows with recorded_at (and dead letters with
    // received_at) at or after now() minus this many seconds; nullopt: every row.
    std::optional<std::int64_t> since_s;
    std::string format = "text";  // text or json
    int limit = 20;               // violations listed per kind; the count is always the total
};

// "90s", "15m", "1h", "7d", "2w" (a positive whole number and one unit) -> seconds; nullopt
// when `text` is not such a duration.
std::optional<std::int64_t> parse_duration(std::string_view text);

// The arguments after `audit` (--since D, --format text|json, --limit N, also --flag=value).
// Throws core::ConfigError naming the flag.
Options parse_options(const std::vector<std::string>& args);

// Which stream's promise is checked: kafka.topic and kafka.group.
struct Scope {
    std::string topic;
    std::string group;
};

// A position as stored: vehicle time (RFC 3339, UTC) and Kafka coordinates.
struct RowRef {
    std::string recorded_at;
    std::int32_t partition = 0;
    std::int64_t offset = 0;
};

struct PartitionSummary {
    std::int32_t partition = 0;
    std::optional<std::int64_t> next_offset;  // nullopt: no row in trackd.kafka_offsets
    std::int64_t history_rows = 0;
    std::int64_t dead_letters = 0;
    std::optional<std::int64_t> lowest_offset;  // in either table
};

// An offset stored more than once (history rows + dead letters > 1).
struct Duplicate {
    std::int32_t partition = 0;
    std::int64_t offset = 0;
    std::int64_t history_rows = 0;
    std::int64_t dead_letters = 0;
};

// A stored message at or beyond the partition's next_offset (or with no offsets row at all).
struct BeyondCommitted {
    std::int32_t partition = 0;
    std::int64_t offset = 0;
    std::int64_t history_rows = 0;
    std::int64_t dead_letters = 0;
    std::optional<std::int64_t> next_offset;
};

// Offsets first..last (inclusive) below next_offset in neither table.
struct Gap {
    std::int32_t partition = 0;
    std::int64_t first = 0;
    std::int64_t last = 0;
};

struct StateViolation {
    std::string vehicle_id;
    std::string problem;            // "missing", "not_latest" or "no_history"
    std::optional<RowRef> current;  // the trackd.vehicle_current_state row
    std::optional<RowRef> latest;   // the latest history row
};

struct ArchiveViolation {
    std::string table;  // catalog.namespace.table
    std::string problem;
};

struct Report {
    std::string database;
    Scope scope;
    std::optional<std::int64_t> since_s;
    std::string window_start;  // RFC 3339 when since_s is set
    int limit = 20;

    // Check 1.
    std::vector<PartitionSummary> partitions;
    std::vector<Duplicate> duplicates;
    std::int64_t duplicates_total = 0;
    std::vector<BeyondCommitted> beyond;
    std::int64_t beyond_total = 0;
    bool gaps_checked = false;  // not with since_s: rows outside the window would show as gaps
    std::vector<Gap> gaps;
    std::int64_t gap_ranges_total = 0;
    std::int64_t gap_offsets_total = 0;

    // Check 2.
    std::int64_t vehicles_checked = 0;
    // Current-state rows older than the oldest history partition, whose history retention may
    // have dropped: not checked, only counted.
    std::int64_t vehicles_before_history = 0;
    std::string history_start;  // RFC 3339 start of the oldest time partition; empty: none
    std::vector<StateViolation> state;
    std::int64_t state_total = 0;

    // Check 3.
    bool archive_checked = false;  // false: no archive tables (schema before V0006)
    std::int64_t archive_tables = 0;
    std::vector<ArchiveViolation> archive;

    [[nodiscard]] std::int64_t violations() const {
        return duplicates_total + beyond_total + state_total +
               static_cast<std::int64_t>(archive.size());
    }
};

Report run(db::Connection& conn, const Scope& scope, const Options& options);

// The human-readable report: one section per check, OK or the violations.
std::string to_text(const Report& report);
// The same as one JSON object.
std::string to_json(const Report& report);

}  // namespace trackd::audit
