#include "trackd/db/binary.hpp"

#include <bit>
#include <cstring>
#include <string>

#include "trackd/db/connection.hpp"

namespace trackd::db::binary {

namespace {

[[noreturn]] void bad(const char* type, std::string_view v) {
    throw DbError("expected a binary " + std::string(type) + " from the database, got " +
                      std::to_string(v.size()) + " bytes",
                  "");
}

template <typename T>
T load(const char* p, bool big_endian) {
    T v;
    std::memcpy(&v, p, sizeof v);
    if (big_endian != (std::endian::native == std::endian::big)) {
        if constexpr (sizeof(T) == 4) {
            v = static_cast<T>(__builtin_bswap32(static_cast<std::uint32_t>(v)));
        } else {
            v = static_cast<T>(__builtin_bswap64(static_cast<std::uint64_t>(v)));
        }
    }
    return v;
}

template <typename T>
T fixed(std::string_view v, const char* type) {
    if (v.size() != sizeof(T)) bad(type, v);
    return load<T>(v.data(), true);
}

// PostgreSQL's timestamp epoch (2000-01-01) in Unix microseconds.
constexpr std::int64_t kPgEpochUnixUs = 946684800LL * 1000000;

}  // namespace

std::int32_t int4(std::string_view v) { return fixed<std::int32_t>(v, "int4"); }
std::int64_t int8(std::string_view v) { return fixed<std::int64_t>(v, "int8"); }
float float4(std::string_view v) { return std::bit_cast<float>(fixed<std::uint32_t>(v, "float4")); }
double float8(std::string_view v) {
    return std::bit_cast<double>(fixed<std::uint64_t>(v, "float8"));
}
std::int64_t timestamptz_unix_us(std::string_view v) {
    return fixed<std::int64_t>(v, "timestamptz") + kPgEpochUnixUs;
}

Point point(std::string_view ewkb) {
    // byte order, type (EWKB flags: 0x80000000 Z, 0x40000000 M, 0x20000000 SRID; or ISO
    // 1001/2001/3001), [SRID], x, y, [z], [m]
    if (ewkb.size() < 5 || (ewkb[0] != 0 && ewkb[0] != 1)) bad("point geometry", ewkb);
    const bool big = ewkb[0] == 0;
    const auto type = load<std::uint32_t>(ewkb.data() + 1, big);
    const std::uint32_t iso = type & 0x0FFFFFFFU;
    const bool z = (type & 0x80000000U) != 0 || iso / 1000 == 1 || iso / 1000 == 3;
    const bool m = (type & 0x40000000U) != 0 || iso / 1000 == 2 || iso / 1000 == 3;
    const bool srid = (type & 0x20000000U) != 0;
    const std::size_t coords = 2 + (z ? 1 : 0) + (m ? 1 : 0);
    const std::size_t at = 5 + (srid ? 4 : 0);
    if (iso % 1000 != 1 || ewkb.size() != at + 8 * coords) bad("point geometry", ewkb);
    Point p;
    p.x = std::bit_cast<double>(load<std::uint64_t>(ewkb.data() + at, big));
    p.y = std::bit_cast<double>(load<std::uint64_t>(ewkb.data() + at + 8, big));
    if (z) {
        p.z = std::bit_cast<double>(load<std::uint64_t>(ewkb.data() + at + 16, big));
        p.has_z = true;
    }
    return p;
}

}  // namespace trackd::db::binary
