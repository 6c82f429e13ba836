// The HTTP layer without services: request parsing, parameter validation, problem documents,
// access control and routing (through the real Api, whose pool never connects here because
// every request below is answered before any SQL would run), GeoJSON fences checked by GEOS.
#include <gtest/gtest.h>
#include <simdjson.h>

#include "trackd/config/config.hpp"
#include "trackd/core/metrics.hpp"

#include "api.hpp"
#include "auth.hpp"
#include "fence_geometry.hpp"
#include "json_writer.hpp"
#include "params.hpp"
#include "problem.hpp"
#include "request.hpp"

namespace trackd::http {
namespace {

// Runs `f`, which must throw a ProblemError; returns its problem.
template <class F>
Problem problem_of(F&& f) {
    try {
        f();
    } catch (const ProblemError& e) {
        return e.problem();
    }
    ADD_FAILURE() << "no ProblemError thrown";
    return {};
}

QueryParams one_param(const std::string& name, const std::string& value) {
    return QueryParams(std::vector<std::pair<std::string, std::string>>{{name, value}});
}

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
}

TEST(Utf8, AcceptsValidRejectsInvalid) {
    EXPECT_TRUE(valid_utf8("Zürich \xe2\x82\xac \xf0\x9f\x9a\x8c"));
    EXPECT_FALSE(valid_utf8("\xc0\xaf"));          // overlong
    EXPECT_FALSE(valid_utf8("\xed\xa0\x80"));      // surrogate
    EXPECT_FALSE(valid_utf8("\xf4\x90\x80\x80"));  // above U+10FFFF
    EXPECT_FALSE(valid_utf8("abc\xe2\x82"));       // truncated
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
    for (const char* bad :
         {"2026-11-30", "2026-11-30T25:00:00Z", "2026-02-30T00:00:00Z", "2026-11-30T01:02:03",
          "yesterday", "2026-11-30T01:02:03.Z", "0001-01-01T00:00:00+01:00"}) {
        const auto p = problem_of([&] { parse_rfc3339("from", bad); });
        EXPECT_EQ(p.parameter, "from") << bad;
        EXPECT_EQ(p.detail.rfind("from: ", 0), 0U) << p.detail;
    }
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

TEST(Problem, DocumentIsRfc7807) {
    const std::string json =
        problem_json({ProblemKind::bad_parameter, "bbox: bad \"x\"", "bbox"}, "/v1/vehicles");
    EXPECT_EQ(json, R"({"type":"urn:trackd:problem:bad-parameter","title":"Invalid parameter",)"
                    R"("status":400,"detail":"bbox: bad \"x\"","parameter":"bbox",)"
                    R"("instance":"/v1/vehicles"})");
    EXPECT_EQ(info(ProblemKind::invalid_geometry).status, 422);
    EXPECT_EQ(info(ProblemKind::unavailable).status, 503);
}

TEST(JsonWriter, EscapesAndNumbers) {
    JsonWriter w;
    w.begin_object().key("s").value("a\"b\\c\n\x01").key("n").value(0.1).key("i").value(-3);
    w.key("nan").value(std::numeric_limits<double>::quiet_NaN()).key("t").number_text("1e-05");
    w.key("bad").number_text("NaN").key("arr").begin_array().value(true).null().end_array();
    w.end_object();
    EXPECT_EQ(w.str(), R"({"s":"a\"b\\c\n\u0001","n":0.1,"i":-3,"nan":null,"t":1e-05,"bad":null,)"
                       R"("arr":[true,null]})");
    EXPECT_TRUE(is_json_number("-0.5e+3"));
    EXPECT_FALSE(is_json_number("01"));
    EXPECT_FALSE(is_json_number("Infinity"));
}

TEST(Auth, ConstantTimeCompareAndScopes) {
    EXPECT_TRUE(constant_time_equal("abc", "abc"));
    EXPECT_FALSE(constant_time_equal("abc", "abd"));
    EXPECT_FALSE(constant_time_equal("abc", "abcd"));
    EXPECT_FALSE(constant_time_equal("", "a"));
    const Authenticator auth({{"dash", {"read", "read-token-0123456789"}},
                              {"ops", {"write", "write-token-0123456789"}}});
    EXPECT_EQ(auth.identify("Bearer read-token-0123456789").token_name, "dash");
    EXPECT_EQ(auth.identify("bearer   write-token-0123456789").scope, Scope::write);
    EXPECT_FALSE(auth.identify("").scope.has_value());
    EXPECT_EQ(problem_of([&] { (void)auth.identify("Bearer nope"); }).kind,
              ProblemKind::unauthorized);
    EXPECT_EQ(problem_of([&] { (void)auth.identify("Basic dXNlcjpwYXNz"); }).parameter,
              "Authorization");
    EXPECT_EQ(problem_of([&] { Authenticator::require(Caller{}, Scope::read); }).kind,
              ProblemKind::unauthorized);
    EXPECT_EQ(problem_of([&] {
                  Authenticator::require(auth.identify("Bearer read-token-0123456789"),
                                         Scope::write);
              }).kind,
              ProblemKind::forbidden);
}

// The whole Api, routed, with a database that is never reached.
class ApiWithoutDatabase : public ::testing::Test {
  protected:
    static config::Config make_config(bool open_landing) {
        config::Config c;
        c.pg.dsn = "postgresql://nobody@127.0.0.1:1/none";
        c.http.open_landing_pages = open_landing;
        c.http.max_limit = 500;
        c.http.tokens = {{"dash", {"read", "read-token-0123456789"}},
                         {"ops", {"write", "write-token-0123456789"}}};
        return c;
    }
    static Request request(const std::string& method, const std::string& target,
                           const std::string& token = "read-token-0123456789") {
        const auto t = parse_target(target);
        Request r;
        r.method = method;
        r.path = t.path;
        r.segments = t.segments;
        r.query = t.query;
        r.host = "api.example:8080";
        if (!token.empty()) r.authorization = "Bearer " + token;
        return r;
    }
    // Status and the problem's `parameter` member ("" when absent).
    static std::pair<int, std::string> outcome(const Response& r) {
        simdjson::dom::parser parser;
        std::string parameter;
        if (r.content_type == "application/problem+json") {
            auto doc = parser.parse(r.body);
            std::string_view p;
            if (doc["parameter"].get(p) == simdjson::SUCCESS) parameter = std::string(p);
        }
        return {r.status, parameter};
    }

    Api api_{make_config(true), "127.0.0.1:8080"};
};

TEST_F(ApiWithoutDatabase, EachBadInputClassIs400NamingTheParameter) {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"/v1/vehicles?bbox=a,b,c,d", "bbox"},
        {"/v1/vehicles?bbox=0,0,1,95", "bbox"},
        {"/v1/vehicles?bbox=2,0,1,1", "bbox"},
        {"/v1/vehicles?limit=501", "limit"},
        {"/v1/vehicles?limit=0", "limit"},
        {"/v1/vehicles?updated_since=yesterday", "updated_since"},
        {"/v1/vehicles?colour=red", "colour"},
        {"/v1/vehicles/nearby?lon=13&lat=95&radius_m=10", "lat"},
        {"/v1/vehicles/nearby?lon=x&lat=52&radius_m=10", "lon"},
        {"/v1/vehicles/nearby?lon=13&lat=52", "radius_m"},
        {"/v1/vehicles/nearby?lon=13&lat=52&radius_m=-5", "radius_m"},
        {"/v1/vehicles/nearby?lon=13&lat=52&radius_m=1e7", "radius_m"},
        {"/v1/vehicles/bus-1/track?from=2026-13-01T00:00:00Z", "from"},
        {"/v1/vehicles/bus-1/track?from=2026-02-01T00:00:00Z&to=2026-01-01T00:00:00Z", "from"},
        {"/v1/vehicles/bus-1/track?format=gpx", "format"},
        {"/v1/geofences/depot/vehicles?state=nearby", "state"},
        {"/v1/geofences?limit=many", "limit"},
        {"/collections/positions/items?datetime=2026-01-01", "datetime"},
        {"/collections/vehicles/items?bbox=1,2,3,4,5", "bbox"},
        {"/collections/positions/items?after=garbage", "after"},
        {"/collections/positions/items?after=9223372036854775807_1_0_1", "after"},
        {"/collections/positions/items?after=0_1_99999999999_1", "after"},
    };
    for (const auto& [target, parameter] : cases) {
        EXPECT_EQ(outcome(api_.handle(request("GET", target))), std::make_pair(400, parameter))
            << target;
    }
}

// Requests are counted by route PATTERN, never by the raw path (bounded labels, no ids).
TEST_F(ApiWithoutDatabase, RequestMetricsUseRoutePatterns) {
    (void)api_.handle(request("GET", "/v1/vehicles/veh-unbounded-label-42"));
    (void)api_.handle(request("GET", "/no/such/place-unbounded-label"));
    (void)api_.handle(request("POST", "/v1/vehicles"));
    const auto text = core::metrics::registry().render();
    EXPECT_EQ(text.find("unbounded-label"), std::string::npos) << text;
    EXPECT_NE(text.find("trackd_http_requests_total{route=\"/v1/vehicles/{}\",method=\"GET\","),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("trackd_http_requests_total{route=\"unmatched\",method=\"other\","
                        "status=\"404\"}"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("trackd_http_requests_total{route=\"/v1/vehicles\",method=\"other\","
                        "status=\"405\"}"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("trackd_http_request_duration_seconds_count{route=\"/v1/vehicles/{}\"}"),
              std::string::npos)
        << text;
}

// /metrics answers without a token and while the database is down, saying so in trackd_ready.
TEST_F(ApiWithoutDatabase, MetricsAnswerWithoutTokenAndDatabase) {
    const auto r = api_.handle(request("GET", "/metrics", ""));
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.content_type, "text/plain; version=0.0.4; charset=utf-8");
    EXPECT_NE(r.body.find("\ntrackd_ready 0\n"), std::string::npos) << r.body;
    EXPECT_NE(r.body.find("# TYPE trackd_process_cpu_seconds_total counter"), std::string::npos);
    EXPECT_EQ(api_.handle(request("GET", "/metrics?x=1", "")).status, 400);
}

TEST_F(ApiWithoutDatabase, UnknownPathsMethodsAndAccess) {
    EXPECT_EQ(api_.handle(request("GET", "/v2/vehicles")).status, 404);
    EXPECT_EQ(api_.handle(request("GET", "/collections/cars")).status, 404);
    const auto r405 = api_.handle(request("POST", "/v1/vehicles"));
    EXPECT_EQ(r405.status, 405);
    ASSERT_EQ(r405.headers.size(), 1U);
    EXPECT_EQ(r405.headers[0], std::make_pair(std::string("Allow"), std::string("GET")));
    EXPECT_EQ(api_.handle(request("PATCH", "/v1/geofences/depot")).headers[0].second,
              "DELETE, GET, PUT");
    EXPECT_EQ(outcome(api_.handle(request("GET", "/v1/vehicles", ""))),
              std::make_pair(401, std::string("Authorization")));
    EXPECT_EQ(api_.handle(request("GET", "/v1/vehicles", "wrong-token-0123456789")).status, 401);
    EXPECT_EQ(api_.handle(request("DELETE", "/v1/geofences/depot")).status, 403);
    // Health and (here) landing pages need no token; a bad token does not break health.
    EXPECT_EQ(api_.handle(request("GET", "/healthz", "")).status, 200);
    EXPECT_EQ(api_.handle(request("GET", "/healthz", "stale-token-0123456789")).status, 200);
    EXPECT_EQ(api_.handle(request("GET", "/", "")).status, 200);
    EXPECT_EQ(api_.handle(request("GET", "/conformance", "")).status, 200);
    EXPECT_EQ(api_.handle(request("GET", "/collections", "")).status, 200);
    EXPECT_EQ(api_.handle(request("GET", "/api", "")).status, 200);

    Api closed(make_config(false), "127.0.0.1:8080");
    EXPECT_EQ(closed.handle(request("GET", "/", "")).status, 401);
    EXPECT_EQ(closed.handle(request("GET", "/", "read-token-0123456789")).status, 200);
}

TEST_F(ApiWithoutDatabase, GeofenceBodiesAreCheckedBeforeTheDatabase) {
    auto put = [&](const std::string& target, const std::string& body,
                   const std::string& content_type = "application/geo+json") {
        Request r = request("PUT", target, "write-token-0123456789");
        r.body = body;
        r.content_type = content_type;
        return api_.handle(r);
    };
    const std::string bowtie =
        R"({"type":"Polygon","coordinates":[[[0,0],[1,1],[1,0],[0,1],[0,0]]]})";
    EXPECT_EQ(outcome(put("/v1/geofences/z", bowtie, "text/plain")),
              std::make_pair(415, std::string("Content-Type")));
    EXPECT_EQ(outcome(put("/v1/geofences/z", bowtie)), std::make_pair(422, std::string("body")));
    EXPECT_EQ(outcome(put("/v1/geofences/z", "{not json")),
              std::make_pair(400, std::string("body")));
    EXPECT_EQ(outcome(put("/v1/geofences/z?repair=maybe", bowtie)),
              std::make_pair(400, std::string("repair")));
    EXPECT_EQ(outcome(put("/v1/geofences/%01", bowtie)),
              std::make_pair(400, std::string("zone_name")));
}

TEST_F(ApiWithoutDatabase, LandingPageLinksUseTheHostHeader) {
    const auto r = api_.handle(request("GET", "/"));
    EXPECT_EQ(r.content_type, "application/json");
    EXPECT_NE(r.body.find(R"("href":"http://api.example:8080/conformance","rel":"conformance")"),
              std::string::npos)
        << r.body;
    const auto api = api_.handle(request("GET", "/api"));
    EXPECT_EQ(api.content_type, "application/vnd.oai.openapi+json;version=3.0");
    simdjson::dom::parser parser;
    EXPECT_EQ(std::string_view(parser.parse(api.body)["openapi"]), "3.0.3");
}

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
