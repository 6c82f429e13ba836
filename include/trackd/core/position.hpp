// A validated vehicle position: what every sink writes.
//
// Contract: a Position only exists after validation, so its coordinates are WGS 84
// (SRID 4326) longitude/latitude in range, its timestamp is plausible and its vehicle id is
// non-empty. Value type; copy or move freely.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace trackd::core {

struct Position {
    std::string vehicle_id;
    std::int64_t recorded_at_us = 0;   // microseconds since the Unix epoch, UTC
    double longitude = 0;              // degrees, WGS 84
    double latitude = 0;               // degrees, WGS 84
    std::optional<double> altitude_m;  // the Z of the PointZ (0 when absent)
    std::optional<float> speed_kmh;
    std::optional<float> heading_deg;
    std::optional<float> accuracy_m;
    // Fields the payload had beyond the known ones, as a JSON object text with the values
    // unchanged ("" when there were none).
    std::string attributes_json;
};

}  // namespace trackd::core
