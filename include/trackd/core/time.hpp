// Time in trackd: microseconds since the Unix epoch (UTC) in a std::int64_t, on the proleptic
// Gregorian calendar; RFC 3339 text in and out of that.
//
// Contract: the calendar functions are constexpr and pure; parse_rfc3339 takes a view, allocates
// nothing and never throws (the decoder runs it on every message); now_us reads the wall clock.
// All of it is safe from any thread.
#pragma once

#include <cstdint>
#include <string_view>

namespace trackd::core {

// Days from 1970-01-01 to y-m-d (Howard Hinnant's days_from_civil); m in [1, 12], d in [1, 31].
constexpr std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) noexcept {
    y -= m <= 2 ? 1 : 0;
    const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
    const auto yoe = static_cast<unsigned>(y - era * 400);                 // [0, 399]
    const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;  // [0, 365]
    const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;            // [0, 146096]
    return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

struct CivilDate {
    std::int64_t year = 1970;
    unsigned month = 1;  // [1, 12]
    unsigned day = 1;    // [1, 31]

    friend constexpr bool operator==(const CivilDate&, const CivilDate&) = default;
};

// The date `days` after 1970-01-01 (Howard Hinnant's civil_from_days); the inverse of
// days_from_civil.
constexpr CivilDate civil_from_days(std::int64_t days) noexcept {
    const std::int64_t z = days + 719468;
    const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    const auto doe = static_cast<unsigned>(z - era * 146097);                    // [0, 146096]
    const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;  // [0, 399]
    const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);                // [0, 365]
    const unsigned mp = (5 * doy + 2) / 153;                                     // [0, 11]
    const unsigned d = doy - (153 * mp + 2) / 5 + 1;
    const unsigned m = mp < 10 ? mp + 3 : mp - 9;
    return {static_cast<std::int64_t>(yoe) + era * 400 + (m <= 2 ? 1 : 0), m, d};
}

constexpr bool is_leap_year(std::int64_t y) noexcept {
    return y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
}

// m in [1, 12].
constexpr unsigned days_in_month(std::int64_t y, unsigned m) noexcept {
    constexpr unsigned kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m == 2 && is_leap_year(y) ? 29 : kDays[m - 1];
}

// An instant split into its UTC calendar fields (rounded down, also before 1970).
struct CivilTime {
    CivilDate date;
    unsigned hour = 0;         // [0, 23]
    unsigned minute = 0;       // [0, 59]
    unsigned second = 0;       // [0, 59]
    unsigned microsecond = 0;  // [0, 999999]
};

constexpr CivilTime civil_time_from_us(std::int64_t us) noexcept {
    std::int64_t seconds = us / 1'000'000;
    std::int64_t micros = us % 1'000'000;
    if (micros < 0) {
        micros += 1'000'000;
        --seconds;
    }
    std::int64_t days = seconds / 86400;
    std::int64_t of_day = seconds % 86400;
    if (of_day < 0) {
        of_day += 86400;
        --days;
    }
    return {civil_from_days(days), static_cast<unsigned>(of_day / 3600),
            static_cast<unsigned>(of_day / 60 % 60), static_cast<unsigned>(of_day % 60),
            static_cast<unsigned>(micros)};
}

enum class Rfc3339Status {
    ok,
    syntax,        // not RFC 3339 at all
    out_of_range,  // RFC 3339 shape, but an impossible date, time or offset (or one the rules
                   // below refuse)
};

// What parse_rfc3339 accepts beyond the strict grammar. The defaults are the message decoder's
// rules (its tests and fuzz corpus pin them); the HTTP API refuses what PostgreSQL cannot store
// back unchanged.
struct Rfc3339Rules {
    // "…:60": a leap second, read as the first second of the next minute (PostgreSQL's reading).
    bool leap_second = true;
    // "0000-…": year zero (PostgreSQL has none: its year before 1 is 1 BC).
    bool year_zero = true;
};

// Parses YYYY-MM-DD('T'|'t'|' ')hh:mm:ss[.fraction]('Z'|'z'|±hh:mm) into microseconds since the
// Unix epoch, UTC. The fraction has 1 to 9 digits; digits beyond microseconds are truncated.
// Offsets up to ±23:59. The syntax is checked in full before any field's range, so a malformed
// text is `syntax` even when a field is also out of range. out_us is written only on `ok`.
Rfc3339Status parse_rfc3339(std::string_view text, std::int64_t& out_us,
                            Rfc3339Rules rules = {}) noexcept;

// Wall-clock (system_clock) microseconds since the Unix epoch. Not monotonic: measure durations
// with std::chrono::steady_clock.
std::int64_t now_us() noexcept;

}  // namespace trackd::core
