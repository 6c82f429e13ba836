// Why a message was refused. A bad message is data, not an exception.
//
// Contract: every reason is listed once in reasons() with the stable code that goes to
// trackd.dead_letters.reason_code and to the metric label, and the text users read. Codes
// never change meaning once released; add new ones at the end.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace trackd::core {

enum class Reason {
    payload_too_large,
    malformed_json,
    missing_field,
    wrong_type,
    not_finite,
    bad_vehicle_id,
    bad_timestamp,
    future_timestamp,
    stale_timestamp,
    lat_out_of_range,
    lon_out_of_range,
    null_island,
    unknown_srid,
    transform_failed,
    bad_wkb,
    not_a_point,
    negative_accuracy,
    bad_heading,
    bad_speed,
    speed_jump,
    duplicate,
    malformed_protobuf,
    bad_frame,
    unknown_schema,
    incompatible_schema,
};

struct ReasonInfo {
    Reason reason;
    std::string_view code;         // stable, snake_case: dead_letters.reason_code, metric label
    std::string_view description;  // what it means, for docs and operators
};

// Every reason, in enum order.
std::span<const ReasonInfo> reasons();

std::string_view code(Reason r);

// The reason with this code, or nullptr.
const ReasonInfo* find_reason(std::string_view code);

struct Rejection {
    Reason reason;
    std::string detail;  // human-readable, names the field and the bad value
};

}  // namespace trackd::core
