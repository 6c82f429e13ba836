// Request targets: percent-decoding, path segments, query parameters, and the 400s for
// malformed escapes, NUL, invalid UTF-8 and repeated parameters.
#include "request.hpp"

#include <gtest/gtest.h>

#include "problem.hpp"
#include "problem_of.hpp"

namespace trackd::http {
namespace {

TEST(Request, PercentDecodingAndSegments) {
    const auto t =
        parse_target("/v1/vehicles/bus%2F42/track?from=2026-01-01T00%3A00%3A00Z&a+b=c+d");
    ASSERT_EQ(t.segments.size(), 4U);
    EXPECT_EQ(t.segments[2], "bus/42");
    EXPECT_EQ(t.query.get("from"), "2026-01-01T00:00:00Z");
    EXPECT_EQ(t.query.get("a b"), "c d");
    EXPECT_EQ(parse_target("/collections/").segments, std::vector<std::string>{"collections"});
    EXPECT_TRUE(parse_target("/").segments.empty());
}

TEST(Request, MalformedTargetsAre400NamingTheParameter) {
    auto p = problem_of([] { parse_target("/v1/vehicles?limit=1&limit=2"); });
    EXPECT_EQ(p.kind, ProblemKind::bad_parameter);
    EXPECT_EQ(p.parameter, "limit");
    EXPECT_EQ(p.detail, "limit: given more than once");
    p = problem_of([] { parse_target("/v1/vehicles?after=%ZZ"); });
    EXPECT_EQ(p.parameter, "after");
    p = problem_of([] { parse_target("/v1/vehicles?after=a%00b"); });
    EXPECT_EQ(p.detail, "after: must not contain NUL");
    p = problem_of([] { parse_target("/v1/vehicles?after=%C3%28"); });
    EXPECT_EQ(p.detail, "after: not valid UTF-8");
    p = problem_of([] { parse_target("/v1/vehicles/%FF"); });
    EXPECT_EQ(p.parameter, "path");
    p = problem_of([] { parse_target("/v1/vehicles?=x&limit=1"); });
    EXPECT_EQ(p.kind, ProblemKind::bad_request);
    EXPECT_EQ(p.detail, "a query parameter has no name before its '=': '=x'");
}

// The absolute form (RFC 9112 3.2.2), which a server must accept: its path and query as the
// origin form's, its authority kept (it stands for the Host header).
TEST(Request, AnAbsoluteFormTargetIsReadAsItsPath) {
    auto t = parse_target("http://fleet.example:8080/v1/vehicles/bus%2F42?limit=2");
    EXPECT_EQ(t.path, "/v1/vehicles/bus%2F42");
    EXPECT_EQ(t.segments, (std::vector<std::string>{"v1", "vehicles", "bus/42"}));
    EXPECT_EQ(t.query.get("limit"), "2");
    EXPECT_EQ(t.authority, "fleet.example:8080");
    t = parse_target("HTTPS://fleet.example?limit=2");
    EXPECT_EQ(t.path, "/");
    EXPECT_TRUE(t.segments.empty());
    EXPECT_EQ(t.query.get("limit"), "2");
    EXPECT_EQ(parse_target("http://fleet.example").path, "/");
    EXPECT_EQ(parse_target("/v1/vehicles").authority, "");
    const auto p = problem_of([] { parse_target("http:///v1/vehicles"); });
    EXPECT_EQ(p.detail, "an absolute request target must name a host");
}

TEST(Utf8, AcceptsValidRejectsInvalid) {
    EXPECT_TRUE(valid_utf8("Zürich \xe2\x82\xac \xf0\x9f\x9a\x8c"));
    EXPECT_FALSE(valid_utf8("\xc0\xaf"));          // overlong
    EXPECT_FALSE(valid_utf8("\xed\xa0\x80"));      // surrogate
    EXPECT_FALSE(valid_utf8("\xf4\x90\x80\x80"));  // above U+10FFFF
    EXPECT_FALSE(valid_utf8("abc\xe2\x82"));       // truncated
}

// A header's value quoted in a problem: as it is when UTF-8, percent-encoded otherwise.
TEST(Utf8, AHeaderIsQuotedAsItIsOnlyWhenItIsUtf8) {
    EXPECT_EQ(quotable("text/plain; charset=Zürich"), "text/plain; charset=Zürich");
    EXPECT_EQ(quotable("text/\xff"), "text%2F%FF");
    EXPECT_EQ(quotable("12\xc0\xaf"), "12%C0%AF");
}

}  // namespace
}  // namespace trackd::http
