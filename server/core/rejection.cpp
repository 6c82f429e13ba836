#include "trackd/core/rejection.hpp"

#include <array>

namespace trackd::core {
namespace {

constexpr std::array kReasons = {
    ReasonInfo{Reason::payload_too_large, "payload_too_large",
               "the message is larger than validate.max_payload_bytes"},
    ReasonInfo{Reason::malformed_json, "malformed_json", "the payload is not a JSON object"},
    ReasonInfo{Reason::missing_field, "missing_field",
               "vehicle_id, timestamp, or a position (latitude+longitude or geom_hex) is absent"},
    ReasonInfo{Reason::wrong_type, "wrong_type",
               "a known field has the wrong JSON type (e.g. latitude as a string)"},
    ReasonInfo{Reason::not_finite, "not_finite", "a number is NaN or infinite"},
    ReasonInfo{Reason::bad_vehicle_id, "bad_vehicle_id",
               "vehicle_id is empty, too long (validate.max_vehicle_id_len) or has control "
               "characters"},
    ReasonInfo{Reason::bad_timestamp, "bad_timestamp",
               "timestamp is neither RFC 3339 nor epoch milliseconds"},
    ReasonInfo{Reason::future_timestamp, "future_timestamp",
               "timestamp is further ahead than validate.max_future_skew_s"},
    ReasonInfo{Reason::stale_timestamp, "stale_timestamp",
               "timestamp is older than validate.max_age_s"},
    ReasonInfo{Reason::lat_out_of_range, "lat_out_of_range", "latitude outside [-90, 90]"},
    ReasonInfo{Reason::lon_out_of_range, "lon_out_of_range", "longitude outside [-180, 180]"},
    ReasonInfo{Reason::null_island, "null_island",
               "exactly (0, 0), almost always a missing fix (validate.reject_null_island)"},
    ReasonInfo{Reason::unknown_srid, "unknown_srid", "srid is not a CRS PROJ knows"},
    ReasonInfo{Reason::transform_failed, "transform_failed",
               "PROJ could not transform the coordinates to WGS 84"},
    ReasonInfo{Reason::bad_wkb, "bad_wkb", "geom_hex is not hex-encoded WKB or EWKB"},
    ReasonInfo{Reason::not_a_point, "not_a_point", "geom_hex holds a geometry that is not a point"},
    ReasonInfo{Reason::negative_accuracy, "negative_accuracy", "accuracy_m is negative"},
    ReasonInfo{Reason::bad_heading, "bad_heading", "heading_deg outside [0, 360)"},
    ReasonInfo{Reason::bad_speed, "bad_speed", "speed_kmh is negative"},
    ReasonInfo{Reason::speed_jump, "speed_jump",
               "the speed implied by the distance from the vehicle's latest position exceeds "
               "validate.max_speed_kmh"},
    ReasonInfo{Reason::duplicate, "duplicate",
               "same vehicle, timestamp and position as the vehicle's latest accepted position "
               "(a redelivered message)"},
    ReasonInfo{Reason::malformed_protobuf, "malformed_protobuf",
               "the payload is not a Protobuf encoding of trackd.v1.Position (truncated, bad "
               "varint or wire type, a string that is not UTF-8)"},
    ReasonInfo{Reason::bad_frame, "bad_frame",
               "the Confluent wire-format header (magic byte 0, 4-byte schema id, message "
               "indexes) is cut short or its message indexes are invalid"},
    ReasonInfo{Reason::unknown_schema, "unknown_schema",
               "the schema registry does not know the frame's schema id"},
    ReasonInfo{Reason::incompatible_schema, "incompatible_schema",
               "the frame's schema is not a Protobuf schema trackd can read as trackd.v1.Position "
               "(a field trackd reads has another number or type, or the schema does not parse)"},
};

constexpr bool in_enum_order() {
    for (size_t i = 0; i < kReasons.size(); ++i) {
        if (static_cast<size_t>(kReasons[i].reason) != i) return false;
    }
    return true;
}
static_assert(in_enum_order(), "kReasons must list every Reason in enum order");

}  // namespace

std::span<const ReasonInfo> reasons() { return kReasons; }

std::string_view code(Reason r) { return kReasons[static_cast<size_t>(r)].code; }

const ReasonInfo* find_reason(std::string_view c) {
    for (const auto& info : kReasons) {
        if (info.code == c) return &info;
    }
    return nullptr;
}

}  // namespace trackd::core
