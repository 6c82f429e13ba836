// Fuzzes the HTTP request target and query-parameter parsing (request.cpp, params.cpp): the input
// is a request target ("/collections/vehicles/items?bbox=...&datetime=..."); every parameter
// value goes through every parser the endpoints use. Each either returns a value that is safe to
// bind to SQL or throws ProblemError 400; anything else (a crash, UB, another exception, an
// unsafe value) is a finding.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "params.hpp"
#include "problem.hpp"
#include "request.hpp"

namespace {

using namespace trackd::http;

template <typename F>
void expect_400(F&& f) {
    try {
        f();
    } catch (const ProblemError& e) {
        if (info(e.problem().kind).status != 400) std::abort();
    }
}

void check_value(const std::string& name, const std::string& value) {
    expect_400([&] {
        const double v = parse_number(name, value);
        if (!std::isfinite(v)) std::abort();
    });
    expect_400([&] {
        const double v = parse_longitude(name, value);
        if (!(v >= -180 && v <= 180)) std::abort();
    });
    expect_400([&] {
        const double v = parse_latitude(name, value);
        if (!(v >= -90 && v <= 90)) std::abort();
    });
    expect_400([&] { parse_bool(name, value); });
    expect_400([&] {
        const BBox b = parse_bbox(name, value);
        if (!(b.min_lon <= b.max_lon && b.min_lat <= b.max_lat)) std::abort();
    });
    expect_400([&] {
        // What vehicle_service does with updated_since: parse, format, bind; the formatted text
        // must parse back to the same instant.
        const auto us = parse_rfc3339(name, value);
        if (parse_rfc3339(name, format_rfc3339(us)) != us) std::abort();
    });
    expect_400([&] {
        const TimeInterval iv = parse_datetime(name, value);
        if (!iv.from_us && !iv.to_us) std::abort();
        if (iv.from_us && iv.to_us && *iv.from_us > *iv.to_us) std::abort();
        if (iv.from_us) (void)format_rfc3339(*iv.from_us);
        if (iv.to_us) (void)format_rfc3339(*iv.to_us);
    });
    expect_400([&] { check_identifier(name, value, 256); });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view target(reinterpret_cast<const char*>(data), size);
    expect_400([&] {
        const Target t = parse_target(target);
        for (const auto& segment : t.segments) {
            if (segment.find('\0') != std::string::npos || !valid_utf8(segment)) std::abort();
            // A decoded segment, encoded again, decodes to itself.
            if (percent_decode(percent_encode(segment), false) != segment) std::abort();
            expect_400([&] { check_identifier("vehicle_id", segment, 256); });
        }
        expect_400([&] { (void)parse_limit(t.query, 100, 10000); });
        expect_400([&] { t.query.only({"bbox", "datetime", "limit", "after", "f"}); });
        for (const auto& [name, value] : t.query.items()) {
            if (!valid_utf8(name) || !valid_utf8(value)) std::abort();
            check_value(name, value);
        }
    });
    return 0;
}
