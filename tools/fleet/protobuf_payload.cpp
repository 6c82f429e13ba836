#include "protobuf_payload.hpp"

#include <array>
#include <cmath>
#include <cstring>

namespace trackd::fleet {
namespace {

using core::Reason;

constexpr std::size_t kMaxPayloadBytes = 65536;  // trackd's default validate.max_payload_bytes

void varint(std::string& out, std::uint64_t v) {
    while (v >= 0x80) {
        out.push_back(static_cast<char>((v & 0x7F) | 0x80));
        v >>= 7;
    }
    out.push_back(static_cast<char>(v));
}

void key(std::string& out, std::uint32_t field, std::uint32_t wire) {
    varint(out, field << 3 | wire);
}

void fixed64(std::string& out, std::uint32_t field, double v) {
    key(out, field, 1);
    char b[8];
    std::memcpy(b, &v, 8);  // little-endian machines only, as trackd itself
    out.append(b, 8);
}

void fixed32(std::string& out, std::uint32_t field, float v) {
    key(out, field, 5);
    char b[4];
    std::memcpy(b, &v, 4);
    out.append(b, 4);
}

void bytes(std::string& out, std::uint32_t field, std::string_view v) {
    key(out, field, 2);
    varint(out, v.size());
    out.append(v);
}

void attribute(std::string& out, std::string_view k, std::string_view v) {
    key(out, 11, 2);
    varint(out, 2 + k.size() + 2 + v.size());  // both shorter than 128 bytes
    bytes(out, 1, k);
    bytes(out, 2, v);
}

void timestamp(std::string& out, std::int64_t t_ms, std::int64_t nanos_override = -1) {
    const std::int64_t seconds = t_ms >= 0 ? t_ms / 1000 : -((-t_ms + 999) / 1000);
    const std::int64_t nanos =
        nanos_override >= 0 ? nanos_override : (t_ms - seconds * 1000) * 1'000'000;
    std::string body;
    if (seconds != 0) {
        key(body, 1, 0);
        varint(body, static_cast<std::uint64_t>(seconds));
    }
    if (nanos != 0) {
        key(body, 2, 0);
        varint(body, static_cast<std::uint64_t>(nanos));
    }
    bytes(out, 2, body);
}

void u32_le(std::string& out, std::uint32_t v) {
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
void f64_le(std::string& out, double v) {
    char b[8];
    std::memcpy(b, &v, 8);
    out.append(b, 8);
}

std::string point_ewkb(double lon, double lat, double z) {
    std::string w(1, '\x01');
    u32_le(w, 1U | 0x80000000U | 0x20000000U);
    u32_le(w, 4326);
    f64_le(w, lon);
    f64_le(w, lat);
    f64_le(w, z);
    return w;
}

std::string linestring_ewkb(double lon1, double lat1, double lon2, double lat2) {
    std::string w(1, '\x01');
    u32_le(w, 2U | 0x20000000U);
    u32_le(w, 4326);
    u32_le(w, 2);
    f64_le(w, lon1);
    f64_le(w, lat1);
    f64_le(w, lon2);
    f64_le(w, lat2);
    return w;
}

std::string scaled_text(std::int64_t v, int decimals) {
    std::string s;
    append_scaled(s, v, decimals);
    return s;
}

// The fields of a valid message, with the edits of a bad kind applied through the options.
struct Fields {
    std::string_view vehicle_id;
    bool empty_vehicle_id = false;  // an explicit "" (proto3 writers drop it; trackd must not)
    bool has_timestamp = true;
    std::int64_t t_ms = 0;
    std::int64_t nanos = -1;  // override
    std::optional<double> lat, lon, alt;
    std::string wkb;
    std::int32_t srid = 0;
    float speed = 0, heading = 0, accuracy = 0;
    bool latitude_as_varint = false;
};

void write(std::string& out, const Fields& f, const Sample& s, char shift, bool resent) {
    if (f.empty_vehicle_id) {
        bytes(out, 1, "");
    } else {
        bytes(out, 1, f.vehicle_id);
    }
    if (f.has_timestamp) timestamp(out, f.t_ms, f.nanos);
    if (f.latitude_as_varint) {
        key(out, 3, 0);
        varint(out, static_cast<std::uint64_t>(s.lat_e7));
    } else if (f.lat) {
        fixed64(out, 3, *f.lat);
    }
    if (f.lon) fixed64(out, 4, *f.lon);
    if (f.alt) fixed64(out, 5, *f.alt);
    if (!f.wkb.empty()) bytes(out, 6, f.wkb);
    if (f.srid != 0) {
        key(out, 7, 0);
        varint(out, static_cast<std::uint64_t>(static_cast<std::int64_t>(f.srid)));
    }
    fixed32(out, 8, f.speed);
    fixed32(out, 9, f.heading);
    fixed32(out, 10, f.accuracy);
    attribute(out, "battery_pct", scaled_text(s.battery_d, 1));
    const char shift_text[1] = {shift};
    attribute(out, "driver_shift", std::string_view(shift_text, 1));
    if (resent) attribute(out, "resent", "true");
}

Fields fields_of(std::string_view vehicle_id, const Sample& s) {
    Fields f;
    f.vehicle_id = vehicle_id;
    f.t_ms = s.t_ms;
    const double alt = static_cast<double>(s.altitude_dm) / 10.0;
    if (s.geom_hex) {
        f.wkb = point_ewkb(s.longitude(), s.latitude(), alt);
    } else {
        f.lat = s.latitude();
        f.lon = s.longitude();
        f.alt = alt;
    }
    f.speed = static_cast<float>(s.speed_d) / 10.0F;
    f.heading = static_cast<float>(s.heading_d) / 10.0F;
    f.accuracy = static_cast<float>(s.accuracy_d) / 10.0F;
    return f;
}

}  // namespace

void append_confluent_header(std::string& out, std::uint32_t schema_id) {
    out.push_back('\0');
    for (int shift = 24; shift >= 0; shift -= 8) {
        out.push_back(static_cast<char>((schema_id >> shift) & 0xFF));
    }
    out.push_back('\0');
}

void append_position_protobuf(std::string& out, std::string_view vehicle_id, const Sample& s,
                              char shift, bool resent) {
    write(out, fields_of(vehicle_id, s), s, shift, resent);
}

std::string_view expected_protobuf_reason_code(const KindSpec& kind) {
    if (kind.expected == Reason::malformed_json) return core::code(Reason::malformed_protobuf);
    return expected_reason_code(kind);
}

void render_bad_protobuf(const KindSpec& kind, const BadInput& in, std::string& payload,
                         std::optional<std::int64_t>& recorded_at_ms) {
    Sample s = in.base;
    s.geom_hex = false;
    Fields f = fields_of(in.vehicle_id, s);
    recorded_at_ms = s.t_ms;
    std::string tail;
    switch (*kind.expected) {
        case Reason::payload_too_large:
            bytes(tail, 100, std::string(kMaxPayloadBytes, 'x'));
            break;
        case Reason::malformed_json:
            // A length-delimited field 12 whose length runs past the end.
            tail = "\x62\x7f";
            recorded_at_ms = std::nullopt;
            break;
        case Reason::missing_field:
            f.has_timestamp = false;
            recorded_at_ms = std::nullopt;
            break;
        case Reason::wrong_type:
            f.latitude_as_varint = true;
            break;
        case Reason::not_finite:
            f.lat = std::nan("");
            break;
        case Reason::bad_vehicle_id:
            f.empty_vehicle_id = true;
            break;
        case Reason::bad_timestamp:
            f.nanos = 2'000'000'000;
            recorded_at_ms = std::nullopt;
            break;
        case Reason::future_timestamp:
            f.t_ms = in.future_ms;
            recorded_at_ms = in.future_ms;
            break;
        case Reason::stale_timestamp:
            f.t_ms = in.stale_ms;
            recorded_at_ms = in.stale_ms;
            break;
        case Reason::lat_out_of_range:
            f.lat = 95.5;
            break;
        case Reason::lon_out_of_range:
            f.lon = 200.25;
            break;
        case Reason::null_island:
            f.lat = 0.0;
            f.lon = 0.0;
            break;
        case Reason::unknown_srid:
            f.srid = 999999;
            break;
        case Reason::transform_failed:
            f.srid = 32633;
            f.lat = 1e12;
            f.lon = 1e12;
            break;
        case Reason::bad_wkb:
            f.lat.reset();
            f.lon.reset();
            f.alt.reset();
            f.wkb = std::string("\x01\x01\x00", 3);  // a point cut short
            break;
        case Reason::not_a_point:
            f.lat.reset();
            f.lon.reset();
            f.alt.reset();
            f.wkb = linestring_ewkb(s.longitude(), s.latitude(), s.longitude() + 0.001,
                                    s.latitude() + 0.001);
            break;
        case Reason::negative_accuracy:
            f.accuracy = -3.0F;
            break;
        case Reason::bad_heading:
            f.heading = 360.5F;
            break;
        case Reason::bad_speed:
            f.speed = -10.0F;
            break;
        case Reason::speed_jump:
            f.lat = std::round(in.jump_lat * 1e7) / 1e7;
            f.lon = std::round(in.jump_lon * 1e7) / 1e7;
            break;
        default:
            break;
    }
    write(payload, f, s, in.shift, false);
    payload += tail;
}

}  // namespace trackd::fleet
