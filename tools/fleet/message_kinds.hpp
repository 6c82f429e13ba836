// Every kind of message the fleet sends and what trackd must do with it.
//
// Contract: kinds() lists each kind once; its expected reason is the core::Reason trackd's
// validator gives (nullopt: accepted). That pairing is what tests compare against trackd's
// dead letters, so it changes only together with the validator. Every bad kind's template (the
// edits that turn a valid message into that bad one) is in the one table in message_kinds.cpp.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "trackd/core/rejection.hpp"

#include "payload.hpp"

namespace trackd::fleet {

using KindId = std::uint8_t;

// How a kind is made.
enum class Build : std::uint8_t {
    valid,         // the vehicle's next position
    out_of_order,  // a re-send of one of the vehicle's last positions, 2-5 steps back
    duplicate,     // the vehicle's previous valid payload again, byte for byte
    bad,           // the vehicle's current position with the kind's edits applied
};

// One change to a message's fields. An empty value removes the field; otherwise value is raw
// JSON text that replaces the field's value in place, or is appended when the field is absent.
// Values may hold ${placeholders} (see BadInput).
struct FieldEdit {
    std::string_view field;  // empty: unused slot
    std::string_view value;
};

// After the edits, what happens to the whole text.
enum class Whole : std::uint8_t { keep, truncate_half };

struct KindSpec {
    std::string_view name;
    std::optional<core::Reason> expected;  // nullopt: trackd accepts the message
    Build build = Build::bad;
    std::array<FieldEdit, 4> edits{};
    Whole whole = Whole::keep;
    bool needs_previous_valid = false;  // only meaningful after the vehicle's first valid one
};

inline constexpr KindId kValid = 0;
inline constexpr KindId kOutOfOrder = 1;
inline constexpr KindId kDuplicate = 2;

// Every kind, valid/out_of_order/duplicate first, then the bad kinds.
std::span<const KindSpec> kinds();

// The reason code trackd must give, "" for accepted kinds.
std::string_view expected_reason_code(const KindSpec& kind);

// What the placeholders of a bad kind's template are filled with.
struct BadInput {
    std::string_view vehicle_id;
    char shift = 'A';
    Sample base;                 // current position, the vehicle's next timestamp
    std::int64_t future_ms = 0;  // ${future_timestamp}
    std::int64_t stale_ms = 0;   // ${stale_timestamp}
    double jump_lon = 0;         // ${jump_longitude}
    double jump_lat = 0;         // ${jump_latitude}
};

// Renders a bad kind into payload; recorded_at_ms is the timestamp the payload carries when it
// is well-formed and has a parseable one, else nullopt.
void render_bad(const KindSpec& kind, const BadInput& in, std::string& payload,
                std::optional<std::int64_t>& recorded_at_ms);

}  // namespace trackd::fleet
