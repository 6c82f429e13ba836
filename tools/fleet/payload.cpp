#include "payload.hpp"

#include <array>
#include <charconv>
#include <cstring>

#include "timestamp.hpp"

namespace trackd::fleet {
namespace {

constexpr std::array<std::int64_t, 10> kPow10 = {1,      10,      100,      1000,      10000,
                                                 100000, 1000000, 10000000, 100000000, 1000000000};

void append_int(std::string& out, std::int64_t v) {
    char buf[24];
    const auto res = std::to_chars(buf, buf + sizeof buf, v);
    out.append(buf, res.ptr);
}

void append_hex_bytes(std::string& out, const unsigned char* bytes, std::size_t n) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    for (std::size_t i = 0; i < n; ++i) {
        out.push_back(kHex[bytes[i] >> 4]);
        out.push_back(kHex[bytes[i] & 0xF]);
    }
}

void append_u32_le(std::string& out, std::uint32_t v) {
    const std::array<unsigned char, 4> b = {
        static_cast<unsigned char>(v), static_cast<unsigned char>(v >> 8),
        static_cast<unsigned char>(v >> 16), static_cast<unsigned char>(v >> 24)};
    append_hex_bytes(out, b.data(), b.size());
}

void append_f64_le(std::string& out, double v) {
    std::uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof bits);
    std::array<unsigned char, 8> b{};
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<unsigned char>(bits >> (8 * i));
    append_hex_bytes(out, b.data(), b.size());
}

constexpr std::uint32_t kWkbPoint = 1;
constexpr std::uint32_t kWkbLineString = 2;
constexpr std::uint32_t kEwkbZ = 0x80000000U;
constexpr std::uint32_t kEwkbSrid = 0x20000000U;
constexpr std::uint32_t kSrid4326 = 4326;

std::string scaled(std::int64_t v, int decimals) {
    std::string s;
    append_scaled(s, v, decimals);
    return s;
}

void append_timestamp_value(std::string& out, const Sample& s) {
    if (s.epoch_ms_timestamp) {
        append_int(out, s.t_ms);
    } else {
        char ts[kRfc3339MsLength];
        format_rfc3339_ms(s.t_ms, ts);
        out.push_back('"');
        out.append(ts, sizeof ts);
        out.push_back('"');
    }
}

}  // namespace

void append_scaled(std::string& out, std::int64_t v, int decimals) {
    if (v < 0) {
        out.push_back('-');
        v = -v;
    }
    const std::int64_t p = kPow10[static_cast<std::size_t>(decimals)];
    append_int(out, v / p);
    if (decimals == 0) return;
    out.push_back('.');
    char frac[12];
    std::int64_t f = v % p;
    for (int i = decimals - 1; i >= 0; --i) {
        frac[i] = static_cast<char>('0' + f % 10);
        f /= 10;
    }
    out.append(frac, static_cast<std::size_t>(decimals));
}

void append_point_ewkb_hex(std::string& out, double lon, double lat, double z) {
    out.append("01");  // little-endian
    append_u32_le(out, kWkbPoint | kEwkbZ | kEwkbSrid);
    append_u32_le(out, kSrid4326);
    append_f64_le(out, lon);
    append_f64_le(out, lat);
    append_f64_le(out, z);
}

void append_linestring_ewkb_hex(std::string& out, double lon1, double lat1, double lon2,
                                double lat2) {
    out.append("01");
    append_u32_le(out, kWkbLineString | kEwkbSrid);
    append_u32_le(out, kSrid4326);
    append_u32_le(out, 2);
    append_f64_le(out, lon1);
    append_f64_le(out, lat1);
    append_f64_le(out, lon2);
    append_f64_le(out, lat2);
}

void append_position_json(std::string& out, std::string_view vehicle_id, const Sample& s,
                          char shift, bool resent) {
    out.append(R"({"vehicle_id":")");
    out.append(vehicle_id);
    out.append(R"(","timestamp":)");
    append_timestamp_value(out, s);
    if (s.geom_hex) {
        // The altitude travels as the point's Z.
        out.append(R"(,"geom_hex":")");
        append_point_ewkb_hex(out, s.longitude(), s.latitude(),
                              static_cast<double>(s.altitude_dm) / 10.0);
        out.push_back('"');
    } else {
        out.append(R"(,"latitude":)");
        append_scaled(out, s.lat_e7, 7);
        out.append(R"(,"longitude":)");
        append_scaled(out, s.lon_e7, 7);
        out.append(R"(,"altitude_m":)");
        append_scaled(out, s.altitude_dm, 1);
    }
    out.append(R"(,"speed_kmh":)");
    append_scaled(out, s.speed_d, 1);
    out.append(R"(,"heading_deg":)");
    append_scaled(out, s.heading_d, 1);
    out.append(R"(,"accuracy_m":)");
    append_scaled(out, s.accuracy_d, 1);
    out.append(R"(,"battery_pct":)");
    append_scaled(out, s.battery_d, 1);
    out.append(R"(,"driver":{"shift":")");
    out.push_back(shift);
    out.append(R"("})");
    if (resent) out.append(R"(,"resent":true)");
    out.push_back('}');
}

std::vector<JsonField> position_fields(std::string_view vehicle_id, const Sample& s, char shift) {
    Sample rfc = s;
    rfc.epoch_ms_timestamp = false;
    std::string ts;
    append_timestamp_value(ts, rfc);
    return {
        {"vehicle_id", "\"" + std::string(vehicle_id) + "\""},
        {"timestamp", ts},
        {"latitude", scaled(s.lat_e7, 7)},
        {"longitude", scaled(s.lon_e7, 7)},
        {"altitude_m", scaled(s.altitude_dm, 1)},
        {"speed_kmh", scaled(s.speed_d, 1)},
        {"heading_deg", scaled(s.heading_d, 1)},
        {"accuracy_m", scaled(s.accuracy_d, 1)},
        {"battery_pct", scaled(s.battery_d, 1)},
        {"driver", std::string(R"({"shift":")") + shift + "\"}"},
    };
}

void append_fields_json(std::string& out, const std::vector<JsonField>& fields) {
    out.push_back('{');
    bool first = true;
    for (const auto& [name, value] : fields) {
        if (!first) out.push_back(',');
        first = false;
        out.push_back('"');
        out.append(name);
        out.append("\":");
        out.append(value);
    }
    out.push_back('}');
}

}  // namespace trackd::fleet
