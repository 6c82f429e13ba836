#include "params.hpp"

#include <charconv>
#include <cmath>
#include <iterator>
#include <vector>

#include <fmt/format.h>

#include "trackd/core/time.hpp"

#include "problem.hpp"

namespace trackd::http {
namespace {

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
    v.reserve(parts.size());
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
    // PostgreSQL has no year 0 and its leap second would come back as the next minute: both are
    // refused here, so that what is bound reads back unchanged.
    constexpr core::Rfc3339Rules kRules{.leap_second = false, .year_zero = false};
    std::int64_t us = 0;
    switch (core::parse_rfc3339(s, us, kRules)) {
        case core::Rfc3339Status::ok:
            break;
        case core::Rfc3339Status::syntax: {
            // In a query string a bare '+' reads as a space: "…T02:02:03 01:00" was sent as
            // "…T02:02:03+01:00" without encoding the '+'.
            std::string plus = s;
            if (const auto sp = plus.rfind(' '); sp != std::string::npos) plus[sp] = '+';
            std::int64_t ignored = 0;
            if (plus != s &&
                core::parse_rfc3339(plus, ignored, kRules) != core::Rfc3339Status::syntax) {
                bad_parameter(name, "'" + s +
                                        "' has a space where its offset's sign belongs: in a query "
                                        "string send '+' as %2B (a bare '+' reads as a space)");
            }
            bad_parameter(name, "'" + s +
                                    "' is not an RFC 3339 date-time (e.g. 2026-11-30T01:02:03Z or "
                                    "2026-11-30T02:02:03.5%2B01:00 in a query string)");
        }
        case core::Rfc3339Status::out_of_range:
            bad_parameter(name, "'" + s + "' is not a possible date and time");
    }
    // An offset may carry 0001-01-01 or 9999-12-31 out of the years PostgreSQL reads back.
    constexpr std::int64_t kEnd = core::days_from_civil(10000, 1, 1) * 86400 * 1000000;
    if (us < earliest_time_us() || us >= kEnd) {
        bad_parameter(name, "'" + s + "' is outside years 1..9999");
    }
    return us;
}

std::int64_t earliest_time_us() { return core::days_from_civil(1, 1, 1) * 86400 * 1000000; }

bool parse_ints(const std::string& text, char sep, std::int64_t* out, std::size_t n) {
    std::size_t pos = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const auto end = i + 1 == n ? text.size() : text.find(sep, pos);
        if (end == std::string::npos) return false;
        const char* b = text.data() + pos;
        const char* e = text.data() + end;
        auto [ptr, ec] = std::from_chars(b, e, out[i]);
        if (b == e || ec != std::errc{} || ptr != e) return false;
        pos = end + 1;
    }
    return true;
}

PositionCursor parse_position_cursor(const std::string& name, const std::string& text) {
    std::int64_t v[4] = {};
    constexpr std::int64_t kYear10000Us = 253402300800LL * 1000000;
    if (!parse_ints(text, '_', v, 4) || v[0] < earliest_time_us() || v[0] >= kYear10000Us ||
        v[2] < INT32_MIN || v[2] > INT32_MAX) {
        bad_parameter(name, "'" + text + "' is not a cursor from a next link");
    }
    return {v[0], v[1], v[2], v[3]};
}

std::string format_rfc3339(std::int64_t us) {
    std::string out;
    append_rfc3339(out, us);
    return out;
}

void append_rfc3339(std::string& out, std::int64_t us) {
    const core::CivilTime t = core::civil_time_from_us(us);
    if (t.date.year < 0 || t.date.year > 9999) {  // not RFC 3339; PostgreSQL allows them
        fmt::format_to(std::back_inserter(out), "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z",
                       t.date.year, t.date.month, t.date.day, t.hour, t.minute, t.second,
                       t.microsecond);
        return;
    }
    // "YYYY-MM-DDTHH:MM:SS[.ffffff]Z", written digit by digit: an API page formats one per row.
    char buf[32];
    char* p = buf;
    const auto digits = [&p](unsigned v, int width) {
        for (int i = width - 1; i >= 0; --i, v /= 10) p[i] = static_cast<char>('0' + v % 10);
        p += width;
    };
    digits(static_cast<unsigned>(t.date.year), 4);
    *p++ = '-';
    digits(static_cast<unsigned>(t.date.month), 2);
    *p++ = '-';
    digits(static_cast<unsigned>(t.date.day), 2);
    *p++ = 'T';
    digits(static_cast<unsigned>(t.hour), 2);
    *p++ = ':';
    digits(static_cast<unsigned>(t.minute), 2);
    *p++ = ':';
    digits(static_cast<unsigned>(t.second), 2);
    if (t.microsecond != 0) {
        *p++ = '.';
        digits(static_cast<unsigned>(t.microsecond), 6);
        while (p[-1] == '0') --p;
    }
    *p++ = 'Z';
    out.append(buf, p);
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
