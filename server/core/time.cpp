#include "trackd/core/time.hpp"

#include <chrono>
#include <cstddef>

namespace trackd::core {
namespace {

static_assert(days_from_civil(1970, 1, 1) == 0);
static_assert(days_from_civil(2000, 3, 1) == 11017);
static_assert(days_from_civil(1969, 12, 31) == -1);
static_assert(civil_from_days(11017) == CivilDate{2000, 3, 1});
static_assert(civil_from_days(-1) == CivilDate{1969, 12, 31});

// Two ASCII digits at p, or -1.
int two_digits(const char* p) noexcept {
    const unsigned a = static_cast<unsigned char>(p[0]) - '0';
    const unsigned b = static_cast<unsigned char>(p[1]) - '0';
    if (a > 9 || b > 9) return -1;
    return static_cast<int>(a * 10 + b);
}

}  // namespace

// Hand-written for speed (no regex, no locale, no allocation): fixed-position digits first, then
// the fraction and the zone, then the ranges.
Rfc3339Status parse_rfc3339(std::string_view text, std::int64_t& out_us,
                            Rfc3339Rules rules) noexcept {
    const std::string_view s = text;
    const std::size_t n = s.size();
    if (n < 20) return Rfc3339Status::syntax;
    const char* p = s.data();
    const int century = two_digits(p);
    const int year2 = two_digits(p + 2);
    const int month = two_digits(p + 5);
    const int day = two_digits(p + 8);
    const int hour = two_digits(p + 11);
    const int minute = two_digits(p + 14);
    const int second = two_digits(p + 17);
    if (century < 0 || year2 < 0 || month < 0 || day < 0 || hour < 0 || minute < 0 || second < 0 ||
        p[4] != '-' || p[7] != '-' || p[13] != ':' || p[16] != ':') {
        return Rfc3339Status::syntax;
    }
    if (p[10] != 'T' && p[10] != 't' && p[10] != ' ') return Rfc3339Status::syntax;

    std::size_t i = 19;
    std::int64_t fraction_us = 0;
    if (s[i] == '.') {
        ++i;
        const std::size_t begin = i;
        std::int64_t scale = 100000;
        while (i < n && s[i] >= '0' && s[i] <= '9') {
            fraction_us += (s[i] - '0') * scale;
            scale /= 10;  // reaches 0 after the sixth digit: the rest is truncated
            ++i;
        }
        const std::size_t digits = i - begin;
        if (digits == 0 || digits > 9) return Rfc3339Status::syntax;
    }
    if (i >= n) return Rfc3339Status::syntax;

    std::int64_t offset_s = 0;
    bool offset_ok = true;
    const char zone = s[i];
    if (zone == 'Z' || zone == 'z') {
        ++i;
    } else if (zone == '+' || zone == '-') {
        if (n - i != 6 || p[i + 3] != ':') return Rfc3339Status::syntax;
        const int oh = two_digits(p + i + 1);
        const int om = two_digits(p + i + 4);
        if (oh < 0 || om < 0) return Rfc3339Status::syntax;
        offset_ok = oh <= 23 && om <= 59;
        offset_s = (std::int64_t{oh} * 60 + om) * 60;
        if (zone == '-') offset_s = -offset_s;
        i += 6;
    } else {
        return Rfc3339Status::syntax;
    }
    if (i != n) return Rfc3339Status::syntax;

    const int year = century * 100 + year2;
    if (!offset_ok || month < 1 || month > 12 || day < 1 ||
        static_cast<unsigned>(day) > days_in_month(year, static_cast<unsigned>(month)) ||
        hour > 23 || minute > 59 || second > (rules.leap_second ? 60 : 59) ||
        (year == 0 && !rules.year_zero)) {
        return Rfc3339Status::out_of_range;
    }
    const std::int64_t days =
        days_from_civil(year, static_cast<unsigned>(month), static_cast<unsigned>(day));
    const std::int64_t seconds =
        days * 86400 + std::int64_t{hour} * 3600 + std::int64_t{minute} * 60 + second - offset_s;
    out_us = seconds * 1'000'000 + fraction_us;
    return Rfc3339Status::ok;
}

std::int64_t now_us() noexcept {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

}  // namespace trackd::core
