// PostgreSQL COPY (FORMAT binary) encoding, done in the client so that the server only parses
// fixed-size fields. Geometry is sent as EWKB, which PostGIS's binary input accepts.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string_view>

namespace trackd::sink::postgis {

class CopyEncoder {
  public:
    CopyEncoder() { reserve(1U << 20U); }

    void begin() {
        size_ = 0;
        static constexpr char kHeader[] = "PGCOPY\n\377\r\n";
        char* p = grow(11 + 4 + 4);
        std::memcpy(p, kHeader, 11);  // signature, including its NUL byte
        put32(p + 11, 0);             // flags
        put32(p + 15, 0);             // header extension length
    }
    void end() { put16(grow(2), 0xFFFF); }  // -1: end of data

    void row(std::uint16_t fields) { put16(grow(2), fields); }
    void null() { put32(grow(4), 0xFFFFFFFFU); }
    void text(std::string_view s) {
        char* p = grow(4 + s.size());
        put32(p, static_cast<std::uint32_t>(s.size()));
        put_bytes(p + 4, s);
    }
    void bytea(std::string_view s) { text(s); }
    void int4(std::int32_t v) {
        char* p = grow(8);
        put32(p, 4);
        put32(p + 4, static_cast<std::uint32_t>(v));
    }
    void int8(std::int64_t v) {
        char* p = grow(12);
        put32(p, 8);
        put32(p + 4, static_cast<std::uint32_t>(static_cast<std::uint64_t>(v) >> 32U));
        put32(p + 8, static_cast<std::uint32_t>(v));
    }
    void float4(std::optional<float> v) {
        if (!v) return null();
        std::uint32_t bits = 0;
        std::memcpy(&bits, &*v, 4);
        char* p = grow(8);
        put32(p, 4);
        put32(p + 4, bits);
    }
    // Microseconds since the Unix epoch -> PostgreSQL's microseconds since 2000-01-01.
    void timestamptz(std::int64_t unix_us) {
        constexpr std::int64_t kPgEpochOffsetUs = 946684800LL * 1000000LL;
        int8(unix_us - kPgEpochOffsetUs);
    }
    // jsonb binary input: a version byte (1) then the JSON text. "" -> NULL.
    void jsonb(std::string_view json) {
        if (json.empty()) return null();
        char* p = grow(4 + 1 + json.size());
        put32(p, static_cast<std::uint32_t>(json.size() + 1));
        p[4] = '\1';
        put_bytes(p + 5, json);
    }
    // EWKB PointZ with SRID 4326, little-endian (the byte-order flag says so).
    void point_z_4326(double x, double y, double z) {
        constexpr std::uint32_t kPointZWithSrid = 1U | 0x80000000U | 0x20000000U;
        constexpr std::uint32_t kSize = 1 + 4 + 4 + 24;
        char* p = grow(4 + kSize);
        put32(p, kSize);
        p[4] = '\1';
        put_le32(p + 5, kPointZWithSrid);
        put_le32(p + 9, 4326);
        put_le_double(p + 13, x);
        put_le_double(p + 21, y);
        put_le_double(p + 29, z);
    }

    [[nodiscard]] std::string_view data() const { return {buf_.get(), size_}; }

  private:
    // The next n bytes of the buffer, to be written by the caller: one capacity check per
    // field, where appending to a std::string made one call per 2- to 8-byte word. The buffer
    // only grows: it keeps the size of the largest batch's COPY data, which batch.max_rows
    // and batch.max_bytes bound.
    char* grow(std::size_t n) {
        if (size_ + n > capacity_) [[unlikely]]
            reserve(std::max(size_ + n, capacity_ * 2));
        char* p = buf_.get() + size_;
        size_ += n;
        return p;
    }
    void reserve(std::size_t capacity) {
        auto bigger = std::make_unique_for_overwrite<char[]>(capacity);
        if (size_ > 0) std::memcpy(bigger.get(), buf_.get(), size_);
        buf_ = std::move(bigger);
        capacity_ = capacity;
    }
    static void put_bytes(char* p, std::string_view s) {
        if (!s.empty()) std::memcpy(p, s.data(), s.size());  // an empty view may have no data
    }
    static void put16(char* p, std::uint16_t v) {
        p[0] = static_cast<char>(v >> 8U);
        p[1] = static_cast<char>(v);
    }
    static void put32(char* p, std::uint32_t v) {
        p[0] = static_cast<char>(v >> 24U);
        p[1] = static_cast<char>(v >> 16U);
        p[2] = static_cast<char>(v >> 8U);
        p[3] = static_cast<char>(v);
    }
    static void put_le32(char* p, std::uint32_t v) {
        p[0] = static_cast<char>(v);
        p[1] = static_cast<char>(v >> 8U);
        p[2] = static_cast<char>(v >> 16U);
        p[3] = static_cast<char>(v >> 24U);
    }
    static void put_le_double(char* p, double d) {
        std::uint64_t v = 0;
        std::memcpy(&v, &d, 8);
        put_le32(p, static_cast<std::uint32_t>(v));
        put_le32(p + 4, static_cast<std::uint32_t>(v >> 32U));
    }

    std::unique_ptr<char[]> buf_;
    std::size_t size_ = 0;
    std::size_t capacity_ = 0;
};

}  // namespace trackd::sink::postgis
