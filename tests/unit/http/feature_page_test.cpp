// The paged FeatureCollection every list endpoint answers: one row more than the page says there
// is a next page, whose link carries the last row's cursor in `after`.
#include "feature_page.hpp"

#include <string>

#include <gtest/gtest.h>

#include "json_writer.hpp"
#include "request.hpp"

namespace trackd::http {
namespace {

Request get(const std::string& target) {
    const auto t = parse_target(target);
    Request r;
    r.method = "GET";
    r.path = t.path;
    r.segments = t.segments;
    r.query = t.query;
    r.host = "api.example:8080";
    return r;
}

void write_row(JsonWriter& w, int row) { w.begin_object().key("id").value(row).end_object(); }

std::string cursor(int row) { return "c" + std::to_string(row); }

TEST(FeaturePage, OneRowMoreThanThePageGivesANextLinkFromTheLastRowShown) {
    const Request req = get("/v1/vehicles?limit=2&after=c9&bbox=1,2,3,4");
    const FeaturePage page(req, "127.0.0.1:8080", 2);
    EXPECT_EQ(page.fetch_limit(), "3");
    const Response r = page.respond(3, write_row, cursor);
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.content_type, "application/geo+json");
    EXPECT_EQ(
        r.body,
        R"({"type":"FeatureCollection","features":[{"id":0},{"id":1}],"numberReturned":2,)"
        R"("links":[{"href":"http://api.example:8080/v1/vehicles?limit=2&after=c9&bbox=1%2C2%2C3%2C4",)"
        R"("rel":"self","type":"application/geo+json"},)"
        R"({"href":"http://api.example:8080/v1/vehicles?limit=2&bbox=1%2C2%2C3%2C4&after=c1",)"
        R"("rel":"next","type":"application/geo+json"}]})");
}

TEST(FeaturePage, AFullPageWithoutTheExtraRowIsTheLast) {
    const Request req = get("/v1/geofences?limit=2");
    const FeaturePage page(req, "127.0.0.1:8080", 2);
    const Response r = page.respond(2, write_row, cursor);
    EXPECT_EQ(r.body.find(R"("rel":"next")"), std::string::npos) << r.body;
    EXPECT_NE(r.body.find(R"("numberReturned":2,)"), std::string::npos) << r.body;
    EXPECT_NE(page.respond(0, write_row, cursor).body.find(R"("features":[],"numberReturned":0,)"),
              std::string::npos);
}

TEST(FeaturePage, OgcMembersAndLinksGoWhereTheStandardPutsThem) {
    Request req = get("/collections/vehicles/items?limit=1");
    req.host = "bad host";  // not plausible: links use the listen address
    FeaturePage page(req, "127.0.0.1:8080", 1);
    page.set_number_matched("7");
    page.set_time_stamp("2026-01-01T00:00:00Z");
    page.add_link("collection", "application/json", "http://127.0.0.1:8080/collections/vehicles");
    EXPECT_EQ(page.respond(2, write_row, cursor).body,
              R"({"type":"FeatureCollection","features":[{"id":0}],"numberMatched":7,)"
              R"("numberReturned":1,"timeStamp":"2026-01-01T00:00:00Z","links":[)"
              R"({"href":"http://127.0.0.1:8080/collections/vehicles/items?limit=1",)"
              R"("rel":"self","type":"application/geo+json"},)"
              R"({"href":"http://127.0.0.1:8080/collections/vehicles/items?limit=1&after=c0",)"
              R"("rel":"next","type":"application/geo+json"},)"
              R"({"href":"http://127.0.0.1:8080/collections/vehicles",)"
              R"("rel":"collection","type":"application/json"}]})");
}

}  // namespace
}  // namespace trackd::http
