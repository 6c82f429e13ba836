#include "timestamp.hpp"

#include <chrono>

namespace trackd::fleet {
namespace {

using std::chrono::days;
using std::chrono::milliseconds;
using std::chrono::sys_days;

void put2(char* out, unsigned v) {
    out[0] = static_cast<char>('0' + v / 10);
    out[1] = static_cast<char>('0' + v % 10);
}

// Reads exactly n digits at text[pos]; advances pos.
std::optional<int> digits(std::string_view text, std::size_t& pos, std::size_t n) {
    if (pos + n > text.size()) return std::nullopt;
    int v = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const char c = text[pos + i];
        if (c < '0' || c > '9') return std::nullopt;
        v = v * 10 + (c - '0');
    }
    pos += n;
    return v;
}

bool expect(std::string_view text, std::size_t& pos, std::string_view chars) {
    if (pos >= text.size() || chars.find(text[pos]) == std::string_view::npos) return false;
    ++pos;
    return true;
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
    std::size_t pos = 0;
    const auto year = digits(text, pos, 4);
    if (!year || !expect(text, pos, "-")) return std::nullopt;
    const auto month = digits(text, pos, 2);
    if (!month || !expect(text, pos, "-")) return std::nullopt;
    const auto day = digits(text, pos, 2);
    if (!day || !expect(text, pos, "Tt ")) return std::nullopt;
    const auto hour = digits(text, pos, 2);
    if (!hour || !expect(text, pos, ":")) return std::nullopt;
    const auto minute = digits(text, pos, 2);
    if (!minute || !expect(text, pos, ":")) return std::nullopt;
    const auto second = digits(text, pos, 2);
    if (!second) return std::nullopt;
    int ms = 0;
    if (pos < text.size() && text[pos] == '.') {
        ++pos;
        int scale = 100;
        const std::size_t first = pos;
        while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
            ms += (text[pos] - '0') * scale;
            scale /= 10;
            ++pos;
        }
        if (pos == first) return std::nullopt;
    }
    int offset_min = 0;
    if (pos < text.size() && (text[pos] == 'Z' || text[pos] == 'z')) {
        ++pos;
    } else if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
        const int sign = text[pos] == '-' ? -1 : 1;
        ++pos;
        const auto oh = digits(text, pos, 2);
        if (!oh || !expect(text, pos, ":")) return std::nullopt;
        const auto om = digits(text, pos, 2);
        if (!om || *oh > 23 || *om > 59) return std::nullopt;
        offset_min = sign * (*oh * 60 + *om);
    } else {
        return std::nullopt;
    }
    if (pos != text.size()) return std::nullopt;

    const std::chrono::year_month_day ymd{std::chrono::year(*year),
                                          std::chrono::month(static_cast<unsigned>(*month)),
                                          std::chrono::day(static_cast<unsigned>(*day))};
    if (!ymd.ok() || *hour > 23 || *minute > 59 || *second > 60) return std::nullopt;
    const std::int64_t day_ms =
        std::chrono::duration_cast<milliseconds>(sys_days(ymd).time_since_epoch()).count();
    return day_ms + ((*hour * 60 + *minute - offset_min) * 60 + *second) * 1000LL + ms;
}

std::int64_t now_epoch_ms() {
    return std::chrono::duration_cast<milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

}  // namespace trackd::fleet
