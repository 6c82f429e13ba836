// PostgreSQL COPY (FORMAT binary) encoding, done in the client so that the server only parses
// fixed-size fields. Geometry is sent as EWKB, which PostGIS's binary input accepts.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace trackd::sink::postgis {

class CopyEncoder {
  public:
    CopyEncoder() { buf_.reserve(1U << 20U); }

    void begin() {
        buf_.clear();
        static constexpr char kHeader[] = "PGCOPY\n\377\r\n";
        buf_.append(kHeader, 11);  // signature, including its NUL byte
        put32(0);                  // flags
        put32(0);                  // header extension length
    }
    void end() { put16(static_cast<std::uint16_t>(0xFFFF)); }  // -1: end of data

    void row(std::uint16_t fields) { put16(fields); }
    void null() { put32(0xFFFFFFFFU); }
    void text(std::string_view s) {
        put32(static_cast<std::uint32_t>(s.size()));
        buf_.append(s);
    }
    void bytea(std::string_view s) { text(s); }
    void int4(std::int32_t v) {
        put32(4);
        put32(static_cast<std::uint32_t>(v));
    }
    void int8(std::int64_t v) {
        put32(8);
        put64(static_cast<std::uint64_t>(v));
    }
    void float4(std::optional<float> v) {
        if (!v) return null();
        std::uint32_t bits = 0;
        std::memcpy(&bits, &*v, 4);
        put32(4);
        put32(bits);
    }
    // Microseconds since the Unix epoch -> PostgreSQL's microseconds since 2000-01-01.
    void timestamptz(std::int64_t unix_us) {
        constexpr std::int64_t kPgEpochOffsetUs = 946684800LL * 1000000LL;
        int8(unix_us - kPgEpochOffsetUs);
    }
    // jsonb binary input: a version byte (1) then the JSON text. "" -> NULL.
    void jsonb(std::string_view json) {
        if (json.empty()) return null();
        put32(static_cast<std::uint32_t>(json.size() + 1));
        buf_.push_back('\1');
        buf_.append(json);
    }
    // EWKB PointZ with SRID 4326, little-endian (the byte-order flag says so).
    void point_z_4326(double x, double y, double z) {
        constexpr std::uint32_t kPointZWithSrid = 1U | 0x80000000U | 0x20000000U;
        put32(1 + 4 + 4 + 24);
        buf_.push_back('\1');
        put_le32(kPointZWithSrid);
        put_le32(4326);
        put_le_double(x);
        put_le_double(y);
        put_le_double(z);
    }

    [[nodiscard]] std::string_view data() const { return buf_; }

  private:
    void put16(std::uint16_t v) {
        const char b[2] = {static_cast<char>(v >> 8U), static_cast<char>(v)};
        buf_.append(b, 2);
    }
    void put32(std::uint32_t v) {
        const char b[4] = {static_cast<char>(v >> 24U), static_cast<char>(v >> 16U),
                           static_cast<char>(v >> 8U), static_cast<char>(v)};
        buf_.append(b, 4);
    }
    void put64(std::uint64_t v) {
        put32(static_cast<std::uint32_t>(v >> 32U));
        put32(static_cast<std::uint32_t>(v));
    }
    void put_le32(std::uint32_t v) {
        const char b[4] = {static_cast<char>(v), static_cast<char>(v >> 8U),
                           static_cast<char>(v >> 16U), static_cast<char>(v >> 24U)};
        buf_.append(b, 4);
    }
    void put_le_double(double d) {
        std::uint64_t v = 0;
        std::memcpy(&v, &d, 8);
        put_le32(static_cast<std::uint32_t>(v));
        put_le32(static_cast<std::uint32_t>(v >> 32U));
    }

    std::string buf_;
};

}  // namespace trackd::sink::postgis
