#include "history_source.hpp"

#include <cstring>
#include <stdexcept>
#include <string_view>

#include <fmt/format.h>

namespace trackd::archive {
namespace {

// PostgreSQL timestamps count microseconds from 2000-01-01.
constexpr std::int64_t kPgEpochUs = 946684800LL * 1000000;
constexpr std::string_view kCopySignature{"PGCOPY\n\377\r\n\0", 11};

class TupleReader {
  public:
    explicit TupleReader(std::string_view data) : d_(data) {}

    std::int16_t int16() { return static_cast<std::int16_t>(be(2)); }
    // The next field's bytes, or nullopt for NULL.
    std::optional<std::string_view> field() {
        const auto len = static_cast<std::int32_t>(be(4));
        if (len < 0) return std::nullopt;
        need(static_cast<std::size_t>(len));
        auto v = d_.substr(pos_, static_cast<std::size_t>(len));
        pos_ += static_cast<std::size_t>(len);
        return v;
    }
    void skip(std::size_t n) {
        need(n);
        pos_ += n;
    }
    std::uint32_t u32() { return static_cast<std::uint32_t>(be(4)); }

    static std::uint64_t be_of(std::string_view v) {
        std::uint64_t x = 0;
        for (const char c : v) x = (x << 8) | static_cast<unsigned char>(c);
        return x;
    }

  private:
    void need(std::size_t n) const {
        if (d_.size() - pos_ < n) throw std::runtime_error("archive: truncated COPY row");
    }
    std::uint64_t be(std::size_t n) {
        need(n);
        const auto v = be_of(d_.substr(pos_, n));
        pos_ += n;
        return v;
    }
    std::string_view d_;
    std::size_t pos_ = 0;
};

std::int64_t int8(std::string_view v) { return static_cast<std::int64_t>(TupleReader::be_of(v)); }
std::int32_t int4(std::string_view v) { return static_cast<std::int32_t>(TupleReader::be_of(v)); }
double float8(std::string_view v) {
    const auto bits = TupleReader::be_of(v);
    double d;
    std::memcpy(&d, &bits, sizeof d);
    return d;
}
float float4(std::string_view v) {
    const auto bits = static_cast<std::uint32_t>(TupleReader::be_of(v));
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}
std::optional<float> opt_float4(const std::optional<std::string_view>& v) {
    if (!v) return std::nullopt;
    return float4(*v);
}
std::string_view required(const std::optional<std::string_view>& v) {
    if (!v) throw std::runtime_error("archive: unexpected NULL in a required history column");
    return *v;
}

}  // namespace

std::int64_t HistorySource::stamp() {
    try {
        conn_.exec_script("BEGIN");
        // Serialises stampers, so that numbers drawn later are committed later.
        conn_.query("SELECT pg_advisory_xact_lock(hashtextextended('trackd.archive stamps', 0))");
        // Batch id order within one stamping, for a stable mapping; any order would be correct.
        auto r = conn_.query(
            "UPDATE trackd.ingest_batches b SET archive_seq = nextval('trackd.archive_seq') "
            "FROM (SELECT ingest_batch_id FROM trackd.ingest_batches WHERE archive_seq IS NULL "
            "ORDER BY ingest_batch_id) s WHERE b.ingest_batch_id = s.ingest_batch_id");
        conn_.exec_script("COMMIT");
        return r.affected();
    } catch (const db::DbError&) {
        try {
            conn_.exec_script("ROLLBACK");
        } catch (const db::DbError&) {
            // The connection is gone; the transaction with it.
        }
        throw;
    }
}

Pending HistorySource::pending(std::int64_t archived_seq) {
    auto r = conn_.query(
        "SELECT count(*), coalesce(sum(history_rows), 0), "
        "coalesce(extract(epoch FROM now() - min(created_at)), 0) "
        "FROM trackd.ingest_batches WHERE archive_seq > $1",
        {std::to_string(archived_seq)});
    return Pending{std::stoll(r.at(0, 0)), std::stoll(r.at(0, 1)), std::stod(r.at(0, 2))};
}

std::optional<Chunk> HistorySource::next_chunk(std::int64_t archived_seq, std::int64_t max_rows) {
    // The running sum bounds the chunk without fetching every pending batch.
    auto r = conn_.query(
        "SELECT max(archive_seq), sum(history_rows), min(ingest_batch_id), max(ingest_batch_id) "
        "FROM (SELECT archive_seq, history_rows, ingest_batch_id, "
        "sum(history_rows) OVER (ORDER BY archive_seq) AS running "
        "FROM trackd.ingest_batches WHERE archive_seq > $1 ORDER BY archive_seq LIMIT 100000) s "
        "WHERE running - history_rows < $2",
        {std::to_string(archived_seq), std::to_string(std::max<std::int64_t>(max_rows, 1))});
    if (!r.get(0, 0)) return std::nullopt;
    return Chunk{archived_seq, std::stoll(r.at(0, 0)), std::stoll(r.at(0, 1)),
                 std::stoll(r.at(0, 2)), std::stoll(r.at(0, 3))};
}

void HistorySource::read(const Chunk& c, const std::string& partition_unit,
                         const std::function<void(const ArchiveRow&)>& sink) {
    if (partition_unit != "day" && partition_unit != "hour") {
        throw std::invalid_argument("archive: partition unit " + partition_unit);
    }
    // COPY cannot take parameters; every value spliced in is an integer formatted here.
    const auto sql = fmt::format(
        "COPY (SELECT h.vehicle_id, h.recorded_at, ST_X(h.geom), ST_Y(h.geom), "
        "coalesce(ST_Z(h.geom), 0), h.speed_kmh, h.heading_deg, h.accuracy_m, h.attributes::text, "
        "h.kafka_partition, h.kafka_offset, h.ingest_batch_id "
        "FROM trackd.vehicle_telemetry_history h "
        "WHERE h.ingest_batch_id BETWEEN {} AND {} AND h.ingest_batch_id IN "
        "(SELECT ingest_batch_id FROM trackd.ingest_batches WHERE archive_seq > {} AND "
        "archive_seq <= {}) "
        "ORDER BY date_trunc('{}', h.recorded_at AT TIME ZONE 'UTC'), "
        "h.vehicle_id COLLATE \"C\", h.recorded_at, h.kafka_partition, h.kafka_offset) "
        "TO STDOUT (FORMAT binary)",
        c.min_batch, c.max_batch, c.after, c.upto, partition_unit);
    conn_.copy_out_start(sql);
    std::string msg;
    bool header = true;
    ArchiveRow row;
    while (conn_.copy_out_next(msg)) {
        TupleReader t(msg);
        if (header) {
            // The first message starts with the file header: signature, flags, extension.
            if (msg.compare(0, kCopySignature.size(), kCopySignature) != 0) {
                throw std::runtime_error("archive: COPY BINARY without its header");
            }
            t.skip(kCopySignature.size() + 4);
            t.skip(t.u32());
            header = false;
        }
        const auto n = t.int16();
        if (n == -1) continue;  // the trailer
        if (n != 12) throw std::runtime_error("archive: unexpected COPY column count");
        row.vehicle_id.assign(required(t.field()));
        row.recorded_at_us = int8(required(t.field())) + kPgEpochUs;
        row.longitude = float8(required(t.field()));
        row.latitude = float8(required(t.field()));
        row.altitude = float8(required(t.field()));
        row.speed_kmh = opt_float4(t.field());
        row.heading_deg = opt_float4(t.field());
        row.accuracy_m = opt_float4(t.field());
        if (auto a = t.field()) {
            row.attributes = std::string(*a);
        } else {
            row.attributes.reset();
        }
        row.kafka_partition = int4(required(t.field()));
        row.kafka_offset = int8(required(t.field()));
        row.ingest_batch_id = int8(required(t.field()));
        sink(row);
    }
}

}  // namespace trackd::archive
