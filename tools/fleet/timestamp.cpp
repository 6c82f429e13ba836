#include "timestamp.hpp"

#include <chrono>

#include "trackd/core/time.hpp"

namespace trackd::fleet {
namespace {

using std::chrono::days;
using std::chrono::milliseconds;

void put2(char* out, unsigned v) {
    out[0] = static_cast<char>('0' + v / 10);
    out[1] = static_cast<char>('0' + v % 10);
}

}  // namespace

void format_rfc3339_ms(std::int64_t epoch_ms, char* out) {
    const auto tp = std::chrono::sys_time<milliseconds>(milliseconds(epoch_ms));
    const auto day = std::chrono::floor<days>(tp);
    const std::chrono::year_month_day ymd(day);
    const std::int64_t ms_of_day = (tp - day).count();
    const int year = static_cast<int>(ymd.year());
    const auto y = static_cast<unsigned>(year < 0 ? 0 : (year > 9999 ? 9999 : year));
    put2(out, y / 100);
    put2(out + 2, y % 100);
    out[4] = '-';
    put2(out + 5, static_cast<unsigned>(ymd.month()));
    out[7] = '-';
    put2(out + 8, static_cast<unsigned>(ymd.day()));
    out[10] = 'T';
    const auto s = static_cast<unsigned>(ms_of_day / 1000);
    put2(out + 11, s / 3600);
    out[13] = ':';
    put2(out + 14, s / 60 % 60);
    out[16] = ':';
    put2(out + 17, s % 60);
    out[19] = '.';
    const auto ms = static_cast<unsigned>(ms_of_day % 1000);
    out[20] = static_cast<char>('0' + ms / 100);
    put2(out + 21, ms % 100);
    out[23] = 'Z';
}

std::string to_rfc3339_ms(std::int64_t epoch_ms) {
    std::string s(kRfc3339MsLength, '\0');
    format_rfc3339_ms(epoch_ms, s.data());
    return s;
}

std::optional<std::int64_t> parse_rfc3339_ms(std::string_view text) {
    std::int64_t us = 0;
    if (core::parse_rfc3339(text, us) != core::Rfc3339Status::ok) return std::nullopt;
    return us / 1000 - (us % 1000 < 0 ? 1 : 0);
}

}  // namespace trackd::fleet
