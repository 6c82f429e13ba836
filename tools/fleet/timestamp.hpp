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

// Parses "YYYY-MM-DDTHH:MM:SS[.fraction](Z|+HH:MM|-HH:MM)"; fraction digits past milliseconds
// are dropped. nullopt when the text is not such a timestamp.
std::optional<std::int64_t> parse_rfc3339_ms(std::string_view text);

// Wall-clock milliseconds since the Unix epoch.
std::int64_t now_epoch_ms();

}  // namespace trackd::fleet
