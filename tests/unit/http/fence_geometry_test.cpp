// GeoJSON fences checked by GEOS: valid ones become MultiPolygon EWKB, invalid ones a 422
// naming the problem and its place, malformed ones a 400.
#include "fence_geometry.hpp"

#include <string>

#include <gtest/gtest.h>

#include "problem.hpp"
#include "problem_of.hpp"

namespace trackd::http {
namespace {

TEST(FenceGeometry, ValidPolygonBecomesMultiPolygonEwkb) {
    const auto f = parse_fence(
        R"({"type":"Feature","properties":{"name":"depot"},"geometry":{"type":"Polygon",)"
        R"("coordinates":[[[13,52],[13.1,52],[13.1,52.1],[13,52.1],[13,52]]]}})",
        false);
    EXPECT_FALSE(f.repaired);
    // Little-endian EWKB, type 6 (MultiPolygon) with the SRID flag, SRID 4326.
    EXPECT_EQ(f.ewkb_hex.substr(0, 18), "0106000020E6100000");
}

TEST(FenceGeometry, InvalidPolygonNamesProblemAndPlace) {
    const std::string bowtie =
        R"({"type":"Polygon","coordinates":[[[0,0],[2,2],[2,0],[0,2],[0,0]]]})";
    const auto p = problem_of([&] { parse_fence(bowtie, false); });
    EXPECT_EQ(p.kind, ProblemKind::invalid_geometry);
    EXPECT_EQ(p.parameter, "body");
    EXPECT_NE(p.detail.find("Self-intersection at or near [1, 1]"), std::string::npos) << p.detail;
    EXPECT_NE(p.detail.find("repair=true"), std::string::npos);
    const auto fixed = parse_fence(bowtie, true);
    EXPECT_TRUE(fixed.repaired);
    EXPECT_EQ(fixed.ewkb_hex.substr(0, 18), "0106000020E6100000");
}

// PostGIS's geography has no path for an edge between antipodal points: refused with the edge.
TEST(FenceGeometry, AnEdgeBetweenAntipodalPointsIsRefusedWithTheEdgeNamed) {
    const auto detail = [](const std::string& body) {
        const auto p = problem_of([&] { parse_fence(body, false); });
        EXPECT_EQ(p.kind, ProblemKind::invalid_geometry) << body;
        EXPECT_EQ(p.parameter, "body");
        return p.detail;
    };
    EXPECT_NE(detail(R"({"type":"Polygon","coordinates":[[[-90,0],[90,0],[90,10],[-90,10],)"
                     R"([-90,0]]]})")
                  .find("the edge from [-90, 0] to [90, 0] joins two antipodal points"),
              std::string::npos);
    // Pole to pole, on the last edge of the ring.
    EXPECT_NE(detail(R"({"type":"Polygon","coordinates":[[[-180,-90],[180,-90],[180,90],)"
                     R"([-180,90],[-180,-90]]]})")
                  .find("antipodal"),
              std::string::npos);
    // In a hole of the second polygon of a MultiPolygon.
    EXPECT_NE(detail(R"({"type":"MultiPolygon","coordinates":[)"
                     R"([[[0,70],[1,70],[1,71],[0,71],[0,70]]],)"
                     R"([[[-170,-60],[170,-60],[170,60],[-170,60],[-170,-60]],)"
                     R"([[-80,-45],[100,45],[-80,50],[-80,-45]]]]})")
                  .find("the edge from [-80, -45] to [100, 45]"),
              std::string::npos);
    // Close to antipodal is a path PostGIS accepts: stored.
    EXPECT_FALSE(parse_fence(R"({"type":"Polygon","coordinates":[[[-89.9999999,0],[90,0],)"
                             R"([90,10],[-90,10],[-89.9999999,0]]]})",
                             false)
                     .ewkb_hex.empty());
}

TEST(FenceGeometry, OtherRefusals) {
    const auto kind = [](const std::string& body) {
        return problem_of([&] { parse_fence(body, false); }).kind;
    };
    EXPECT_EQ(kind(""), ProblemKind::bad_body);
    EXPECT_EQ(kind("[1,2"), ProblemKind::bad_body);
    EXPECT_EQ(kind(R"({"type":"Point","coordinates":[1,2]})"), ProblemKind::invalid_geometry);
    EXPECT_EQ(kind(R"({"type":"Polygon","coordinates":[]})"), ProblemKind::invalid_geometry);
    EXPECT_EQ(kind(R"({"type":"Polygon","coordinates":[[[0,0],[1,1],[1,0]]]})"),
              ProblemKind::invalid_geometry);
    const auto far = problem_of([] {
        parse_fence(R"({"type":"Polygon","coordinates":[[[0,0],[200,0],[200,1],[0,0]]]})", false);
    });
    EXPECT_NE(far.detail.find("outside [-180, 180]"), std::string::npos) << far.detail;
    // Shapes a fuzzer sends: never a crash, always a 400 or 422.
    for (
        const char* odd :
        {R"({"type":"Polygon","coordinates":[[[1]]]})",
         R"({"type":"Polygon","coordinates":[[["a","b"]]]})",
         R"({"type":"MultiPolygon","coordinates":[[[]]]})", R"({"type":"Feature","geometry":null})",
         R"({"type":"Feature"})", R"({"type":"FeatureCollection","features":[]})", "null", "42",
         R"({"type":"Polygon","coordinates":[[[0,0],[1e308,0],[0,1],[0,0]]]})",
         // An empty position crashed GEOS 3.11's reader (tests/fuzz/regressions/fuzz_fence/).
         R"({"type":"Polygon","coordinates":[[[0,0],[],[0,1],[0,0]]]})",
         R"({"type":"Feature","geometry":{"type":"MultiPolygon","coordinates":[[[[]]]]}})",
         R"({"type":"GeometryCollection","geometries":[{"type":"LineString","coordinates":[[]]}]})"}) {
        const auto p = problem_of([&] { parse_fence(odd, true); });
        EXPECT_TRUE(p.kind == ProblemKind::bad_body || p.kind == ProblemKind::invalid_geometry)
            << odd << " -> " << p.detail;
    }
    // Nested beyond simdjson's depth limit (1024): refused before GEOS reads it.
    const std::string deep = std::string(5000, '[') + std::string(5000, ']');
    EXPECT_EQ(problem_of([&] { parse_fence(deep, true); }).kind, ProblemKind::bad_body);
}

}  // namespace
}  // namespace trackd::http
