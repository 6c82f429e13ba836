#include "params.hpp"

#include <charconv>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "problem.hpp"

namespace trackd::http {
namespace {

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) {
    y -= m <= 2 ? 1 : 0;
    const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
    const auto yoe = static_cast<unsigned>(y - era * 400);
    const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

struct Civil {
    std::int64_t y;
    unsigned m;
    unsigned d;
};

Civil civil_from_days(std::int64_t z) {
    z += 719468;
    const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    const auto doe = static_cast<unsigned>(z - era * 146097);
    const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    const std::int64_t y = static_cast<std::int64_t>(yoe) + era * 400;
    const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    const unsigned mp = (5 * doy + 2) / 153;
    const unsigned d = doy - (153 * mp + 2) / 5 + 1;
    const unsigned m = mp < 10 ? mp + 3 : mp - 9;
    return {y + (m <= 2 ? 1 : 0), m, d};
}

bool leap(std::int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

unsigned days_in_month(std::int64_t y, unsigned m) {
    static constexpr unsigned kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m == 2 && leap(y) ? 29 : kDays[m - 1];
}

// Reads exactly `n` digits at `pos`.
bool digits(const std::string& s, std::size_t pos, std::size_t n, int& out) {
    if (pos + n > s.size()) return false;
    out = 0;
    for (std::size_t i = pos; i < pos + n; ++i) {
        if (s[i] < '0' || s[i] > '9') return false;
        out = out * 10 + (s[i] - '0');
    }
    return true;
}

std::vector<std::string> split(const std::string& s, char sep) {
    std::vector<std::string> out;
    std::size_t start = 0;
    while (true) {
        const auto p = s.find(sep, start);
        out.push_back(s.substr(start, p - start));
        if (p == std::string::npos) break;
        start = p + 1;
    }
    return out;
}

}  // namespace

double parse_number(const std::string& name, const std::string& text) {
    double v = 0;
    const char* b = text.data();
    const char* e = b + text.size();
    auto [ptr, ec] = std::from_chars(b, e, v);
    if (text.empty() || ec != std::errc{} || ptr != e || !std::isfinite(v)) {
        bad_parameter(name, "'" + text + "' is not a number");
    }
    return v;
}

double parse_longitude(const std::string& name, const std::string& text) {
    const double v = parse_number(name, text);
    if (v < -180 || v > 180)
        bad_parameter(name, fmt::format("longitude {} is outside [-180, 180]", v));
    return v;
}

double parse_latitude(const std::string& name, const std::string& text) {
    const double v = parse_number(name, text);
    if (v < -90 || v > 90) bad_parameter(name, fmt::format("latitude {} is outside [-90, 90]", v));
    return v;
}

bool parse_bool(const std::string& name, const std::string& text) {
    if (text == "true") return true;
    if (text == "false") return false;
    bad_parameter(name, "'" + text + "' is not true or false");
}

BBox parse_bbox(const std::string& name, const std::string& text) {
    const auto parts = split(text, ',');
    if (parts.size() != 4 && parts.size() != 6) {
        bad_parameter(name,
                      "expected 4 numbers minLon,minLat,maxLon,maxLat (or 6 with heights), got " +
                          std::to_string(parts.size()) + " value(s)");
    }
    std::vector<double> v;
    for (const auto& p : parts) v.push_back(parse_number(name, p));
    const bool three_d = v.size() == 6;
    BBox b{v[0], v[1], v[three_d ? 3 : 2], v[three_d ? 4 : 3]};
    for (const double lon : {b.min_lon, b.max_lon}) {
        if (lon < -180 || lon > 180) {
            bad_parameter(name, fmt::format("longitude {} is outside [-180, 180]", lon));
        }
    }
    for (const double lat : {b.min_lat, b.max_lat}) {
        if (lat < -90 || lat > 90) {
            bad_parameter(name, fmt::format("latitude {} is outside [-90, 90]", lat));
        }
    }
    if (b.min_lon > b.max_lon) {
        bad_parameter(name, fmt::format("minLon {} is greater than maxLon {} (boxes across the "
                                        "antimeridian are not supported: send two requests)",
                                        b.min_lon, b.max_lon));
    }
    if (b.min_lat > b.max_lat) {
        bad_parameter(name,
                      fmt::format("minLat {} is greater than maxLat {}", b.min_lat, b.max_lat));
    }
    if (three_d && v[2] > v[5]) {
        bad_parameter(name, fmt::format("minHeight {} is greater than maxHeight {}", v[2], v[5]));
    }
    return b;
}

void check_format(const QueryParams& q) {
    const auto f = q.get("f");
    if (f && *f != "json")
        bad_parameter("f", "'" + *f + "' is not a format trackd serves (only json)");
}

int parse_limit(const QueryParams& q, int fallback, int max) {
    const auto text = q.get("limit");
    if (!text) return std::min(fallback, max);
    int v = 0;
    const char* b = text->data();
    const char* e = b + text->size();
    auto [ptr, ec] = std::from_chars(b, e, v);
    if (text->empty() || ec != std::errc{} || ptr != e || v < 1 || v > max) {
        bad_parameter("limit",
                      "'" + *text + "' is not an integer between 1 and " + std::to_string(max));
    }
    return v;
}

std::int64_t parse_rfc3339(const std::string& name, const std::string& s) {
    const auto fail = [&]() -> std::int64_t {
        bad_parameter(name, "'" + s +
                                "' is not an RFC 3339 date-time (e.g. 2026-11-30T01:02:03Z or "
                                "2026-11-30T02:02:03.5+01:00)");
    };
    int y = 0;
    int mo = 0;
    int d = 0;
    int h = 0;
    int mi = 0;
    int sec = 0;
    if (!digits(s, 0, 4, y) || s.size() < 20 || s[4] != '-' || !digits(s, 5, 2, mo) ||
        s[7] != '-' || !digits(s, 8, 2, d) || (s[10] != 'T' && s[10] != 't' && s[10] != ' ') ||
        !digits(s, 11, 2, h) || s[13] != ':' || !digits(s, 14, 2, mi) || s[16] != ':' ||
        !digits(s, 17, 2, sec)) {
        return fail();
    }
    if (y < 1 || mo < 1 || mo > 12 || d < 1 ||
        static_cast<unsigned>(d) > days_in_month(y, static_cast<unsigned>(mo)) || h > 23 ||
        mi > 59 || sec > 59) {
        bad_parameter(name, "'" + s + "' is not a possible date and time");
    }
    std::size_t pos = 19;
    std::int64_t frac_us = 0;
    if (pos < s.size() && s[pos] == '.') {
        ++pos;
        std::size_t n = 0;
        std::int64_t scale = 100000;
        while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
            if (n < 6) {
                frac_us += (s[pos] - '0') * scale;
                scale /= 10;
            }
            ++pos;
            ++n;
        }
        if (n == 0 || n > 9) return fail();
    }
    std::int64_t offset_s = 0;
    if (pos < s.size() && (s[pos] == 'Z' || s[pos] == 'z')) {
        ++pos;
    } else if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) {
        int oh = 0;
        int om = 0;
        if (!digits(s, pos + 1, 2, oh) || pos + 3 >= s.size() || s[pos + 3] != ':' ||
            !digits(s, pos + 4, 2, om) || oh > 23 || om > 59) {
            return fail();
        }
        offset_s = (s[pos] == '+' ? 1 : -1) * (oh * 3600 + om * 60);
        pos += 6;
    } else {
        return fail();
    }
    if (pos != s.size()) return fail();
    const std::int64_t days =
        days_from_civil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d));
    const std::int64_t secs = days * 86400 + h * 3600 + mi * 60 + sec - offset_s;
    // An offset may carry 0001-01-01 or 9999-12-31 out of the years PostgreSQL reads back.
    static const std::int64_t kMin = days_from_civil(1, 1, 1) * 86400;
    static const std::int64_t kMax = days_from_civil(10000, 1, 1) * 86400;
    if (secs < kMin || secs >= kMax) bad_parameter(name, "'" + s + "' is outside years 1..9999");
    return secs * 1000000 + frac_us;
}

std::int64_t earliest_time_us() { return days_from_civil(1, 1, 1) * 86400 * 1000000; }

std::string format_rfc3339(std::int64_t us) {
    std::int64_t secs = us / 1000000;
    std::int64_t frac = us % 1000000;
    if (frac < 0) {
        frac += 1000000;
        secs -= 1;
    }
    std::int64_t days = secs / 86400;
    std::int64_t rem = secs % 86400;
    if (rem < 0) {
        rem += 86400;
        days -= 1;
    }
    const Civil c = civil_from_days(days);
    std::string out = fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}", c.y, c.m, c.d, rem / 3600,
                                  rem / 60 % 60, rem % 60);
    if (frac != 0) {
        std::string f = fmt::format("{:06}", frac);
        while (f.back() == '0') f.pop_back();
        out += "." + f;
    }
    return out + "Z";
}

TimeInterval parse_datetime(const std::string& name, const std::string& text) {
    const auto slash = text.find('/');
    if (slash == std::string::npos) {
        const auto t = parse_rfc3339(name, text);
        return {t, t};
    }
    const std::string a = text.substr(0, slash);
    const std::string b = text.substr(slash + 1);
    TimeInterval iv;
    if (a != ".." && !a.empty()) iv.from_us = parse_rfc3339(name, a);
    if (b != ".." && !b.empty()) iv.to_us = parse_rfc3339(name, b);
    if (!iv.from_us && !iv.to_us) {
        bad_parameter(name, "'" + text + "' is open at both ends; give a start or an end");
    }
    if (iv.from_us && iv.to_us && *iv.from_us > *iv.to_us) {
        bad_parameter(name, "the interval '" + text + "' starts after it ends");
    }
    return iv;
}

void check_identifier(const std::string& name, const std::string& value, std::size_t max_len) {
    if (value.empty()) bad_parameter(name, "must not be empty");
    if (value.size() > max_len) {
        bad_parameter(name, "longer than " + std::to_string(max_len) + " bytes");
    }
    for (const char c : value) {
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
            bad_parameter(name, "must not contain control characters");
        }
    }
}

}  // namespace trackd::http
