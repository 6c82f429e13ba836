// The JSON the fleet sends (docs/fleet.md; message format in DESIGN.md "Interfaces users see").
//
// Contract: a Sample holds a position already rounded to what the JSON shows, so rendering the
// same Sample twice gives the same bytes and the geom_hex form encodes exactly the doubles the
// decimal form parses to. append_position_json is the hot path (no allocation once `out` has
// grown); the field-list functions are the slow path bad messages are built with.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace trackd::fleet {

struct Sample {
    std::int64_t t_ms = 0;    // milliseconds since the Unix epoch
    std::int64_t lat_e7 = 0;  // degrees × 1e7
    std::int64_t lon_e7 = 0;
    std::int32_t altitude_dm = 0;     // 0.1 m
    std::int32_t speed_d = 0;         // 0.1 km/h
    std::int32_t heading_d = 0;       // 0.1 degree, [0, 3600)
    std::int32_t accuracy_d = 0;      // 0.1 m
    std::int32_t battery_d = 0;       // 0.1 %
    bool epoch_ms_timestamp = false;  // "timestamp": 1764464523456 instead of RFC 3339
    bool geom_hex = false;            // "geom_hex" (EWKB PointZ, SRID 4326) instead of lat/lon

    [[nodiscard]] double latitude() const { return static_cast<double>(lat_e7) / 1e7; }
    [[nodiscard]] double longitude() const { return static_cast<double>(lon_e7) / 1e7; }
};

// Appends v / 10^decimals in fixed notation ("-12.3400" for v=-123400, decimals=4).
void append_scaled(std::string& out, std::int64_t v, int decimals);

// Appends the hex EWKB (little-endian, uppercase) of POINT Z (lon lat z) with SRID 4326.
void append_point_ewkb_hex(std::string& out, double lon, double lat, double z);

// Appends the hex EWKB (little-endian, uppercase) of a two-point LINESTRING with SRID 4326.
void append_linestring_ewkb_hex(std::string& out, double lon1, double lat1, double lon2,
                                double lat2);

// Appends a valid message's JSON for the sample. shift goes to {"driver":{"shift":...}};
// resent adds the attribute "resent":true (out-of-order re-sends).
void append_position_json(std::string& out, std::string_view vehicle_id, const Sample& s,
                          char shift, bool resent);

// A message as an ordered list of (name, raw JSON value), for building bad messages.
using JsonField = std::pair<std::string, std::string>;

// The fields of a valid message with latitude/longitude and an RFC 3339 timestamp (the sample's
// format flags are ignored).
std::vector<JsonField> position_fields(std::string_view vehicle_id, const Sample& s, char shift);

// Writes the fields as a JSON object.
void append_fields_json(std::string& out, const std::vector<JsonField>& fields);

}  // namespace trackd::fleet
