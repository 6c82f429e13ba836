// Message timestamps: RFC 3339 text or epoch milliseconds, to microseconds since the Unix epoch.
//
// Hand-written for speed (no regex, no locale, no allocation): fixed-position digits and
// days-from-civil arithmetic on the proleptic Gregorian calendar.
#pragma once

#include <cstdint>
#include <string_view>

namespace trackd::decode {

// Days from 1970-01-01 to y-m-d (Howard Hinnant's days_from_civil); m in [1, 12].
constexpr std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) noexcept {
    y -= m <= 2 ? 1 : 0;
    const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
    const auto yoe = static_cast<unsigned>(y - era * 400);                 // [0, 399]
    const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;  // [0, 365]
    const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;            // [0, 146096]
    return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

constexpr bool is_leap_year(std::int64_t y) noexcept {
    return y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
}

constexpr unsigned days_in_month(std::int64_t y, unsigned m) noexcept {
    constexpr unsigned kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m == 2 && is_leap_year(y) ? 29 : kDays[m - 1];
}

enum class TimestampStatus {
    ok,
    syntax,        // not RFC 3339 at all
    out_of_range,  // RFC 3339 shape, but an impossible date, time or offset
};

// Parses an RFC 3339 date-time: YYYY-MM-DD('T'|'t'|' ')hh:mm:ss[.fraction]('Z'|'z'|±hh:mm).
// The fraction has 1 to 9 digits; digits beyond microseconds are truncated. A leap second
// (ss = 60) counts as the first second of the next minute, as PostgreSQL reads it.
TimestampStatus parse_rfc3339(std::string_view text, std::int64_t& out_us) noexcept;

// Epoch milliseconds accepted: 1970-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z.
inline constexpr std::int64_t kMaxEpochMs = 253402300799999;

}  // namespace trackd::decode
