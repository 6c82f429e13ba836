#include "trackd/sink/postgis/postgis_sink.hpp"

#include <algorithm>
#include <array>
#include <numeric>
#include <string_view>
#include <unordered_set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "trackd/core/log.hpp"
#include "trackd/core/metrics.hpp"
#include "trackd/core/pause_point.hpp"
#include "trackd/db/connection.hpp"
#include "trackd/events/counters.hpp"

#include "copy_encoder.hpp"
#include "geofence_events.hpp"
#include "spatial_order.hpp"

namespace trackd::sink::postgis {
namespace {

constexpr std::int64_t kHourUs = 3600LL * 1000000LL;
// How long partition DDL that timed out on a lock waits before its next try.
constexpr std::chrono::seconds kDdlRetry{30};

core::metrics::Counter& partitions_deferred() {
    static auto& c = core::metrics::counter(
        "trackd_partition_ddl_deferred_total",
        "History partition creations put off because a lock was held past "
        "postgis.ddl_lock_timeout_ms (rows went to the DEFAULT partition meanwhile)");
    return c;
}

core::metrics::Counter& dead_letters_replayed() {
    static auto& c = core::metrics::counter(
        "trackd_dead_letters_replayed_total",
        "Refused messages read again whose dead letter was already stored (no second row)");
    return c;
}

std::int64_t interval_us(const std::string& interval) {
    if (interval == "hour") return kHourUs;
    if (interval == "day") return kHourUs * 24;
    if (interval == "week") return kHourUs * 24 * 7;
    return kHourUs * 24 * 31;  // month: an upper bound is enough to look ahead
}

// Rows of history and of the current-state staging table have the same ten columns:
// vehicle_id, recorded_at/last_updated, geom, speed_kmh, heading_deg, accuracy_m, attributes,
// ingest_batch_id, kafka_partition, kafka_offset.
void encode_row(CopyEncoder& enc, const batch::Row& row, std::int64_t batch_id) {
    const auto& p = row.position;
    enc.row(10);
    enc.text(p.vehicle_id);
    enc.timestamptz(p.recorded_at_us);
    enc.point_z_4326(p.longitude, p.latitude, p.altitude_m.value_or(0.0));
    enc.float4(p.speed_kmh);
    enc.float4(p.heading_deg);
    enc.float4(p.accuracy_m);
    enc.jsonb(p.attributes_json);
    enc.int8(batch_id);
    enc.int4(row.partition);
    enc.int8(row.offset);
}

core::metrics::Counter& current_state_insert_fallbacks() {
    static auto& c = core::metrics::counter(
        "trackd_current_state_insert_fallbacks_total",
        "Batches of vehicles seen for the first time of which one was in the current state "
        "already (written by another instance or by hand): upserted instead of inserted");
    return c;
}

std::string pg_int_array(const std::vector<std::int64_t>& values) {
    std::string out = "{";
    for (size_t i = 0; i < values.size(); ++i) {
        if (i > 0) out += ',';
        out += std::to_string(values[i]);
    }
    return out + "}";
}

// Dead-letter details quote parts of bad payloads, which may be invalid UTF-8 or hold NUL;
// PostgreSQL text accepts neither, and a batch must never fail on a bad message's bytes.
std::string safe_text(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    size_t i = 0;
    while (i < s.size()) {
        const auto c = static_cast<unsigned char>(s[i]);
        size_t len = 0;
        if (c == 0) {
            len = 0;
        } else if (c < 0x80) {
            len = 1;
        } else if ((c & 0xE0U) == 0xC0U && c >= 0xC2) {
            len = 2;
        } else if ((c & 0xF0U) == 0xE0U) {
            len = 3;
        } else if ((c & 0xF8U) == 0xF0U && c <= 0xF4) {
            len = 4;
        }
        bool ok = len > 0 && i + len <= s.size();
        for (size_t k = 1; ok && k < len; ++k) {
            ok = (static_cast<unsigned char>(s[i + k]) & 0xC0U) == 0x80U;
        }
        if (ok && len >= 3) {  // overlong forms, UTF-16 surrogates, beyond U+10FFFF
            const auto c1 = static_cast<unsigned char>(s[i + 1]);
            ok = !((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 >= 0xA0) ||
                   (c == 0xF0 && c1 < 0x90) || (c == 0xF4 && c1 >= 0x90));
        }
        if (ok) {
            out.append(s.substr(i, len));
            i += len;
        } else {
            out += '?';
            ++i;
        }
    }
    return out;
}

// ROLLBACK that never throws: after a failure the connection may be gone, which ends the
// transaction just as well.
void rollback_quietly(db::Connection& conn) {
    try {
        conn.exec_script("ROLLBACK");
    } catch (const db::DbError&) {  // NOLINT(bugprone-empty-catch)
    }
}

// The offsets update matched fewer partitions than the batch covers: find out why, from the
// rows as they are now (the update waited for any claim in flight, so that is visible).
// Every partition at the batch's end offset with our epoch: the batch is in already (a lost
// COMMIT reply). Another epoch: fenced. Anything else: the offsets moved underneath us.
void classify_unmatched(db::Connection& conn, const db::Result& updated,
                        const std::vector<std::int64_t>& parts,
                        const std::vector<std::int64_t>& nexts,
                        const std::vector<std::int64_t>& epochs, const std::string& group,
                        const std::string& topic, CommitResult& result) {
    std::set<std::int64_t> matched;
    for (int i = 0; i < updated.rows(); ++i) matched.insert(std::stoll(updated.at(i, 0)));
    auto r = conn.query(
        "SELECT kafka_partition, owner_epoch, next_offset FROM trackd.kafka_offsets "
        "WHERE consumer_group = $1 AND topic = $2 AND kafka_partition = ANY($3::int[])",
        {group, topic, pg_int_array(parts)});
    std::map<std::int64_t, std::pair<std::int64_t, std::int64_t>> stored;  // epoch, next
    for (int i = 0; i < r.rows(); ++i) {
        stored[std::stoll(r.at(i, 0))] = {std::stoll(r.at(i, 1)), std::stoll(r.at(i, 2))};
    }
    std::size_t in_already = 0;
    std::string conflicts;
    for (std::size_t k = 0; k < parts.size(); ++k) {
        const auto it = stored.find(parts[k]);
        if (it == stored.end() || it->second.first != epochs[k]) {
            result.fenced.insert(static_cast<std::int32_t>(parts[k]));
        } else if (it->second.second == nexts[k] && matched.count(parts[k]) == 0) {
            ++in_already;
        } else if (matched.count(parts[k]) == 0) {
            conflicts +=
                fmt::format("{}partition {} stored {} (batch ends at {})",
                            conflicts.empty() ? "" : ", ", parts[k], it->second.second, nexts[k]);
        }
    }
    if (!result.fenced.empty()) return;  // the caller drops them and commits the rest
    if (conflicts.empty() && in_already == parts.size()) {
        result.already_committed = true;
        return;
    }
    throw OffsetConflict(fmt::format(
        "trackd.kafka_offsets of topic '{}', group '{}' changed outside trackd's protocol "
        "while this instance owned the partitions ({}); stopping so that nothing is stored "
        "twice. A restart resumes from the stored offsets.",
        topic, group, conflicts.empty() ? std::string("part of a batch is stored") : conflicts));
}

}  // namespace

std::vector<int> route_to_partitions(const std::vector<HistoryPartition>& partitions,
                                     const std::vector<std::int64_t>& times) {
    std::vector<int> out(times.size(), -1);
    for (std::size_t i = 0; i < times.size(); ++i) {
        const auto t = times[i];
        // The last partition starting at or before t.
        auto it = std::upper_bound(
            partitions.begin(), partitions.end(), t,
            [](std::int64_t v, const HistoryPartition& p) { return v < p.from_us; });
        if (it == partitions.begin()) continue;
        --it;
        if (t < it->to_us) out[i] = static_cast<int>(it - partitions.begin());
    }
    return out;
}

bool default_partition_race(const db::DbError& e) {
    return e.sqlstate() == "23514" &&
           std::string_view(e.what()).find("vehicle_telemetry_history_default") !=
               std::string_view::npos;
}

PostgisSink::PostgisSink(const config::Config& config, std::string application_name)
    : config_(config), application_name_(std::move(application_name)) {
    reconnect();
}

PostgisSink::~PostgisSink() = default;

void PostgisSink::reconnect() {
    conn_.reset();
    auto conn = std::make_unique<db::Connection>(config_.pg, application_name_);
    prepare_session(*conn);
    conn_ = std::move(conn);  // only a fully prepared session is kept
}

void PostgisSink::prepare_session(db::Connection& conn) {
    // Staging table for the current state: COPY the batch's latest row per vehicle here, then
    // one INSERT (... ON CONFLICT). Temporary, so it costs no WAL.
    conn.exec_script(
        "CREATE TEMP TABLE IF NOT EXISTS current_stage "
        "(LIKE trackd.vehicle_current_state INCLUDING DEFAULTS) ON COMMIT DELETE ROWS;"
        // Dead letters go through a staging table too: INSERT ... ON CONFLICT DO NOTHING makes
        // a replayed refused message a no-op (COPY cannot skip a conflicting row).
        "CREATE TEMP TABLE IF NOT EXISTS dead_letter_stage (topic text, kafka_partition int, "
        "kafka_offset bigint, reason_code text, detail text, raw_payload bytea, "
        "ingest_batch_id bigint) ON COMMIT DELETE ROWS;"
        // Payloads over 2 kB are compressed as they are staged, and the INSERT into
        // trackd.dead_letters keeps them as compressed: with lz4 instead of the default pglz
        // that took 22 ms instead of 205 for 15,000 dead letters of which 500 were oversized
        // messages (64 kB each; bench/RESULTS.md 2026-12-05). A server built without lz4 keeps
        // pglz. Either way the stored bytes read back the same.
        "DO $lz4$ BEGIN "
        "ALTER TABLE pg_temp.dead_letter_stage ALTER COLUMN raw_payload SET COMPRESSION lz4; "
        "EXCEPTION WHEN feature_not_supported THEN NULL; END $lz4$;");
    prepare_geofence_session(conn);
}

db::Connection& PostgisSink::connection() {
    // A failed reconnect leaves no connection; the next call tries again (and throws a
    // retryable DbError while the server is still away).
    if (!conn_) reconnect();
    return *conn_;
}

std::map<std::int32_t, Claim> PostgisSink::claim(const std::vector<std::int32_t>& partitions) {
    std::map<std::int32_t, Claim> out;
    if (partitions.empty()) return out;
    std::vector<std::int64_t> ids(partitions.begin(), partitions.end());
    check_group();
    // -1 marks "no offset stored yet". The epoch bump takes the row lock, so it waits for a
    // previous owner's in-flight batch to commit or roll back, and fences it from then on.
    auto r = connection().query(
        "INSERT INTO trackd.kafka_offsets AS o (consumer_group, topic, kafka_partition, "
        "next_offset, owner_epoch) "
        "SELECT $1, $2, p, -1, 1 FROM unnest($3::int[]) AS p "
        "ON CONFLICT (consumer_group, topic, kafka_partition) DO UPDATE "
        "SET owner_epoch = o.owner_epoch + 1, updated_at = now() "
        "RETURNING kafka_partition, owner_epoch, next_offset",
        {config_.kafka.group, config_.kafka.topic, pg_int_array(ids)});
    for (int i = 0; i < r.rows(); ++i) {
        Claim c;
        c.epoch = std::stoll(r.at(i, 1));
        const auto next = std::stoll(r.at(i, 2));
        if (next >= 0) c.next_offset = next;
        out[std::stoi(r.at(i, 0))] = c;
    }
    return out;
}

int PostgisSink::end_stuck_writers() {
    const auto limit_ms = config_.pg.idle_in_transaction_timeout_ms;
    if (limit_ms == 0) return 0;
    // An ingest session waiting for its client in the middle of a statement (ClientRead while
    // active: a COPY whose sender froze or lost the network) holds its locks until TCP gives
    // up, which a frozen process never lets happen. A live trackd never leaves the server
    // waiting mid-statement for more than milliseconds.
    auto r = connection().query(
        "SELECT pid, application_name, pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE datname = current_database() AND pid <> pg_backend_pid() "
        "AND application_name LIKE 'trackd ingest%' AND state = 'active' "
        "AND wait_event = 'ClientRead' "
        "AND state_change < now() - make_interval(secs => $1::float8 / 1000)",
        {std::to_string(limit_ms)});
    for (int i = 0; i < r.rows(); ++i) {
        core::log::warn(
            "ended a stuck ingest session that held locks (its client stopped "
            "mid-statement)",
            {{"pid", r.at(i, 0)}, {"application_name", r.at(i, 1)}, {"terminated", r.at(i, 2)}});
    }
    return r.rows();
}

void PostgisSink::check_group() {
    auto r = connection().query(
        "SELECT consumer_group, count(*) FROM trackd.kafka_offsets WHERE topic = $2 "
        "AND consumer_group <> $1 GROUP BY consumer_group ORDER BY consumer_group LIMIT 1",
        {config_.kafka.group, config_.kafka.topic});
    if (r.rows() == 0) return;
    const auto other = r.at(0, 0);
    throw GroupConflict(fmt::format(
        "kafka.group: this database already holds the offsets of topic '{}' for consumer group "
        "'{}' ({} partitions); group '{}' would read the topic from its start and store every "
        "message again. Set kafka.group = \"{}\" (TRACKD_KAFKA_GROUP) to go on where it "
        "stopped, or, if the group was renamed on purpose, move its offsets first with "
        "UPDATE trackd.kafka_offsets SET consumer_group = '{}' WHERE consumer_group = '{}' "
        "AND topic = '{}';",
        config_.kafka.topic, other, r.at(0, 1), config_.kafka.group, other, config_.kafka.group,
        other, config_.kafka.topic));
}

void PostgisSink::ensure_partitions(const batch::Batch& b) {
    if (b.rows.empty()) return;
    const auto [lo, hi] = std::minmax_element(
        b.rows.begin(), b.rows.end(), [](const batch::Row& x, const batch::Row& y) {
            return x.position.recorded_at_us < y.position.recorded_at_us;
        });
    std::int64_t from = lo->position.recorded_at_us;
    std::int64_t to =
        hi->position.recorded_at_us +
        config_.postgis.partitions_ahead * interval_us(config_.postgis.partition_interval);
    // Rows committed while the DDL was put off are in the DEFAULT partition: the next try
    // creates their partitions too (create_history_partitions moves them out), or they would
    // stay there whenever later batches no longer cover their range (an hour boundary passed).
    if (deferred_range_) {
        from = std::min(from, deferred_range_->first);
        to = std::max(to, deferred_range_->second);
    }
    const auto defer = [&] { deferred_range_ = std::pair{from, to}; };
    // Known hours are skipped; the function is idempotent anyway, this only saves a round trip.
    bool all_known = true;
    for (std::int64_t h = from / kHourUs; h <= to / kHourUs && all_known; ++h) {
        all_known = partitions_known_.count(h) != 0;
    }
    if (all_known) return;
    const auto now = std::chrono::steady_clock::now();
    if (now < ddl_retry_at_) {  // rows go to the DEFAULT partition meanwhile
        defer();
        return;
    }
    // Creating or attaching a partition takes an ACCESS EXCLUSIVE lock on the history table;
    // while it waits, every COPY queues behind it. So it waits briefly and gives way to a long
    // reader (a QGIS session idle in a transaction), to be tried again later.
    auto& conn = connection();
    std::optional<db::Result> created;
    try {
        conn.exec_script(
            fmt::format("BEGIN; SET LOCAL lock_timeout = {}", config_.postgis.ddl_lock_timeout_ms));
        created = conn.query(
            "SELECT trackd.create_history_partitions(to_timestamp($1::float8 / 1e6), "
            "to_timestamp($2::float8 / 1e6) + interval '1 microsecond', $3, $4::boolean)",
            {std::to_string(from), std::to_string(to), config_.postgis.partition_interval,
             config_.postgis.defer_indexes ? "true" : "false"});
        conn.exec_script("COMMIT");
    } catch (const db::DbError& e) {
        rollback_quietly(conn);
        const bool race = default_partition_race(e);
        if (e.sqlstate() != "55P03" && !race) throw;
        ddl_retry_at_ = now + kDdlRetry;
        defer();
        partitions_deferred().inc();
        core::log::warn(race ? "history partitions not created: rows of their range were being "
                               "written to the DEFAULT partition meanwhile; a later try moves them"
                             : "history partitions not created: a lock is held on the history "
                               "table; rows go to the DEFAULT partition until a later try",
                        {{"retry_in_s", std::to_string(kDdlRetry.count())}, {"error", e.what()}});
        return;
    }
    const auto& r = *created;
    if (r.at(0, 0) != "0") {
        core::log::info("created history partitions",
                        {{"count", r.at(0, 0)}, {"interval", config_.postgis.partition_interval}});
    }
    for (std::int64_t h = from / kHourUs; h <= to / kHourUs; ++h) partitions_known_.insert(h);
    deferred_range_.reset();
    if (r.at(0, 0) != "0") partitions_stale_ = true;
}

std::vector<int> PostgisSink::route(const batch::Batch& b) {
    std::vector<std::int64_t> times(b.rows.size());
    for (std::size_t i = 0; i < b.rows.size(); ++i) times[i] = b.rows[i].position.recorded_at_us;
    const auto read = [&] {
        // Plain tables attached (not being detached) that this role may insert into; a
        // partition of another kind, or without the grant, gets its rows through the parent.
        auto r = connection().query(
            "SELECT format('%I.%I', n.nspname, c.relname), c.oid::int8, "
            "(extract(epoch FROM p.range_from) * 1000000)::int8, "
            "(extract(epoch FROM p.range_to) * 1000000)::int8 "
            "FROM trackd.history_partitions() p "
            "JOIN pg_catalog.pg_inherits i "
            "ON i.inhparent = 'trackd.vehicle_telemetry_history'::regclass "
            "JOIN pg_catalog.pg_class c ON c.oid = i.inhrelid AND c.relname = p.partition_name "
            "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
            "WHERE NOT p.is_default AND isfinite(p.range_from) AND isfinite(p.range_to) "
            "AND NOT i.inhdetachpending AND c.relkind = 'r' "
            "AND has_table_privilege(c.oid, 'INSERT') ORDER BY 3");
        partitions_.clear();
        for (int i = 0; i < r.rows(); ++i) {
            partitions_.push_back(HistoryPartition{r.at(i, 0), std::stoll(r.at(i, 1)),
                                                   std::stoll(r.at(i, 2)), std::stoll(r.at(i, 3))});
        }
        partitions_stale_ = false;
        partitions_read_at_ = std::chrono::steady_clock::now();
    };
    if (partitions_stale_) read();
    auto target = route_to_partitions(partitions_, times);
    // Another instance (or a DBA) may have made the partition since.
    if (std::find(target.begin(), target.end(), -1) != target.end() &&
        std::chrono::steady_clock::now() - partitions_read_at_ >= std::chrono::seconds(10)) {
        read();
        target = route_to_partitions(partitions_, times);
    }
    return target;
}

bool PostgisSink::begin_batch(db::Connection& conn, const std::vector<int>& target,
                              std::int64_t& batch_id) {
    std::vector<std::int64_t> oids;
    std::int64_t rows = 0;
    for (const int t : target) {
        if (t < 0) continue;
        ++rows;
        const auto oid = partitions_[static_cast<std::size_t>(t)].oid;
        if (std::find(oids.begin(), oids.end(), oid) == oids.end()) oids.push_back(oid);
    }
    if (rows == 0) {
        conn.exec_script("BEGIN");
        batch_id = std::stoll(conn.query("SELECT nextval('trackd.ingest_batch_id_seq')").at(0, 0));
        return true;
    }
    // The parent's lock first: no partition can be detached between the check here and this
    // transaction's COPY (DETACH takes the parent's ACCESS EXCLUSIVE lock; PostgreSQL refuses
    // DETACH ... CONCURRENTLY while the DEFAULT partition exists, and trackd keeps one), nor
    // dropped (retention locks the parent the same way). The ledger row counts the rows written
    // into partitions; for rows that go through the parent, its trigger adds theirs.
    conn.exec_script(
        "BEGIN; LOCK TABLE ONLY trackd.vehicle_telemetry_history IN ACCESS SHARE MODE");
    auto r = conn.query(
        "INSERT INTO trackd.ingest_batches (ingest_batch_id, history_rows) "
        "VALUES (nextval('trackd.ingest_batch_id_seq'), $1) RETURNING ingest_batch_id, "
        "(SELECT count(*) FROM pg_catalog.pg_inherits WHERE inhparent = "
        "'trackd.vehicle_telemetry_history'::regclass AND inhrelid = ANY ($2::oid[]) "
        "AND NOT inhdetachpending)",
        {std::to_string(rows), pg_int_array(oids)});
    batch_id = std::stoll(r.at(0, 0));
    return std::stoll(r.at(0, 1)) == static_cast<std::int64_t>(oids.size());
}

CommitResult PostgisSink::commit(const batch::Batch& b,
                                 const std::map<std::int32_t, Fence>& fences) {
    CommitResult result;
    ensure_partitions(b);

    std::vector<std::int64_t> parts;
    std::vector<std::int64_t> expected;
    std::vector<std::int64_t> nexts;
    std::vector<std::int64_t> eps;
    for (const auto& [partition, next] : b.next_offsets) {
        auto it = fences.find(partition);
        if (it == fences.end()) {  // not ours any more
            result.fenced.insert(partition);
            continue;
        }
        parts.push_back(partition);
        expected.push_back(it->second.expected_offset);
        nexts.push_back(next);
        eps.push_back(it->second.epoch);
    }
    if (!result.fenced.empty()) return result;

    auto& conn = connection();
    // Each history row goes straight into its time partition (or, outside every partition,
    // through the parent): no tuple routing, and none of the parent's ledger trigger, whose
    // transition table makes PostgreSQL insert the rows of a COPY into a partitioned table one
    // by one (bench/RESULTS.md 2026-12-02: 14-15% less database CPU per row).
    std::vector<int> target = parent_only_next_ ? std::vector<int>(b.rows.size(), -1) : route(b);
    // After a failed try: nothing of it stays, the partitions are read again, and the next
    // batch goes through the parent if this one wrote into partitions.
    const auto abandon = [&] {
        rollback_quietly(conn);
        partitions_stale_ = true;
        parent_only_next_ = std::any_of(target.begin(), target.end(), [](int t) { return t >= 0; });
    };
    try {
        for (int attempt = 0; !begin_batch(conn, target, result.ingest_batch_id); ++attempt) {
            // A partition was dropped or detached since they were read: read them again, or,
            // the second time, let the parent route every row.
            rollback_quietly(conn);
            partitions_stale_ = true;
            target = attempt == 0 ? route(b) : std::vector<int>(b.rows.size(), -1);
        }

        // Offsets next: it is the fence, it is cheap, and its row locks order this batch
        // against a concurrent claim() by another instance. It moves each partition from where
        // this batch starts to where it ends, and only that: a second run of the same batch
        // (its first COMMIT's reply was lost) matches no row.
        auto updated = conn.query(
            "UPDATE trackd.kafka_offsets AS o SET next_offset = u.next, updated_at = now() "
            "FROM unnest($3::int[], $4::bigint[], $5::bigint[], $6::bigint[]) "
            "AS u(p, expected, next, epoch) "
            "WHERE o.consumer_group = $1 AND o.topic = $2 AND o.kafka_partition = u.p "
            "AND o.owner_epoch = u.epoch AND o.next_offset = u.expected "
            "RETURNING o.kafka_partition",
            {config_.kafka.group, config_.kafka.topic, pg_int_array(parts), pg_int_array(expected),
             pg_int_array(nexts), pg_int_array(eps)});
        if (updated.rows() != static_cast<int>(parts.size())) {
            classify_unmatched(conn, updated, parts, nexts, eps, config_.kafka.group,
                               config_.kafka.topic, result);
            rollback_quietly(conn);
            return result;
        }
        // The fault suite freezes an instance here, inside an open batch transaction that
        // holds its partitions' offsets rows (docs/reliability.md).
        static core::PausePoint pause("TRACKD_TEST_INGEST_PAUSE_AT", "ingest");
        pause.at("after-offsets");

        // Before the current-state upsert: detection starts from each vehicle's latest
        // committed position.
        const GeofenceWork geofence = detect_geofence_events(conn, b);

        if (!encoder_) encoder_ = std::make_unique<CopyEncoder>();
        CopyEncoder& enc = *encoder_;
        if (!b.rows.empty()) {
            // History in (vehicle, time) order: consecutive rows go to neighbouring entries of
            // the (vehicle_id, recorded_at) btree (the GiST gains little). It costs PostgreSQL
            // 12-26% less CPU per row than time order on the same rows (bench/RESULTS.md,
            // 2026-12-01). Byte order of the id: any fixed order gives the locality, whatever
            // the column's collation. With postgis.defer_indexes an open partition has no
            // btree, only its hot set (SP-GiST, hash on vehicle_id, BRINs): rows go in Morton
            // order of their position instead, so that consecutive rows descend neighbouring
            // quadtree paths. (V0009's hot set was BRINs only, for which this order was made;
            // with V0010's set it measured as fast as (vehicle, time) order or a little faster:
            // docs/benchmarks.md, 2026-12-05 evening.)
            std::vector<std::size_t> order(b.rows.size());
            std::iota(order.begin(), order.end(), 0);
            if (config_.postgis.defer_indexes) {
                std::vector<std::uint64_t> key(b.rows.size());
                for (std::size_t i = 0; i < b.rows.size(); ++i) {
                    key[i] = morton_key(b.rows[i].position.longitude, b.rows[i].position.latitude);
                }
                std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
                    if (key[x] != key[y]) return key[x] < key[y];
                    const auto& px = b.rows[x].position;
                    const auto& py = b.rows[y].position;
                    if (const auto c = px.vehicle_id.compare(py.vehicle_id); c != 0) return c < 0;
                    return px.recorded_at_us < py.recorded_at_us;
                });
            } else {
                std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
                    const auto& px = b.rows[x].position;
                    const auto& py = b.rows[y].position;
                    if (const auto c = px.vehicle_id.compare(py.vehicle_id); c != 0) return c < 0;
                    return px.recorded_at_us < py.recorded_at_us;
                });
            }
            // One COPY per target table (nearly always one), each in the batch's order.
            std::vector<int> tables;
            for (const int t : target) {
                if (std::find(tables.begin(), tables.end(), t) == tables.end()) {
                    tables.push_back(t);
                }
            }
            for (const int t : tables) {
                enc.begin();
                for (const auto i : order) {
                    if (target[i] == t) encode_row(enc, b.rows[i], result.ingest_batch_id);
                }
                enc.end();
                conn.copy_start(fmt::format(
                    "COPY {} (vehicle_id, recorded_at, geom, speed_kmh, heading_deg, "
                    "accuracy_m, attributes, ingest_batch_id, kafka_partition, kafka_offset) "
                    "FROM STDIN (FORMAT binary)",
                    t < 0 ? std::string("trackd.vehicle_telemetry_history")
                          : partitions_[static_cast<std::size_t>(t)].table));
                // The fault suite freezes an instance here, in the middle of a COPY: the
                // server waits for its data (docs/reliability.md).
                static core::PausePoint in_copy("TRACKD_TEST_INGEST_PAUSE_AT", "ingest");
                in_copy.at("in-copy");
                conn.copy_send(enc.data());
                conn.copy_end();
            }

            // The current state gets the batch's latest row per vehicle, in byte order of the
            // id: one lock order for every writer (the statements below sort by the same
            // order, COLLATE "C"), so that concurrent batches sharing a vehicle (messages not
            // keyed by vehicle) wait for each other instead of deadlocking.
            auto latest = batch::latest_per_vehicle(b);
            std::sort(latest.begin(), latest.end(), [&](std::size_t x, std::size_t y) {
                return b.rows[x].position.vehicle_id < b.rows[y].position.vehicle_id;
            });
            // The current state's columns after its key, in the COPY's order; one "col = from.col"
            // list of them for the UPDATE (from the stage) and for the upsert (EXCLUDED).
            static constexpr std::array<const char*, 9> kStateColumns = {
                "last_updated", "geom",       "speed_kmh",       "heading_deg",
                "accuracy_m",   "attributes", "ingest_batch_id", "kafka_partition",
                "kafka_offset"};
            const auto assignments = [](const char* from) {
                std::string out;
                for (const char* c : kStateColumns) {
                    out += fmt::format("{}{} = {}.{}", out.empty() ? "" : ", ", c, from, c);
                }
                return out;
            };
            static const std::string current_columns =
                "vehicle_id, " + fmt::format("{}", fmt::join(kStateColumns, ", "));
            enc.begin();
            for (const auto i : latest) encode_row(enc, b.rows[i], result.ingest_batch_id);
            enc.end();
            // Every vehicle of the batch seen for the first time (a fleet's first batch, a
            // stream of vehicles seen once): the rows are COPYed straight into the current
            // state, without the staging table and the upsert's speculative insertion
            // (docs/benchmarks.md, "New vehicles: COPY straight in"). If one is there after all
            // (written by another instance: messages not keyed by vehicle, a repartitioned
            // topic; or by hand), the COPY fails on the primary key, is undone, and the upsert
            // below runs.
            // Only whole batches: one statement per batch keeps the one lock order. The
            // savepoint stays open until COMMIT, which commits it with the rest.
            std::unordered_set<std::string_view> first_seen;
            for (const auto& row : b.rows) {
                if (row.first_seen) first_seen.insert(row.position.vehicle_id);
            }
            bool inserted = false;
            if (!latest.empty() && first_seen.size() == latest.size()) {
                try {
                    conn.exec_script("SAVEPOINT new_vehicles");
                    conn.copy_start("COPY trackd.vehicle_current_state (" + current_columns +
                                    ") FROM STDIN (FORMAT binary)");
                    conn.copy_send(enc.data());
                    conn.copy_end();
                    inserted = true;
                } catch (const db::DbError& e) {
                    if (e.sqlstate() != "23505") throw;
                    conn.exec_script("ROLLBACK TO SAVEPOINT new_vehicles");
                    current_state_insert_fallbacks().inc();
                }
            }
            if (!inserted) {
                conn.copy_start("COPY current_stage (" + current_columns +
                                ") FROM STDIN (FORMAT binary)");
                conn.copy_send(enc.data());
                conn.copy_end();
                // Only forward in time: an older position never replaces a newer one. The
                // vehicles already stored are UPDATEd first: an UPDATE ... FROM spares them the
                // upsert's speculative insertion, tuple lock and second computation of the
                // generated cell, a third of the upsert's time per row (docs/benchmarks.md,
                // "Current state: UPDATE first"). It reads the staging table in its order (byte
                // order of the id, as COPYed), whether the plan is a nested loop over the
                // primary key or a hash of the current state probed by the staged rows, so the
                // lock order holds.
                static const std::string update_staged =
                    "UPDATE trackd.vehicle_current_state s SET " + assignments("c") +
                    " FROM current_stage c WHERE s.vehicle_id = c.vehicle_id "
                    // trackd's total order: (recorded_at, offset); an equal time from a later
                    // message wins, as it does inside a batch (batch::latest_per_vehicle).
                    "AND (c.last_updated, c.kafka_offset) > (s.last_updated, s.kafka_offset)";
                // Every staged row in one pass, in byte order of the id: new vehicles
                // inserted, stored ones moved forward, newer stored positions left.
                static const std::string upsert_staged =
                    "INSERT INTO trackd.vehicle_current_state AS s (" + current_columns +
                    ") SELECT " + current_columns +
                    " FROM current_stage ORDER BY vehicle_id COLLATE \"C\" "
                    "ON CONFLICT (vehicle_id) DO UPDATE SET " +
                    assignments("EXCLUDED") +
                    " WHERE (EXCLUDED.last_updated, EXCLUDED.kafka_offset) > "
                    "(s.last_updated, s.kafka_offset)";
                // The UPDATE only for a batch of vehicles trackd has seen. When it does not move
                // every staged vehicle (one stored with a newer position by another writer, one
                // whose row was deleted by hand) it is undone, row locks and all, and the upsert
                // writes the whole stage instead: an upsert after it would lock the rows it
                // left in a second pass, out of byte order, and two writers sharing vehicles
                // could deadlock.
                bool updated_all = false;
                if (first_seen.empty()) {
                    conn.exec_script("SAVEPOINT current_state");
                    updated_all =
                        conn.query(update_staged).affected() == static_cast<long>(latest.size());
                    if (!updated_all) conn.exec_script("ROLLBACK TO SAVEPOINT current_state");
                }
                if (!updated_all) conn.exec_script(upsert_staged);
            }
        }

        if (!b.dead_letters.empty()) {
            enc.begin();
            for (const auto& d : b.dead_letters) {
                enc.row(7);
                enc.text(config_.kafka.topic);
                enc.int4(d.partition);
                enc.int8(d.offset);
                enc.text(core::code(d.reason));
                enc.text(safe_text(d.detail));
                enc.bytea(d.payload);
                enc.int8(result.ingest_batch_id);
            }
            enc.end();
            conn.copy_start(
                "COPY dead_letter_stage (topic, kafka_partition, kafka_offset, reason_code, "
                "detail, raw_payload, ingest_batch_id) FROM STDIN (FORMAT binary)");
            conn.copy_send(enc.data());
            conn.copy_end();
            // A message refused before (offsets rewound, a topic read again) keeps its first
            // dead letter; the replay is a no-op, never an error.
            const auto inserted =
                conn.query(
                        "INSERT INTO trackd.dead_letters (topic, kafka_partition, kafka_offset, "
                        "reason_code, detail, raw_payload, ingest_batch_id) "
                        "SELECT topic, kafka_partition, kafka_offset, reason_code, detail, "
                        "raw_payload, ingest_batch_id FROM dead_letter_stage "
                        "ON CONFLICT (topic, kafka_partition, kafka_offset) DO NOTHING")
                    .affected();
            const auto replayed = static_cast<long>(b.dead_letters.size()) - inserted;
            if (replayed > 0) {
                dead_letters_replayed().inc(static_cast<std::uint64_t>(replayed));
                core::log::warn(
                    "refused messages read again: their dead letters were stored "
                    "before",
                    {{"messages", std::to_string(replayed)}});
            }
        }
        // Last before COMMIT: it takes the event ids, whose lock is held until COMMIT.
        const std::size_t events = write_geofence_events(conn, geofence, result.ingest_batch_id);
        conn.exec_script("COMMIT");
        events::events_emitted().inc(events);
    } catch (const db::DbError& e) {
        abandon();
        // A partition's INSERT grant revoked since the partitions were read (no lock orders a
        // REVOKE against this batch): the same batch again at once, through the parent, which
        // needs only the parent's grant. Nothing of the first try was committed.
        if (parent_only_next_ && e.sqlstate() == "42501") {
            core::log::warn(
                "no INSERT grant on a history partition any more: the batch goes "
                "through the partitioned table",
                {{"error", e.what()}});
            return commit(b, fences);
        }
        throw;
    } catch (...) {  // OffsetConflict from the offsets update
        abandon();
        throw;
    }
    parent_only_next_ = false;
    return result;
}

std::unordered_map<std::string, LatestPosition> PostgisSink::load_latest_positions(
    const std::vector<std::int32_t>& partitions) {
    std::unordered_map<std::string, LatestPosition> out;
    std::vector<std::int64_t> ids(partitions.begin(), partitions.end());
    auto r = connection().query(
        "SELECT vehicle_id, (extract(epoch FROM last_updated) * 1000000)::bigint, "
        "ST_X(geom), ST_Y(geom), kafka_partition FROM trackd.vehicle_current_state "
        "WHERE kafka_partition = ANY($1::int[])",
        {pg_int_array(ids)});
    out.reserve(static_cast<size_t>(r.rows()));
    for (int i = 0; i < r.rows(); ++i) {
        out[r.at(i, 0)] = LatestPosition{std::stoll(r.at(i, 1)), std::stod(r.at(i, 2)),
                                         std::stod(r.at(i, 3)), std::stoi(r.at(i, 4))};
    }
    return out;
}

}  // namespace trackd::sink::postgis
