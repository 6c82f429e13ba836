// The whole Api, routed: access control, routing, metrics and parameter checks, through the
// real Api, whose pool never connects here because every request below is answered before any
// SQL would run.
#include "api.hpp"

#include <exception>
#include <optional>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>
#include <simdjson.h>

#include "trackd/config/config.hpp"
#include "trackd/core/metrics.hpp"

#include "request.hpp"

namespace trackd::http {
namespace {

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
    // The Api's answer: its coroutine, run to the end here.
    static Response handle(const Api& api, const Request& req) {
        boost::asio::io_context ioc;
        std::optional<Response> out;
        boost::asio::co_spawn(ioc, api.handle(req),
                              [&out](const std::exception_ptr& error, Response r) {
                                  if (error) std::rethrow_exception(error);
                                  out = std::move(r);
                              });
        ioc.run();
        return out.value();
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
        {"/tiles/vehicles/25/0/0.mvt", "z"},
        {"/tiles/vehicles/1/2/0.mvt", "x"},
        {"/tiles/vehicles/1/0/2.mvt", "y"},
        {"/tiles/vehicles/1/0/0.pbf", "y"},
        {"/tiles/vehicles/1/+1/0.mvt", "x"},
        {"/tiles/vehicles/99999999999/0/0.mvt", "z"},
        {"/tiles/positions/1/0/0.mvt?datetime=soon", "datetime"},
        {"/tiles/geofences/1/0/0.mvt?datetime=2026-01-01T00:00:00Z", "datetime"},
        {"/map/map.js?token=x", "token"},
    };
    for (const auto& [target, parameter] : cases) {
        EXPECT_EQ(outcome(handle(api_, request("GET", target))), std::make_pair(400, parameter))
            << target;
    }
}

// Requests are counted by route PATTERN, never by the raw path (bounded labels, no ids).
TEST_F(ApiWithoutDatabase, RequestMetricsUseRoutePatterns) {
    (void)handle(api_, request("GET", "/v1/vehicles/veh-unbounded-label-42"));
    (void)handle(api_, request("GET", "/no/such/place-unbounded-label"));
    (void)handle(api_, request("POST", "/v1/vehicles"));
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
    const auto r = handle(api_, request("GET", "/metrics", ""));
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.content_type, "text/plain; version=0.0.4; charset=utf-8");
    EXPECT_NE(r.body.find("\ntrackd_ready 0\n"), std::string::npos) << r.body;
    EXPECT_NE(r.body.find("# TYPE trackd_process_cpu_seconds_total counter"), std::string::npos);
    EXPECT_EQ(handle(api_, request("GET", "/metrics?x=1", "")).status, 400);
}

TEST_F(ApiWithoutDatabase, UnknownPathsMethodsAndAccess) {
    EXPECT_EQ(handle(api_, request("GET", "/v2/vehicles")).status, 404);
    EXPECT_EQ(handle(api_, request("GET", "/collections/cars")).status, 404);
    const auto r405 = handle(api_, request("POST", "/v1/vehicles"));
    EXPECT_EQ(r405.status, 405);
    ASSERT_EQ(r405.headers.size(), 1U);
    EXPECT_EQ(r405.headers[0], std::make_pair(std::string("Allow"), std::string("GET")));
    EXPECT_EQ(handle(api_, request("PATCH", "/v1/geofences/depot")).headers[0].second,
              "DELETE, GET, PUT");
    EXPECT_EQ(outcome(handle(api_, request("GET", "/v1/vehicles", ""))),
              std::make_pair(401, std::string("Authorization")));
    EXPECT_EQ(handle(api_, request("GET", "/v1/vehicles", "wrong-token-0123456789")).status, 401);
    EXPECT_EQ(handle(api_, request("DELETE", "/v1/geofences/depot")).status, 403);
    // Health and (here) landing pages need no token; a bad token does not break health.
    EXPECT_EQ(handle(api_, request("GET", "/healthz", "")).status, 200);
    EXPECT_EQ(handle(api_, request("GET", "/healthz", "stale-token-0123456789")).status, 200);
    EXPECT_EQ(handle(api_, request("GET", "/", "")).status, 200);
    EXPECT_EQ(handle(api_, request("GET", "/conformance", "")).status, 200);
    EXPECT_EQ(handle(api_, request("GET", "/collections", "")).status, 200);
    EXPECT_EQ(handle(api_, request("GET", "/api", "")).status, 200);
    // The map page and its files hold no data: open, and served without a database.
    EXPECT_EQ(handle(api_, request("GET", "/map", "")).status, 200);
    EXPECT_EQ(handle(api_, request("GET", "/map/maplibre-gl-worker.mjs?v=6.17.0", "")).status, 200);
    EXPECT_EQ(handle(api_, request("GET", "/tiles/vehicles/0/0/0.mvt", "")).status, 401);

    Api closed(make_config(false), "127.0.0.1:8080");
    EXPECT_EQ(handle(closed, request("GET", "/", "")).status, 401);
    EXPECT_EQ(handle(closed, request("GET", "/", "read-token-0123456789")).status, 200);
    EXPECT_EQ(handle(closed, request("GET", "/tiles/vehicles", "")).status, 401);
    EXPECT_EQ(handle(closed, request("GET", "/map", "")).status, 200);
}

TEST_F(ApiWithoutDatabase, GeofenceBodiesAreCheckedBeforeTheDatabase) {
    auto put = [&](const std::string& target, const std::string& body,
                   const std::string& content_type = "application/geo+json") {
        Request r = request("PUT", target, "write-token-0123456789");
        r.body = body;
        r.content_type = content_type;
        return handle(api_, r);
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
    const auto r = handle(api_, request("GET", "/"));
    EXPECT_EQ(r.content_type, "application/json");
    EXPECT_NE(r.body.find(R"("href":"http://api.example:8080/conformance","rel":"conformance")"),
              std::string::npos)
        << r.body;
    const auto api = handle(api_, request("GET", "/api"));
    EXPECT_EQ(api.content_type, "application/vnd.oai.openapi+json;version=3.0");
    simdjson::dom::parser parser;
    EXPECT_EQ(std::string_view(parser.parse(api.body)["openapi"]), "3.0.3");
}

}  // namespace
}  // namespace trackd::http
