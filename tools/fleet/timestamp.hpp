// RFC 3339 timestamps with millisecond precision, as the fleet writes and reads them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace trackd::fleet {

// "2026-11-30T01:02:03.456Z" is 24 characters.
inline constexpr std::size_t kRfc3339MsLength = 24;

// Writes exactly kRfc3339MsLength characters (UTC, milliseconds, 'Z') to out; years 0-9999.
void format_rfc3339_ms(std::int64_t epoch_ms, char* out);

std::string to_rfc3339_ms(std::int64_t epoch_ms);

// Parses an RFC 3339 timestamp as trackd's decoder reads it (core::parse_rfc3339), rounded down
// to milliseconds. nullopt when the decoder would refuse it.
std::optional<std::int64_t> parse_rfc3339_ms(std::string_view text);

}  // namespace trackd::fleet
