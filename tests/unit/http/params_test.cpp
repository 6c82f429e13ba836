// Query parameters: parsing and range checks, each refusal a 400 naming the parameter.
#include "params.hpp"

#include <gtest/gtest.h>

#include "problem.hpp"
#include "problem_of.hpp"
#include "request.hpp"

namespace trackd::http {
namespace {

QueryParams one_param(const std::string& name, const std::string& value) {
    return QueryParams(std::vector<std::pair<std::string, std::string>>{{name, value}});
}

TEST(Params, BBox) {
    const auto b = parse_bbox("bbox", "13.1,52.2,13.5,52.6");
    EXPECT_DOUBLE_EQ(b.min_lon, 13.1);
    EXPECT_DOUBLE_EQ(b.max_lat, 52.6);
    const auto b3 = parse_bbox("bbox", "13.1,52.2,0,13.5,52.6,100");
    EXPECT_DOUBLE_EQ(b3.max_lon, 13.5);
    EXPECT_EQ(problem_of([] { parse_bbox("bbox", "a,b,c,d"); }).detail,
              "bbox: 'a' is not a number");
    EXPECT_EQ(problem_of([] { parse_bbox("bbox", "1,2,3"); }).parameter, "bbox");
    EXPECT_EQ(problem_of([] { parse_bbox("bbox", "0,0,1,91"); }).detail,
              "bbox: latitude 91 is outside [-90, 90]");
    EXPECT_EQ(problem_of([] { parse_bbox("bbox", "0,0,181,1"); }).detail,
              "bbox: longitude 181 is outside [-180, 180]");
    EXPECT_NE(problem_of([] {
                  parse_bbox("bbox", "5,0,1,1");
              }).detail.find("bbox: minLon 5 is greater than maxLon 1"),
              std::string::npos);
    EXPECT_EQ(problem_of([] { parse_bbox("bbox", "0,5,1,1"); }).detail,
              "bbox: minLat 5 is greater than maxLat 1");
    EXPECT_EQ(problem_of([] { parse_bbox("bbox", "0,0,nan,1"); }).detail,
              "bbox: 'nan' is not a number");
    EXPECT_EQ(problem_of([] { parse_bbox("bbox", "0,0,inf,1"); }).parameter, "bbox");
}

TEST(Params, LimitAndCoordinates) {
    EXPECT_EQ(parse_limit(QueryParams{}, 100, 50), 50);
    EXPECT_EQ(parse_limit(one_param("limit", "7"), 100, 50), 7);
    for (const char* bad : {"0", "51", "-1", "1.5", "x", ""}) {
        const auto p = problem_of([&] { parse_limit(one_param("limit", bad), 100, 50); });
        EXPECT_EQ(p.parameter, "limit") << bad;
        EXPECT_EQ(p.detail, std::string("limit: '") + bad + "' is not an integer between 1 and 50");
    }
    EXPECT_DOUBLE_EQ(parse_latitude("lat", "-90"), -90);
    EXPECT_EQ(problem_of([] { parse_latitude("lat", "90.5"); }).detail,
              "lat: latitude 90.5 is outside [-90, 90]");
    EXPECT_EQ(problem_of([] { parse_longitude("lon", "1e400"); }).detail,
              "lon: '1e400' is not a number");
    EXPECT_TRUE(parse_bool("repair", "true"));
    EXPECT_EQ(problem_of([] { parse_bool("repair", "yes"); }).detail,
              "repair: 'yes' is not true or false");
}

TEST(Params, Rfc3339) {
    EXPECT_EQ(parse_rfc3339("t", "1970-01-01T00:00:00Z"), 0);
    EXPECT_EQ(parse_rfc3339("t", "2026-11-30T01:02:03.456789Z"), 1796000523456789);
    EXPECT_EQ(parse_rfc3339("t", "2026-11-30T02:02:03.456789+01:00"), 1796000523456789);
    EXPECT_EQ(parse_rfc3339("t", "2026-11-30T01:02:03.4567891Z"), 1796000523456789);
    EXPECT_EQ(format_rfc3339(1796000523456789), "2026-11-30T01:02:03.456789Z");
    EXPECT_EQ(format_rfc3339(1796000523000000), "2026-11-30T01:02:03Z");
    EXPECT_EQ(format_rfc3339(-1), "1969-12-31T23:59:59.999999Z");
    EXPECT_EQ(format_rfc3339(1796000523450000), "2026-11-30T01:02:03.45Z");
    EXPECT_EQ(format_rfc3339(1796000523000001), "2026-11-30T01:02:03.000001Z");
    EXPECT_EQ(format_rfc3339(earliest_time_us()), "0001-01-01T00:00:00Z");
    EXPECT_EQ(format_rfc3339(253402300799999999), "9999-12-31T23:59:59.999999Z");
    for (const char* bad :
         {"2026-11-30", "2026-11-30T25:00:00Z", "2026-02-30T00:00:00Z", "2026-11-30T01:02:03",
          "yesterday", "2026-11-30T01:02:03.Z", "0001-01-01T00:00:00+01:00"}) {
        const auto p = problem_of([&] { parse_rfc3339("from", bad); });
        EXPECT_EQ(p.parameter, "from") << bad;
        EXPECT_EQ(p.detail.rfind("from: ", 0), 0U) << p.detail;
    }
    // An offset's '+' sent bare in a query string arrives as a space: the answer says so.
    EXPECT_EQ(problem_of([] { parse_rfc3339("from", "2026-11-30T02:02:03 01:00"); }).detail,
              "from: '2026-11-30T02:02:03 01:00' has a space where its offset's sign belongs: in "
              "a query string send '+' as %2B (a bare '+' reads as a space)");
    EXPECT_EQ(problem_of([] { parse_rfc3339("from", "2026-11-30T02:02:03"); }).detail,
              "from: '2026-11-30T02:02:03' is not an RFC 3339 date-time (e.g. "
              "2026-11-30T01:02:03Z or 2026-11-30T02:02:03.5%2B01:00 in a query string)");
}

TEST(Params, DatetimeIntervals) {
    auto iv = parse_datetime("datetime", "2026-01-01T00:00:00Z/..");
    EXPECT_TRUE(iv.from_us && !iv.to_us);
    iv = parse_datetime("datetime", "../2026-01-01T00:00:00Z");
    EXPECT_TRUE(!iv.from_us && iv.to_us);
    iv = parse_datetime("datetime", "2026-01-01T00:00:00Z");
    EXPECT_EQ(iv.from_us, iv.to_us);
    EXPECT_EQ(problem_of([] { parse_datetime("datetime", "../.."); }).parameter, "datetime");
    EXPECT_EQ(
        problem_of([] {
            parse_datetime("datetime", "2026-02-01T00:00:00Z/2026-01-01T00:00:00Z");
        }).detail,
        "datetime: the interval '2026-02-01T00:00:00Z/2026-01-01T00:00:00Z' starts after it ends");
}

}  // namespace
}  // namespace trackd::http
