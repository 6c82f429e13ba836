#include "trackd/sink/postgis/postgis_sink.hpp"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "trackd/core/log.hpp"
#include "trackd/db/connection.hpp"
#include "trackd/events/counters.hpp"

#include "copy_encoder.hpp"
#include "geofence_events.hpp"

namespace trackd::sink::postgis {
namespace {

constexpr std::int64_t kHourUs = 3600LL * 1000000LL;

std::int64_t interval_us(const std::string& interval) {
    if (interval == "hour") return kHourUs;
    if (interval == "day") return 24 * kHourUs;
    if (interval == "week") return 7 * 24 * kHourUs;
    return 31 * 24 * kHourUs;  // month: an upper bound is enough to look ahead
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

}  // namespace

PostgisSink::PostgisSink(const config::Config& config, std::string application_name)
    : config_(config), application_name_(std::move(application_name)) {
    reconnect();
}

PostgisSink::~PostgisSink() = default;

void PostgisSink::reconnect() {
    conn_.reset();
    auto conn = std::make_unique<db::Connection>(config_.pg.dsn, application_name_,
                                                 config_.pg.connect_timeout_s);
    prepare_session(*conn);
    conn_ = std::move(conn);  // only a fully prepared session is kept
}

void PostgisSink::prepare_session(db::Connection& conn) {
    // Staging table for the current-state upsert: COPY the batch's latest row per vehicle
    // here, then one INSERT ... ON CONFLICT. Temporary, so it costs no WAL.
    conn.exec_script(
        "CREATE TEMP TABLE IF NOT EXISTS current_stage "
        "(LIKE trackd.vehicle_current_state INCLUDING DEFAULTS) ON COMMIT DELETE ROWS;");
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

void PostgisSink::ensure_partitions(const batch::Batch& b) {
    if (b.rows.empty()) return;
    const auto [lo, hi] = std::minmax_element(
        b.rows.begin(), b.rows.end(), [](const batch::Row& x, const batch::Row& y) {
            return x.position.recorded_at_us < y.position.recorded_at_us;
        });
    const std::int64_t from = lo->position.recorded_at_us;
    const std::int64_t to =
        hi->position.recorded_at_us +
        config_.postgis.partitions_ahead * interval_us(config_.postgis.partition_interval);
    // Known hours are skipped; the function is idempotent anyway, this only saves a round trip.
    bool all_known = true;
    for (std::int64_t h = from / kHourUs; h <= to / kHourUs && all_known; ++h) {
        all_known = partitions_known_.count(h) != 0;
    }
    if (all_known) return;
    auto r = connection().query(
        "SELECT trackd.create_history_partitions(to_timestamp($1::float8 / 1e6), "
        "to_timestamp($2::float8 / 1e6) + interval '1 microsecond', $3)",
        {std::to_string(from), std::to_string(to), config_.postgis.partition_interval});
    if (r.at(0, 0) != "0") {
        core::log::info("created history partitions",
                        {{"count", r.at(0, 0)}, {"interval", config_.postgis.partition_interval}});
    }
    for (std::int64_t h = from / kHourUs; h <= to / kHourUs; ++h) partitions_known_.insert(h);
}

CommitResult PostgisSink::commit(const batch::Batch& b,
                                 const std::map<std::int32_t, std::int64_t>& epochs) {
    CommitResult result;
    ensure_partitions(b);

    std::vector<std::int64_t> parts;
    std::vector<std::int64_t> nexts;
    std::vector<std::int64_t> eps;
    for (const auto& [partition, next] : b.next_offsets) {
        auto it = epochs.find(partition);
        if (it == epochs.end()) {  // not ours any more
            result.fenced.insert(partition);
            continue;
        }
        parts.push_back(partition);
        nexts.push_back(next);
        eps.push_back(it->second);
    }
    if (!result.fenced.empty()) return result;

    auto& conn = connection();
    try {
        conn.exec_script("BEGIN");
        result.ingest_batch_id =
            std::stoll(conn.query("SELECT nextval('trackd.ingest_batch_id_seq')").at(0, 0));

        // Offsets first: it is the fence, it is cheap, and its row locks order this batch
        // against a concurrent claim() by another instance.
        auto updated = conn.query(
            "UPDATE trackd.kafka_offsets AS o SET next_offset = u.next, updated_at = now() "
            "FROM unnest($3::int[], $4::bigint[], $5::bigint[]) AS u(p, next, epoch) "
            "WHERE o.consumer_group = $1 AND o.topic = $2 AND o.kafka_partition = u.p "
            "AND o.owner_epoch = u.epoch RETURNING o.kafka_partition",
            {config_.kafka.group, config_.kafka.topic, pg_int_array(parts), pg_int_array(nexts),
             pg_int_array(eps)});
        if (updated.rows() != static_cast<int>(parts.size())) {
            std::set<std::int32_t> ok;
            for (int i = 0; i < updated.rows(); ++i) ok.insert(std::stoi(updated.at(i, 0)));
            for (const auto p : parts) {
                if (ok.count(static_cast<std::int32_t>(p)) == 0) {
                    result.fenced.insert(static_cast<std::int32_t>(p));
                }
            }
            rollback_quietly(conn);
            return result;
        }

        // Before the current-state upsert: detection starts from each vehicle's latest
        // committed position.
        const GeofenceWork geofence = detect_geofence_events(conn, b);

        CopyEncoder enc;
        if (!b.rows.empty()) {
            // History in time order: neighbouring rows share a partition and index pages.
            std::vector<std::size_t> order(b.rows.size());
            std::iota(order.begin(), order.end(), 0);
            std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
                return b.rows[x].position.recorded_at_us < b.rows[y].position.recorded_at_us;
            });
            enc.begin();
            for (const auto i : order) encode_row(enc, b.rows[i], result.ingest_batch_id);
            enc.end();
            conn.copy_start(
                "COPY trackd.vehicle_telemetry_history (vehicle_id, recorded_at, geom, "
                "speed_kmh, heading_deg, accuracy_m, attributes, ingest_batch_id, "
                "kafka_partition, kafka_offset) FROM STDIN (FORMAT binary)");
            conn.copy_send(enc.data());
            conn.copy_end();

            enc.begin();
            for (const auto i : batch::latest_per_vehicle(b)) {
                encode_row(enc, b.rows[i], result.ingest_batch_id);
            }
            enc.end();
            conn.copy_start(
                "COPY current_stage (vehicle_id, last_updated, geom, speed_kmh, heading_deg, "
                "accuracy_m, attributes, ingest_batch_id, kafka_partition, kafka_offset) "
                "FROM STDIN (FORMAT binary)");
            conn.copy_send(enc.data());
            conn.copy_end();
            // Only forward in time: an older position never replaces a newer one.
            conn.exec_script(
                "INSERT INTO trackd.vehicle_current_state AS s (vehicle_id, last_updated, geom, "
                "speed_kmh, heading_deg, accuracy_m, attributes, ingest_batch_id, "
                "kafka_partition, kafka_offset) "
                "SELECT vehicle_id, last_updated, geom, speed_kmh, heading_deg, accuracy_m, "
                "attributes, ingest_batch_id, kafka_partition, kafka_offset FROM current_stage "
                // One lock order for every writer: concurrent batches that share a vehicle
                // (messages not keyed by vehicle) wait for each other instead of deadlocking.
                "ORDER BY vehicle_id "
                "ON CONFLICT (vehicle_id) DO UPDATE SET last_updated = EXCLUDED.last_updated, "
                "geom = EXCLUDED.geom, speed_kmh = EXCLUDED.speed_kmh, "
                "heading_deg = EXCLUDED.heading_deg, accuracy_m = EXCLUDED.accuracy_m, "
                "attributes = EXCLUDED.attributes, ingest_batch_id = EXCLUDED.ingest_batch_id, "
                "kafka_partition = EXCLUDED.kafka_partition, "
                "kafka_offset = EXCLUDED.kafka_offset "
                "WHERE EXCLUDED.last_updated > s.last_updated");
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
                "COPY trackd.dead_letters (topic, kafka_partition, kafka_offset, reason_code, "
                "detail, raw_payload, ingest_batch_id) FROM STDIN (FORMAT binary)");
            conn.copy_send(enc.data());
            conn.copy_end();
        }
        // Last before COMMIT: it takes the event ids, whose lock is held until COMMIT.
        const std::size_t events = write_geofence_events(conn, geofence, result.ingest_batch_id);
        conn.exec_script("COMMIT");
        events::events_emitted().inc(events);
    } catch (const db::DbError&) {
        rollback_quietly(conn);
        throw;
    }
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
