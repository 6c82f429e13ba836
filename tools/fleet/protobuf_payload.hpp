// The fleet's messages as trackd.v1.Position (proto/trackd/v1/position.proto), written by hand
// (the fleet does not link libprotobuf), plain or behind the Confluent wire-format header.
//
// Contract: the same Sample gives the same bytes, and trackd decodes them to the values the JSON
// form of that Sample decodes to (attributes become strings: battery_pct "81.5", driver_shift
// "A", resent "true"). render_bad_protobuf() turns each bad kind of message_kinds.hpp into a
// message with the one defect its reason names (malformed_json becomes a message that is not
// valid Protobuf: malformed_protobuf).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "message_kinds.hpp"
#include "payload.hpp"

namespace trackd::fleet {

// Magic byte 0, the schema id (big-endian), message indexes [0] as the single byte 00.
void append_confluent_header(std::string& out, std::uint32_t schema_id);

void append_position_protobuf(std::string& out, std::string_view vehicle_id, const Sample& s,
                              char shift, bool resent);

// As render_bad (message_kinds.hpp), in Protobuf.
void render_bad_protobuf(const KindSpec& kind, const BadInput& in, std::string& payload,
                         std::optional<std::int64_t>& recorded_at_ms);

// The reason trackd gives for a bad kind sent as Protobuf.
std::string_view expected_protobuf_reason_code(const KindSpec& kind);

}  // namespace trackd::fleet
