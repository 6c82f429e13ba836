// The HTTP API against the real local PostgreSQL/PostGIS, with fixed fixture data
// (support/http_fixture.hpp): exact vehicle sets, distances against PostGIS, paging, geofence
// writes, OGC API - Features, errors, limits, timeouts and access control.
#include <algorithm>
#include <cmath>
#include <future>
#include <set>
#include <thread>

#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "support/child_process.hpp"
#include "support/held_lookup.hpp"
#include "support/http_fixture.hpp"
#include "support/process.hpp"
#include "support/services.hpp"
#include "support/tcp_relay.hpp"

namespace trackd::test {
namespace {

std::vector<std::string> ids(simdjson::dom::element fc) {
    std::vector<std::string> out;
    for (auto f : fc["features"].get_array()) out.push_back(str(f["id"]));
    return out;
}

// Follows `next` links from `first`, returning every id in order and checking each page.
std::vector<std::string> all_pages(const HttpClient& client, const std::string& first,
                                   std::size_t page_size) {
    std::vector<std::string> out;
    std::string target = first;
    for (int pages = 0; !target.empty(); ++pages) {
        EXPECT_LT(pages, 1000) << "paging does not end";
        const auto r = client.get(target);
        EXPECT_EQ(r.status, 200) << target << " " << r.body;
        if (r.status != 200) break;
        const auto doc = r.json();
        const auto page = ids(doc);
        EXPECT_LE(page.size(), page_size);
        EXPECT_EQ(static_cast<std::size_t>(int64_t(doc["numberReturned"])), page.size());
        out.insert(out.end(), page.begin(), page.end());
        const auto next = link(doc, "next");
        target = next.empty() ? "" : path_of(next);
    }
    return out;
}

// Status and the problem's `parameter`.
std::pair<int, std::string> outcome(const HttpResponse& r) {
    std::string parameter;
    if (r.header("content-type") == "application/problem+json") {
        std::string_view p;
        if (r.json()["parameter"].get(p) == simdjson::SUCCESS) parameter = std::string(p);
        EXPECT_EQ(int64_t(r.json()["status"]), r.status);
    }
    return {r.status, parameter};
}

std::string file_text(const std::string& path) {
    const auto r = run_command("cat " + shell_quote(path));
    return r.output;
}

class HttpApi : public HttpFixture {
  protected:
    // The server again, reaching PostgreSQL through `relay`, with one I/O thread, `pool_size`
    // connections and limits of 30 s, so that requests on a frozen database keep waiting; then
    // one request, which opens the pool's first connection.
    void start_waiting_on(const TcpRelay& relay, int pool_size, bool metrics_listen,
                          const std::function<void(config::Config&)>& adjust = {}) {
        server_.reset();
        start([&](config::Config& c) {
            if (adjust) adjust(c);
            c.pg.dsn = relay.through(db_.dsn());
            c.pg.connect_timeout_s = 30;
            c.http.statement_timeout_ms = 30000;
            c.http.threads = 1;
            c.http.pool_size = pool_size;
            if (metrics_listen) c.metrics.listen = "127.0.0.1:0";
        });
        ASSERT_EQ(read_->get("/v1/vehicles/in-1").status, 200);
    }

    // Counts from now on how often each statement of the API's one connection is run and
    // planned (pg_stat_statements with track_planning); false when the server has no
    // pg_stat_statements (scripts/pg.sh loads it).
    bool count_plans() {
        const auto preload = sql("SHOW shared_preload_libraries").at(0, 0);
        if (preload.find("pg_stat_statements") == std::string::npos) return false;
        sql("CREATE EXTENSION IF NOT EXISTS pg_stat_statements");
        sql("ALTER DATABASE " + db_.name() + " SET pg_stat_statements.track_planning = on");
        // One connection, opened after the setting; the counts start now.
        server_.reset();
        start([](config::Config& c) { c.http.pool_size = 1; });
        sql("SELECT pg_stat_statements_reset(0, (SELECT oid FROM pg_database WHERE datname = "
            "current_database()), 0)");
        return true;
    }

    // {calls, plans} of the statements whose text is LIKE `like`, since count_plans().
    std::pair<int, int> calls_and_plans(const std::string& like) {
        const auto r =
            sql("SELECT coalesce(sum(calls), 0)::text, coalesce(sum(plans), 0)::text FROM "
                "pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid "
                "WHERE d.datname = $1 AND s.query LIKE $2",
                {db_.name(), like});
        return {std::stoi(r.at(0, 0)), std::stoi(r.at(0, 1))};
    }
};

TEST_F(HttpApi, VehicleById) {
    const auto r = read_->get("/v1/vehicles/in-1");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.header("content-type"), "application/geo+json");
    const auto f = r.json();
    EXPECT_EQ(str(f["type"]), "Feature");
    EXPECT_EQ(str(f["id"]), "in-1");
    EXPECT_EQ(str(f["geometry"]["type"]), "Point");
    EXPECT_DOUBLE_EQ(double(f["geometry"]["coordinates"].at(0)), 13.05);
    EXPECT_DOUBLE_EQ(double(f["geometry"]["coordinates"].at(1)), 52.05);
    EXPECT_EQ(str(f["properties"]["last_updated"]), "2025-06-01T10:05:00Z");
    EXPECT_DOUBLE_EQ(double(f["properties"]["speed_kmh"]), 42.5);
    EXPECT_DOUBLE_EQ(double(f["properties"]["altitude_m"]), 35);
    EXPECT_EQ(str(f["properties"]["attributes"]["fleet"]), "north");

    const auto missing = read_->get("/v1/vehicles/nobody");
    EXPECT_EQ(outcome(missing), std::make_pair(404, std::string("vehicle_id")));
    EXPECT_EQ(missing.header("content-type"), "application/problem+json");
}

// Feature values are read in PostgreSQL's binary format and printed by trackd: each must be the
// text PostgreSQL itself prints for it (shortest exact floats, real columns as reals, a
// microsecond timestamp, NULL as null), on the fleet endpoint and on OGC positions alike.
TEST_F(HttpApi, FeatureValuesAreTheTextPostgresqlPrintsForThem) {
    sql("INSERT INTO trackd.vehicle_current_state (vehicle_id, last_updated, geom, speed_kmh, "
        "heading_deg, accuracy_m, attributes, ingest_batch_id, kafka_partition, kafka_offset) "
        "VALUES ('digits', '2025-06-01T10:05:00.123456Z', "
        "ST_SetSRID(ST_MakePoint(13.404954, -52.520008, 1e-05), 4326), NULL, 12.3, 0.1, "
        "'{\"a\": [1, \"\\u00e9\"]}', 7, 3, 9000000000)");
    sql("INSERT INTO trackd.vehicle_telemetry_history SELECT vehicle_id, last_updated, geom, "
        "speed_kmh, heading_deg, accuracy_m, attributes, ingest_batch_id, kafka_partition, "
        "kafka_offset FROM trackd.vehicle_current_state WHERE vehicle_id = 'digits'");
    const auto pg =
        sql("SELECT ST_X(geom)::text, ST_Y(geom)::text, ST_Z(geom)::text, heading_deg::text, "
            "accuracy_m::text, attributes::text FROM trackd.vehicle_current_state "
            "WHERE vehicle_id = 'digits'");
    const std::string want_geometry =
        R"("geometry":{"type":"Point","coordinates":[)" + pg.at(0, 0) + "," + pg.at(0, 1) + "]}";
    const std::string want_values =
        R"("altitude_m":)" + pg.at(0, 2) + R"(,"speed_kmh":null,"heading_deg":)" + pg.at(0, 3) +
        R"(,"accuracy_m":)" + pg.at(0, 4) + R"(,"attributes":)" + pg.at(0, 5);
    EXPECT_EQ(pg.at(0, 3), "12.3");
    EXPECT_EQ(pg.at(0, 2), "1e-05");

    const auto vehicle = read_->get("/v1/vehicles/digits");
    ASSERT_EQ(vehicle.status, 200) << vehicle.body;
    EXPECT_NE(vehicle.body.find(want_geometry), std::string::npos) << vehicle.body;
    EXPECT_NE(vehicle.body.find(R"("last_updated":"2025-06-01T10:05:00.123456Z",)" + want_values),
              std::string::npos)
        << vehicle.body;

    const auto position = read_->get("/collections/positions/items/7-3-9000000000");
    ASSERT_EQ(position.status, 200) << position.body;
    EXPECT_NE(position.body.find(R"("id":"7-3-9000000000")"), std::string::npos) << position.body;
    EXPECT_NE(position.body.find(want_geometry), std::string::npos) << position.body;
    EXPECT_NE(position.body.find(R"("recorded_at":"2025-06-01T10:05:00.123456Z",)" + want_values +
                                 R"(,"ingest_batch_id":7,"kafka_partition":3,)"
                                 R"("kafka_offset":9000000000})"),
              std::string::npos)
        << position.body;
}

TEST_F(HttpApi, BBoxAndUpdatedSince) {
    auto r = read_->get("/v1/vehicles?bbox=12.95,51.95,13.15,52.15");
    ASSERT_EQ(r.status, 200) << r.body;
    // Points on the box's edge are in the box.
    EXPECT_EQ(ids(r.json()), (std::vector<std::string>{"edge", "in-1", "in-2"}));
    r = read_->get("/v1/vehicles?bbox=12.95,51.95,13.15,52.15&updated_since=2025-06-01T10:00:00Z");
    EXPECT_EQ(ids(r.json()), (std::vector<std::string>{"in-1", "in-2"}));
    r = read_->get(
        "/v1/vehicles?bbox=12.95,51.95,13.15,52.15&updated_since=2025-06-01T11:00:00%2B01:00");
    EXPECT_EQ(ids(r.json()), (std::vector<std::string>{"in-1", "in-2"}));
}

TEST_F(HttpApi, PagingReturnsEveryVehicleExactlyOnce) {
    auto expected_rows =
        sql("SELECT vehicle_id FROM trackd.vehicle_current_state ORDER BY vehicle_id");
    std::vector<std::string> expected;
    for (int i = 0; i < expected_rows.rows(); ++i) expected.push_back(expected_rows.at(i, 0));
    ASSERT_EQ(expected.size(), 46U);
    for (const std::size_t size : {1U, 4U, 7U, 46U, 100U}) {
        EXPECT_EQ(all_pages(*read_, "/v1/vehicles?limit=" + std::to_string(size), size), expected)
            << "page size " << size;
    }
    // With a bbox (the p-* row only) the next links keep the filter.
    const auto row = all_pages(*read_, "/v1/vehicles?bbox=9.99,49.99,10.5,50.01&limit=5", 5);
    ASSERT_EQ(row.size(), 37U);
    EXPECT_EQ(row.front(), "p-00");
    EXPECT_EQ(row.back(), "p-36");
}

// Each limit is its own prepared statement (a constant LIMIT keeps PostgreSQL's generic plan);
// one after the other the requests use one pooled connection, so 300 limits cross the bound of
// 256 a connection keeps, and every answer after it is still exact.
TEST_F(HttpApi, EveryLimitAnswersExactlyPastThePreparedStatementBound) {
    for (int limit = 1; limit <= 300; ++limit) {
        const auto r = read_->get("/v1/vehicles?limit=" + std::to_string(limit));
        ASSERT_EQ(r.status, 200) << "limit " << limit << ": " << r.body;
        const auto page = ids(r.json());
        ASSERT_EQ(page.size(), static_cast<std::size_t>(std::min(limit, 46))) << "limit " << limit;
        EXPECT_EQ(page.front(), "edge");
        EXPECT_EQ(link(r.json(), "next").empty(), limit >= 46) << "limit " << limit;
        // "square" covers edge, in-1 and in-2; the other 43 are outside it.
        const auto inside =
            read_->get("/v1/geofences/square/vehicles?limit=" + std::to_string(limit));
        ASSERT_EQ(inside.status, 200) << "limit " << limit << ": " << inside.body;
        EXPECT_EQ(ids(inside.json()).size(), static_cast<std::size_t>(std::min(limit, 3)));
        const auto outside = read_->get("/v1/geofences/square/vehicles?state=outside&limit=" +
                                        std::to_string(limit));
        ASSERT_EQ(outside.status, 200) << "limit " << limit << ": " << outside.body;
        EXPECT_EQ(ids(outside.json()).size(), static_cast<std::size_t>(std::min(limit, 43)));
    }
}

TEST_F(HttpApi, NearbyIsOrderedAndMatchesPostgisDistances) {
    const double lon = 13.04;
    const double lat = 52.06;
    const auto r = read_->get("/v1/vehicles/nearby?lon=13.04&lat=52.06&radius_m=20000&limit=50");
    ASSERT_EQ(r.status, 200) << r.body;
    const auto expected = sql(
        "SELECT vehicle_id, ST_Distance(geom::geography, ST_SetSRID(ST_MakePoint($1, $2), "
        "4326)::geography) d FROM trackd.vehicle_current_state WHERE ST_Distance(geom::geography, "
        "ST_SetSRID(ST_MakePoint($1, $2), 4326)::geography) <= 20000 ORDER BY d",
        {std::to_string(lon), std::to_string(lat)});
    const auto features = r.json()["features"].get_array();
    ASSERT_EQ(static_cast<int>(features.size()), expected.rows());
    // out-2 is 20235 m away: just beyond the radius.
    ASSERT_EQ(expected.rows(), 4);
    EXPECT_EQ(ids(r.json()), (std::vector<std::string>{"in-1", "in-2", "edge", "out-1"}));
    double previous = -1;
    int i = 0;
    for (auto f : features) {
        const double d = f["properties"]["distance_m"];
        EXPECT_EQ(str(f["id"]), expected.at(i, 0));
        EXPECT_NEAR(d, std::stod(expected.at(i, 1)), 0.5) << str(f["id"]);
        EXPECT_GE(d, previous);
        previous = d;
        ++i;
    }
    // The radius bounds the answer; limit keeps the nearest.
    const auto two = read_->get("/v1/vehicles/nearby?lon=13.04&lat=52.06&radius_m=20000&limit=2");
    EXPECT_EQ(ids(two.json()), (std::vector<std::string>{expected.at(0, 0), expected.at(1, 0)}));
    const auto none = read_->get("/v1/vehicles/nearby?lon=0&lat=0&radius_m=1000");
    EXPECT_EQ(ids(none.json()).size(), 0U);
}

// The nearby search finds its candidates through a longitude/latitude box around the radius:
// across the antimeridian, near a pole and at the largest radius it must still find exactly
// the vehicles PostGIS finds within the geodesic radius.
TEST_F(HttpApi, NearbyAcrossTheAntimeridianAndNearThePoles) {
    sql("INSERT INTO trackd.vehicle_current_state (vehicle_id, last_updated, geom, "
        "ingest_batch_id, kafka_partition, kafka_offset) "
        "SELECT id, '2025-06-01T10:00:00Z', ST_SetSRID(ST_MakePoint(lon, lat, 0), 4326), 1, 2, n "
        "FROM (VALUES ('am-east', 179.99, -16.5, 1), ('am-west', -179.99, -16.5, 2), "
        "('am-far', -179.5, -16.5, 3), ('pole-a', 0.0, 89.95, 4), ('pole-b', 180.0, 89.95, 5), "
        "('pole-c', 90.0, 89.5, 6), ('wide', 13.04 + 9.0, 52.06, 7)) AS v(id, lon, lat, n)");
    struct Case {
        double lon, lat, radius_m;
    };
    for (const Case c :
         {Case{179.995, -16.5, 5000}, Case{-179.995, -16.5, 60000}, Case{45.0, 89.9, 30000},
          Case{-120.0, 89.0, 200000}, Case{13.04, 52.06, 1000000}, Case{179.9, -10.0, 1000000}}) {
        const auto target = fmt::format("/v1/vehicles/nearby?lon={}&lat={}&radius_m={}&limit=1000",
                                        c.lon, c.lat, c.radius_m);
        const auto r = read_->get(target);
        ASSERT_EQ(r.status, 200) << target << " " << r.body;
        const auto expected = sql(
            "SELECT vehicle_id FROM trackd.vehicle_current_state WHERE "
            "ST_Distance(geom::geography, ST_SetSRID(ST_MakePoint($1, $2), 4326)::geography) "
            "<= $3 ORDER BY ST_Distance(geom::geography, ST_SetSRID(ST_MakePoint($1, $2), "
            "4326)::geography), vehicle_id",
            {fmt::format("{}", c.lon), fmt::format("{}", c.lat), fmt::format("{}", c.radius_m)});
        std::vector<std::string> want;
        for (int i = 0; i < expected.rows(); ++i) want.push_back(expected.at(i, 0));
        EXPECT_FALSE(want.empty()) << target;
        EXPECT_EQ(ids(r.json()), want) << target;
    }
}

TEST_F(HttpApi, TrackLineMatchesPostgisLength) {
    const auto r =
        read_->get("/v1/vehicles/in-1/track?from=2025-06-01T10:00:00Z&to=2025-06-01T10:05:00Z");
    ASSERT_EQ(r.status, 200) << r.body;
    const auto f = r.json();
    EXPECT_EQ(str(f["geometry"]["type"]), "LineString");
    EXPECT_EQ(f["geometry"]["coordinates"].get_array().size(), 6U);
    EXPECT_DOUBLE_EQ(double(f["geometry"]["coordinates"].at(0).at(0)), 13.0);
    EXPECT_DOUBLE_EQ(double(f["geometry"]["coordinates"].at(5).at(0)), 13.05);
    EXPECT_EQ(int64_t(f["properties"]["points"]), 6);
    EXPECT_EQ(str(f["properties"]["first_at"]), "2025-06-01T10:00:00Z");
    EXPECT_EQ(str(f["properties"]["last_at"]), "2025-06-01T10:05:00Z");
    EXPECT_FALSE(bool(f["properties"]["truncated"]));
    const double expected = std::stod(
        sql("SELECT ST_Length(ST_MakeLine(geom ORDER BY recorded_at)::geography) FROM "
            "trackd.vehicle_telemetry_history WHERE vehicle_id = 'in-1' AND recorded_at BETWEEN "
            "'2025-06-01T10:00:00Z' AND '2025-06-01T10:05:00Z'")
            .at(0, 0));
    ASSERT_GT(expected, 3000);
    EXPECT_NEAR(double(f["properties"]["distance_m"]), expected, 0.5);

    // Points: time order, per-step geodesic distances that add up to the same length.
    const auto p = read_->get(
        "/v1/vehicles/in-1/track?from=2025-06-01T10:00:00Z&to=2025-06-01T10:05:00Z&format=points");
    ASSERT_EQ(p.status, 200) << p.body;
    double sum = 0;
    std::string previous;
    int n = 0;
    for (auto pt : p.json()["features"].get_array()) {
        const auto at = str(pt["properties"]["recorded_at"]);
        EXPECT_GT(at, previous);
        previous = at;
        sum += double(pt["properties"]["step_distance_m"]);
        if (n == 0) {
            EXPECT_EQ(double(pt["properties"]["step_distance_m"]), 0.0);
        }
        ++n;
    }
    EXPECT_EQ(n, 6);
    EXPECT_NEAR(sum, expected, 0.5);

    // limit cuts the track and says so.
    const auto cut = read_->get(
        "/v1/vehicles/in-1/track?from=2025-06-01T10:00:00Z&to=2025-06-01T10:05:00Z&limit=3");
    EXPECT_EQ(int64_t(cut.json()["properties"]["points"]), 3);
    EXPECT_TRUE(bool(cut.json()["properties"]["truncated"]));

    // One position: a Point; none: null geometry; an unknown vehicle: 404.
    const auto one =
        read_->get("/v1/vehicles/out-1/track?from=2025-06-01T00:00:00Z&to=2025-06-02T00:00:00Z");
    EXPECT_EQ(str(one.json()["geometry"]["type"]), "Point");
    EXPECT_EQ(double(one.json()["properties"]["distance_m"]), 0.0);
    const auto empty =
        read_->get("/v1/vehicles/out-1/track?from=2024-06-01T00:00:00Z&to=2024-06-02T00:00:00Z");
    ASSERT_EQ(empty.status, 200);
    EXPECT_TRUE(empty.json()["geometry"].is_null());
    EXPECT_EQ(int64_t(empty.json()["properties"]["points"]), 0);
    // A window at the start of year 1: nothing there, and no date PostgreSQL cannot read.
    EXPECT_EQ(int64_t(read_->get("/v1/vehicles/in-1/track?to=0001-01-01T10:00:00Z")
                          .json()["properties"]["points"]),
              0);
    EXPECT_EQ(outcome(read_->get("/v1/vehicles/ghost/track")),
              std::make_pair(404, std::string("vehicle_id")));
}

// A cut track goes on through its `next` link after the page's last position: every position
// once, in order, also where several were recorded at the same instant (ties by ingest order).
TEST_F(HttpApi, ACutTrackIsPagedThroughItsNextLinkWithoutRepeatsOrGaps) {
    sql("INSERT INTO trackd.vehicle_telemetry_history (vehicle_id, recorded_at, geom, "
        "ingest_batch_id, kafka_partition, kafka_offset) VALUES "
        "('in-1', '2025-06-01T10:02:00Z', ST_SetSRID(ST_MakePoint(13.5, 52.5, 0), 4326), 9, 1, "
        "301),"
        "('in-1', '2025-06-01T10:02:00Z', ST_SetSRID(ST_MakePoint(13.4, 52.4, 0), 4326), 9, 0, "
        "300)");
    const std::vector<double> expected = {13.0, 13.01, 13.02, 13.4, 13.5, 13.03, 13.04, 13.05};
    const std::string window =
        "/v1/vehicles/in-1/track?from=2025-06-01T10:00:00Z"
        "&to=2025-06-01T10:05:00Z";
    for (const int limit : {1, 3}) {
        for (const bool points : {false, true}) {
            std::vector<double> lons;
            std::string target =
                window + "&limit=" + std::to_string(limit) + (points ? "&format=points" : "");
            for (int pages = 0; !target.empty() && pages < 20; ++pages) {
                const auto r = read_->get(target);
                ASSERT_EQ(r.status, 200) << target << " " << r.body;
                const auto doc = r.json();
                if (points) {
                    for (auto f : doc["features"].get_array()) {
                        lons.push_back(double(f["geometry"]["coordinates"].at(0)));
                    }
                } else if (str(doc["geometry"]["type"]) == "Point") {
                    lons.push_back(double(doc["geometry"]["coordinates"].at(0)));
                } else {
                    for (auto c : doc["geometry"]["coordinates"].get_array()) {
                        lons.push_back(double(c.at(0)));
                    }
                }
                const bool truncated =
                    bool(points ? doc["truncated"] : doc["properties"]["truncated"]);
                const auto next = link(doc, "next");
                EXPECT_EQ(next.empty(), !truncated) << target;
                target = next.empty() ? "" : path_of(next);
            }
            EXPECT_EQ(target, "") << "paging does not end";
            ASSERT_EQ(lons.size(), expected.size()) << "limit " << limit << " points " << points;
            for (std::size_t i = 0; i < expected.size(); ++i) {
                EXPECT_DOUBLE_EQ(lons[i], expected[i]) << i << " limit " << limit;
            }
        }
    }
    // A cursor that no next link gives is a 400 naming it.
    for (const char* bad :
         {"x", "1_2_3", "1_2_3_4_5", "1_2_9999999999_4", "-99999999999999999_1_1_1"}) {
        EXPECT_EQ(outcome(read_->get(window + "&after=" + bad)),
                  std::make_pair(400, std::string("after")))
            << bad;
    }
}

TEST_F(HttpApi, GeofenceInsideAndOutsideExactly) {
    auto r = read_->get("/v1/geofences/square/vehicles?state=inside");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(ids(r.json()), (std::vector<std::string>{"edge", "in-1", "in-2"}));
    r = read_->get("/v1/geofences/square/vehicles");  // inside is the default
    EXPECT_EQ(ids(r.json()), (std::vector<std::string>{"edge", "in-1", "in-2"}));

    r = read_->get("/v1/geofences/donut/vehicles?state=inside");
    EXPECT_EQ(ids(r.json()), (std::vector<std::string>{"hole-edge", "partb", "ring"}));

    // Outside: everyone else, each with the geodesic distance to the zone as PostGIS measures it.
    r = read_->get("/v1/geofences/donut/vehicles?state=outside&limit=1000");
    ASSERT_EQ(r.status, 200) << r.body;
    const auto expected =
        sql("SELECT v.vehicle_id, ST_Distance(z.fence_geom::geography, v.geom::geography) FROM "
            "trackd.vehicle_current_state v, trackd.geofence_zones z WHERE z.zone_name = 'donut' "
            "AND v.vehicle_id NOT IN ('hole-edge', 'partb', 'ring') ORDER BY v.vehicle_id");
    const auto features = r.json()["features"].get_array();
    ASSERT_EQ(static_cast<int>(features.size()), expected.rows());
    int i = 0;
    for (auto f : features) {
        EXPECT_EQ(str(f["id"]), expected.at(i, 0));
        const double m = f["properties"]["meters_outside"];
        EXPECT_NEAR(m, std::stod(expected.at(i, 1)), 0.5) << expected.at(i, 0);
        EXPECT_GT(m, 0);
        if (expected.at(i, 0) == "hole") {
            EXPECT_NEAR(m, 3424, 200);  // to the hole's nearest edge, 0.05° of longitude
        }
        ++i;
    }
    // Paging outside returns each vehicle once.
    const auto paged = all_pages(*read_, "/v1/geofences/donut/vehicles?state=outside&limit=6", 6);
    EXPECT_EQ(paged.size(), static_cast<std::size_t>(expected.rows()));
    EXPECT_EQ(std::set<std::string>(paged.begin(), paged.end()).size(), paged.size());

    EXPECT_EQ(outcome(read_->get("/v1/geofences/nowhere/vehicles")),
              std::make_pair(404, std::string("zone_name")));
    EXPECT_EQ(outcome(read_->get("/v1/geofences/square/vehicles?state=near")),
              std::make_pair(400, std::string("state")));
}

// A zone over most of the fleet, with a hole whose edge holds a vehicle: every page size returns
// exactly the vehicles PostGIS says the zone covers, each once, in order. The zone holds more
// than sqrt(page * max(fleet, 10,000)) vehicles for pages of 1 (142), which walk the primary
// key, and fewer for pages of 7 (283), which read the zone's cells.
TEST_F(HttpApi, VehiclesInsideAGeofenceHoldingMuchOfTheFleetArePagedExactly) {
    sql("INSERT INTO trackd.vehicle_current_state (vehicle_id, last_updated, geom, speed_kmh, "
        "heading_deg, accuracy_m, attributes, ingest_batch_id, kafka_partition, kafka_offset) "
        "SELECT 'many-' || lpad(i::text, 3, '0'), '2025-06-01T10:00:00Z', "
        "ST_SetSRID(ST_MakePoint(10.5 + i * 0.01, 50.5 + (i % 7) * 0.1, 0), 4326), 1, 2, 3, "
        "NULL, 1, 0, i FROM generate_series(1, 150) i");
    // The fixture's region with a hole, whose edge holds one of the new vehicles.
    sql("INSERT INTO trackd.geofence_zones (zone_name, fence_geom) VALUES ('fleet', "
        "ST_Multi(ST_GeomFromText('POLYGON((9 49, 15 49, 15 53, 9 53, 9 49), (11 50.55, 11.3 "
        "50.55, 11.3 50.65, 11 50.65, 11 50.55))', 4326)))");
    const auto truth =
        sql("SELECT v.vehicle_id FROM trackd.vehicle_current_state v, trackd.geofence_zones z "
            "WHERE z.zone_name = 'fleet' AND ST_Covers(z.fence_geom, v.geom) ORDER BY 1");
    std::vector<std::string> expected;
    for (int i = 0; i < truth.rows(); ++i) expected.push_back(truth.at(i, 0));
    ASSERT_GT(expected.size(), 150U);
    const auto has = [&](const char* id) {
        return std::find(expected.begin(), expected.end(), id) != expected.end();
    };
    EXPECT_TRUE(has("many-050"));   // (11.0, 50.6): on the hole's edge
    EXPECT_FALSE(has("many-057"));  // (11.07, 50.6): in the hole
    ASSERT_LT(expected.size(), 283U);

    // Which way a page was found, from the index scans counted: a backend reports its counts
    // when it exits (when idle, only 10 s after its last report), so every count is read once
    // the server has stopped and its connections are gone from pg_stat_activity (a backend
    // reports before it leaves it), and this test's own connection has reported (its queries
    // above may have read the key).
    const auto scans = [&](const char* index) {
        return std::stoll(
            sql("SELECT idx_scan::text FROM pg_stat_user_indexes WHERE indexrelname = $1", {index})
                .at(0, 0));
    };
    const auto settled = [&] {
        server_.reset();
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (sql("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                   "AND backend_type = 'client backend' AND pid <> pg_backend_pid()")
                       .at(0, 0) != "0" &&
               std::chrono::steady_clock::now() < until) {
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        sql("SELECT pg_stat_force_next_flush()");
        start();
    };
    const auto after_request = [&](const std::string& target) {
        const auto r = read_->get(target);
        EXPECT_EQ(r.status, 200) << r.body;
        settled();
    };
    const char* key = "vehicle_current_state_pkey";
    const char* cells = "vehicle_current_state_cell_corner_spgist";
    settled();
    auto key0 = scans(key);
    const auto cells0 = scans(cells);
    after_request("/v1/geofences/fleet/vehicles?limit=7");
    EXPECT_GT(scans(cells), cells0);
    EXPECT_EQ(scans(key), key0) << "a page of 7 walked the primary key";
    key0 = scans(key);
    after_request("/v1/geofences/fleet/vehicles?limit=1");
    EXPECT_EQ(scans(key), key0 + 1) << "a page of 1 did not walk the primary key";

    EXPECT_EQ(all_pages(*read_, "/v1/geofences/fleet/vehicles?limit=1", 1), expected);
    EXPECT_EQ(all_pages(*read_, "/v1/geofences/fleet/vehicles?limit=7", 7), expected);
    EXPECT_EQ(all_pages(*read_, "/v1/geofences/fleet/vehicles?limit=1000", 1000), expected);
    // Outside: everyone else, paged the same way.
    const auto others =
        sql("SELECT v.vehicle_id FROM trackd.vehicle_current_state v, trackd.geofence_zones z "
            "WHERE z.zone_name = 'fleet' AND NOT ST_Covers(z.fence_geom, v.geom) ORDER BY 1");
    std::vector<std::string> outside;
    for (int i = 0; i < others.rows(); ++i) outside.push_back(others.at(i, 0));
    // The four in the hole.
    ASSERT_EQ(outside, (std::vector<std::string>{"many-057", "many-064", "many-071", "many-078"}));
    EXPECT_EQ(all_pages(*read_, "/v1/geofences/fleet/vehicles?state=outside&limit=2", 2), outside);
}

TEST_F(HttpApi, GeofenceWriteReadDelete) {
    const std::string depot =
        R"({"type":"Feature","properties":{},"geometry":{"type":"Polygon","coordinates":)"
        R"([[[13.01,52.01],[13.06,52.01],[13.06,52.06],[13.01,52.06],[13.01,52.01]]]}})";
    auto r = write_->request("PUT", "/v1/geofences/depot%201", depot, "application/geo+json");
    ASSERT_EQ(r.status, 201) << r.body;
    EXPECT_EQ(r.header("location"), "/v1/geofences/depot%201");
    EXPECT_EQ(str(r.json()["geometry"]["type"]), "MultiPolygon");
    EXPECT_FALSE(bool(r.json()["properties"]["repaired"]));
    EXPECT_EQ(ids(read_->get("/v1/geofences/depot%201/vehicles").json()),
              (std::vector<std::string>{"in-1"}));

    // Replacing answers 200 and takes effect at once.
    const std::string bigger =
        R"({"type":"MultiPolygon","coordinates":[[[[13.01,52.01],[13.06,52.01],[13.06,52.09],)"
        R"([13.01,52.09],[13.01,52.01]]]]})";
    r = write_->request("PUT", "/v1/geofences/depot%201", bigger, "application/json");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(ids(read_->get("/v1/geofences/depot%201/vehicles").json()),
              (std::vector<std::string>{"in-1", "in-2"}));

    r = read_->get("/v1/geofences/depot%201");
    ASSERT_EQ(r.status, 200);
    EXPECT_EQ(str(r.json()["properties"]["zone_name"]), "depot 1");
    EXPECT_NEAR(double(r.json()["properties"]["area_m2"]),
                std::stod(sql("SELECT ST_Area(fence_geom::geography) FROM "
                              "trackd.geofence_zones WHERE zone_name = 'depot 1'")
                              .at(0, 0)),
                0.5);
    EXPECT_EQ(ids(read_->get("/v1/geofences").json()),
              (std::vector<std::string>{"depot 1", "donut", "square"}));

    // An invalid polygon: 422 naming the problem and where; with repair=true it is stored.
    const std::string bowtie =
        R"({"type":"Polygon","coordinates":[[[13,52],[13.2,52.2],[13.2,52],[13,52.2],[13,52]]]})";
    r = write_->request("PUT", "/v1/geofences/bow", bowtie, "application/geo+json");
    EXPECT_EQ(outcome(r), std::make_pair(422, std::string("body")));
    EXPECT_NE(str(r.json()["detail"]).find("Self-intersection at or near [13.1, 52.1]"),
              std::string::npos)
        << r.body;
    EXPECT_EQ(read_->get("/v1/geofences/bow").status, 404);
    r = write_->request("PUT", "/v1/geofences/bow?repair=true", bowtie, "application/geo+json");
    ASSERT_EQ(r.status, 201) << r.body;
    EXPECT_TRUE(bool(r.json()["properties"]["repaired"]));
    EXPECT_EQ(sql("SELECT ST_IsValid(fence_geom), ST_NumGeometries(fence_geom) FROM "
                  "trackd.geofence_zones WHERE zone_name = 'bow'")
                  .at(0, 1),
              "2");

    // An edge between two antipodal points has no one path on the globe, so PostGIS cannot
    // give the zone's area: 422 naming the edge, not a database error.
    r = write_->request(
        "PUT", "/v1/geofences/half",
        R"({"type":"Polygon","coordinates":[[[-90,0],[90,0],[90,10],[-90,10],[-90,0]]]})",
        "application/geo+json");
    EXPECT_EQ(outcome(r), std::make_pair(422, std::string("body")));
    EXPECT_NE(str(r.json()["detail"])
                  .find("the edge from [-90, 0] to [90, 0] joins two "
                        "antipodal points"),
              std::string::npos)
        << r.body;
    EXPECT_EQ(read_->get("/v1/geofences/half").status, 404);
    // A ten-millionth of a degree short of antipodal: stored, with its area.
    r = write_->request("PUT", "/v1/geofences/half",
                        R"({"type":"Polygon","coordinates":[[[-89.9999999,0],[90,0],[90,10],)"
                        R"([-90,10],[-89.9999999,0]]]})",
                        "application/geo+json");
    ASSERT_EQ(r.status, 201) << r.body;
    EXPECT_GT(double(r.json()["properties"]["area_m2"]), 0);
    EXPECT_EQ(write_->request("DELETE", "/v1/geofences/half").status, 204);

    EXPECT_EQ(write_->request("DELETE", "/v1/geofences/depot%201").status, 204);
    EXPECT_EQ(outcome(write_->request("DELETE", "/v1/geofences/depot%201")),
              std::make_pair(404, std::string("zone_name")));
    EXPECT_EQ(read_->get("/v1/geofences/depot%201").status, 404);

    // Write needs the write scope.
    EXPECT_EQ(read_->request("PUT", "/v1/geofences/x", depot, "application/json").status, 403);
    EXPECT_EQ(read_->request("DELETE", "/v1/geofences/square").status, 403);
    EXPECT_EQ(HttpClient(server_->port())
                  .request("PUT", "/v1/geofences/x", depot, "application/json")
                  .status,
              401);
    EXPECT_EQ(sql("SELECT count(*) FROM trackd.geofence_zones WHERE zone_name = 'x'").at(0, 0),
              "0");
}

TEST_F(HttpApi, OgcApiFeatures) {
    auto r = HttpClient(server_->port()).get("/");  // open landing page
    ASSERT_EQ(r.status, 200);
    const std::string base = "http://127.0.0.1:" + std::to_string(server_->port());
    EXPECT_EQ(link(r.json(), "conformance"), base + "/conformance");
    EXPECT_EQ(link(r.json(), "service-desc"), base + "/api");
    EXPECT_EQ(link(r.json(), "data"), base + "/collections");
    r = read_->get("/conformance");
    EXPECT_NE(r.body.find("http://www.opengis.net/spec/ogcapi-features-1/1.0/conf/core"),
              std::string::npos);
    r = read_->get("/collections");
    std::vector<std::string> collections;
    for (auto c : r.json()["collections"].get_array()) collections.push_back(str(c["id"]));
    EXPECT_EQ(collections, (std::vector<std::string>{"vehicles", "positions", "geofences"}));
    EXPECT_EQ(read_->get("/collections/positions").status, 200);
    EXPECT_EQ(outcome(read_->get("/collections/trucks")),
              std::make_pair(404, std::string("collectionId")));

    r = read_->get("/collections/vehicles/items?bbox=12.95,51.95,13.15,52.15");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(int64_t(r.json()["numberMatched"]), 3);
    EXPECT_EQ(int64_t(r.json()["numberReturned"]), 3);
    EXPECT_EQ(ids(r.json()), (std::vector<std::string>{"edge", "in-1", "in-2"}));

    // positions: datetime interval, time order, paging exactly once, items by id.
    r = read_->get(
        "/collections/positions/items?datetime=2025-06-01T10:01:00Z/2025-06-01T10:03:00Z");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(ids(r.json()), (std::vector<std::string>{"7-0-101", "7-0-102", "7-0-103"}));
    r = read_->get("/collections/positions/items?datetime=../2025-06-01T10:00:00Z");
    EXPECT_EQ(ids(r.json()), (std::vector<std::string>{"8-1-201", "7-0-100"}));
    const auto all = all_pages(*read_, "/collections/positions/items?limit=3", 3);
    EXPECT_EQ(all, (std::vector<std::string>{"8-1-201", "7-0-100", "7-0-101", "7-0-102", "7-0-103",
                                             "7-0-104", "7-0-105", "8-0-200"}));
    r = read_->get("/collections/positions/items?limit=3");
    EXPECT_EQ(int64_t(r.json()["numberMatched"]), 8);
    r = read_->get("/collections/positions/items/7-0-102");
    ASSERT_EQ(r.status, 200);
    EXPECT_EQ(str(r.json()["properties"]["recorded_at"]), "2025-06-01T10:02:00Z");
    EXPECT_EQ(outcome(read_->get("/collections/positions/items/7-0-999")),
              std::make_pair(404, std::string("featureId")));
    EXPECT_EQ(read_->get("/collections/positions/items/not-an-id").status, 404);

    // geofences: a bbox selects by real intersection, not just bounding boxes.
    r = read_->get("/collections/geofences/items?bbox=14.06,52.06,14.14,52.14");  // in the hole
    EXPECT_EQ(ids(r.json()).size(), 0U);
    r = read_->get("/collections/geofences/items?bbox=13.05,52.05,14.01,52.06");
    EXPECT_EQ(ids(r.json()), (std::vector<std::string>{"donut", "square"}));
    EXPECT_EQ(str(read_->get("/collections/geofences/items/square").json()["geometry"]["type"]),
              "MultiPolygon");
    EXPECT_EQ(str(read_->get("/collections/vehicles/items/hole").json()["id"]), "hole");
    EXPECT_EQ(HttpClient(server_->port()).get("/collections/vehicles/items").status, 401);
}

// The history's statements are planned with their values at every request: a generic plan,
// which PostgreSQL's plan cache keeps for a prepared statement once it looks cheaper than the
// custom plans made so far, reads the same indexes for a street and for the whole fleet. The
// current state's statements keep their cached plans. Counted by pg_stat_statements with
// planning tracked (plans = times planned, calls = times run).
TEST_F(HttpApi, HistoryStatementsArePlannedWithTheirValuesEachTime) {
    if (!count_plans()) GTEST_SKIP() << "pg_stat_statements is not loaded by this server";
    constexpr int kRequests = 9;  // more than the plan cache's five custom plans
    for (int i = 0; i < kRequests; ++i) {
        const auto r = read_->get(fmt::format(
            "/collections/positions/items?bbox=12.9,51.9,{},52.2&datetime=2025-06-01T10:00:00Z/"
            "2025-06-01T10:0{}:00Z&limit=2",
            13.1 + 0.01 * i, 1 + i % 5));
        ASSERT_EQ(r.status, 200) << r.body;
        // A small box (at most 0.108° x 0.1°, under 256 of the grid's cells).
        const auto v = read_->get(
            fmt::format("/v1/vehicles?bbox=12.9,51.9,{},52.0&limit=10", 13.0 + 0.001 * i));
        ASSERT_EQ(v.status, 200) << v.body;
        // The tile at zoom 8 + i that holds in-1's position of 10:04 (13.04, 52.05).
        const double n = std::ldexp(1.0, 8 + i);
        const double lat = 52.05 * M_PI / 180;
        const auto t = read_->get(
            fmt::format("/tiles/positions/{}/{}/{}.mvt?datetime=2025-06-01T10:00:00Z/..", 8 + i,
                        static_cast<int>((13.04 + 180) / 360 * n),
                        static_cast<int>((1 - std::asinh(std::tan(lat)) / M_PI) / 2 * n)));
        ASSERT_EQ(t.status, 200) << t.body;
    }
    // The positions page and its count: each planned at each of its runs.
    EXPECT_EQ(
        calls_and_plans("SELECT vehicle_id, recorded_at%FROM trackd.vehicle_telemetry_history%"),
        std::make_pair(kRequests, kRequests));
    EXPECT_EQ(calls_and_plans("SELECT count(*) FROM trackd.vehicle_telemetry_history%"),
              std::make_pair(kRequests, kRequests));
    // The positions' tiles too.
    EXPECT_EQ(calls_and_plans("SELECT ST_AsMVT(%FROM trackd.vehicle_telemetry_history%"),
              std::make_pair(kRequests, kRequests));
    // The vehicles in a small box: one prepared statement, planned for its first runs only.
    const auto vehicles = calls_and_plans("SELECT vehicle_id%FROM trackd.vehicle_current_state%");
    EXPECT_EQ(vehicles.first, kRequests);
    EXPECT_LT(vehicles.second, kRequests);
}

// A box over much of the fleet: its generic plan would read every vehicle in it for each page.
TEST_F(HttpApi, VehiclesInALargeBoxArePlannedWithTheirValuesEachTime) {
    const auto expected_rows =
        sql("SELECT vehicle_id FROM trackd.vehicle_current_state ORDER BY vehicle_id");
    std::vector<std::string> expected;
    for (int i = 0; i < expected_rows.rows(); ++i) expected.push_back(expected_rows.at(i, 0));
    ASSERT_EQ(expected.size(), 46U);
    if (!count_plans()) GTEST_SKIP() << "pg_stat_statements is not loaded by this server";
    // All of the fixture's vehicles (10.0 .. 14.55 E, 50.0 .. 52.1 N), 7 pages of 7: each
    // exactly once, in order.
    EXPECT_EQ(all_pages(*read_, "/v1/vehicles?bbox=9,49,15,53&limit=7", 7), expected);
    constexpr int kRequests = 9;
    for (int i = 0; i < kRequests; ++i) {
        const auto r =
            read_->get(fmt::format("/collections/vehicles/items?bbox=9,49,{},53&limit=10", 15 + i));
        ASSERT_EQ(r.status, 200) << r.body;
        const auto doc = r.json();
        EXPECT_EQ(doc["numberMatched"].get_int64().value(), 46);
        EXPECT_EQ(doc["features"].get_array().size(), 10U);
    }
    // The 7 pages and the 9 OGC pages, each planned at its run; the OGC pages' counts too.
    EXPECT_EQ(calls_and_plans("SELECT vehicle_id%FROM trackd.vehicle_current_state%"),
              std::make_pair(7 + kRequests, 7 + kRequests));
    EXPECT_EQ(calls_and_plans("SELECT count(*) FROM trackd.vehicle_current_state%"),
              std::make_pair(kRequests, kRequests));
}

TEST_F(HttpApi, OgcCollectionsReportTheEstimatedExtentOfTheirData) {
    // The fixture was ANALYZEd: the extents are PostGIS's estimates and the statistics' range,
    // not the whole world.
    const auto res = read_->get("/collections");
    ASSERT_EQ(res.status, 200);
    const auto doc = res.json();
    std::map<std::string, simdjson::dom::element> by_id;
    for (auto c : doc["collections"].get_array()) by_id[str(c["id"])] = c["extent"];
    ASSERT_EQ(by_id.size(), 3U);
    const auto bbox = [&](const std::string& id) {
        std::vector<double> out;
        for (auto v : by_id[id]["spatial"]["bbox"].at(0).get_array())
            out.push_back(v.get_double().value());
        return out;
    };
    const auto estimated = [&](const std::string& table, const std::string& column) {
        const auto r =
            sql("SELECT ST_XMin(b), ST_YMin(b), ST_XMax(b), ST_YMax(b) FROM "
                "ST_EstimatedExtent('trackd', $1, $2) b",
                {table, column});
        std::vector<double> out;
        for (int i = 0; i < 4; ++i) out.push_back(std::stod(r.at(0, i)));
        return out;
    };
    const auto vehicles = bbox("vehicles");
    EXPECT_EQ(vehicles, estimated("vehicle_current_state", "geom"));
    // The fixture's vehicles span 10.0 .. 14.55 E, 50.0 .. 52.1 N; the statistics' extent (the
    // current state has no GiST to read one from since V0014) is padded by a fraction of its
    // size: it covers them, and not much more.
    ASSERT_EQ(vehicles.size(), 4U);
    EXPECT_LE(vehicles[0], 10.0);
    EXPECT_LE(vehicles[1], 50.0);
    EXPECT_GE(vehicles[2], 14.55);
    EXPECT_GE(vehicles[3], 52.1);
    EXPECT_NEAR(vehicles[0], 10.0, 0.05);
    EXPECT_NEAR(vehicles[1], 50.0, 0.05);
    EXPECT_NEAR(vehicles[2], 14.55, 0.05);
    EXPECT_NEAR(vehicles[3], 52.1, 0.05);
    EXPECT_EQ(bbox("geofences"), estimated("geofence_zones", "fence_geom"));
    const auto positions = bbox("positions");
    ASSERT_EQ(positions.size(), 4U);
    EXPECT_NEAR(positions[0], 13.0, 0.01);
    EXPECT_NEAR(positions[3], 52.3, 0.01);

    // Positions: from the earliest to the latest recorded_at of the (small, fully sampled)
    // history.
    const auto interval = [&](const std::string& id) {
        const auto one = read_->get("/collections/" + id);
        const auto iv = one.json()["extent"]["temporal"]["interval"].at(0);
        return std::make_pair(str(iv.at(0)), str(iv.at(1)));
    };
    EXPECT_EQ(interval("positions"), std::make_pair(std::string("2025-06-01T09:30:00Z"),
                                                    std::string("2025-06-02T10:00:00Z")));
    EXPECT_EQ(interval("vehicles"), std::make_pair(std::string("2025-05-01T00:00:00Z"),
                                                   std::string("2025-06-01T10:05:00Z")));

    // Statistics, not a scan: a new row shows once ANALYZE (autovacuum) has seen it.
    sql("INSERT INTO trackd.vehicle_telemetry_history (vehicle_id, recorded_at, geom, "
        "ingest_batch_id, kafka_partition, kafka_offset) VALUES ('in-1', '2025-06-03T00:00:00Z', "
        "ST_SetSRID(ST_MakePoint(13.0, 52.0, 0), 4326), 9, 0, 300)");
    EXPECT_EQ(interval("positions").second, "2025-06-02T10:00:00Z");
    sql("ANALYZE trackd.vehicle_telemetry_history");
    EXPECT_EQ(interval("positions").second, "2025-06-03T00:00:00Z");
}

TEST_F(HttpApi, BadInputAnswers4xxNamingTheParameter) {
    const std::vector<std::tuple<std::string, int, std::string>> cases = {
        {"/v1/vehicles?bbox=west,south,east,north", 400, "bbox"},
        {"/v1/vehicles?bbox=13,91,14,92", 400, "bbox"},
        {"/v1/vehicles?bbox=14,52,13,53", 400, "bbox"},
        {"/v1/vehicles?limit=1001", 400, "limit"},
        {"/v1/vehicles?updated_since=2025-06-01", 400, "updated_since"},
        {"/v1/vehicles/nearby?lon=13&lat=90.01&radius_m=5", 400, "lat"},
        {"/v1/vehicles/in-1/track?to=soon", 400, "to"},
        {"/v1/geofences/square/vehicles?state=under", 400, "state"},
        {"/collections/positions/items?datetime=2025-13-01T00:00:00Z", 400, "datetime"},
        {"/v1/vehicles?sort=name", 400, "sort"},
        {"/v1/vehicles/%ZZ", 400, "path"},
        {"/v1/nothing", 404, ""},
    };
    for (const auto& [target, status, parameter] : cases) {
        const auto r = read_->get(target);
        EXPECT_EQ(outcome(r), std::make_pair(status, parameter)) << target << " " << r.body;
        EXPECT_EQ(r.header("content-type"), "application/problem+json") << target;
    }
    const auto r405 = read_->request("POST", "/v1/vehicles");
    EXPECT_EQ(r405.status, 405);
    EXPECT_EQ(r405.header("allow"), "GET");
    const auto r415 = write_->request("PUT", "/v1/geofences/z", "{}", "text/csv");
    EXPECT_EQ(outcome(r415), std::make_pair(415, std::string("Content-Type")));
    const auto r400 = write_->request("PUT", "/v1/geofences/z", "{\"type\":", "application/json");
    EXPECT_EQ(outcome(r400), std::make_pair(400, std::string("body")));
    const auto r413 =
        write_->request("PUT", "/v1/geofences/z", std::string(70 * 1024, ' '), "application/json");
    EXPECT_EQ(outcome(r413), std::make_pair(413, std::string("body")));
    const auto r431 =
        read_->request("GET", "/v1/vehicles", "", "", {{"X-Padding", std::string(5000, 'x')}});
    EXPECT_EQ(r431.status, 431);
}

TEST_F(HttpApi, HealthReadinessAndAccess) {
    const HttpClient anonymous(server_->port());
    EXPECT_EQ(anonymous.get("/healthz").status, 200);
    auto ready = anonymous.get("/readyz");
    ASSERT_EQ(ready.status, 200) << ready.body;
    EXPECT_EQ(int64_t(ready.json()["schema_version"]), db::expected_schema_version());
    const auto denied = anonymous.get("/v1/vehicles");
    EXPECT_EQ(outcome(denied), std::make_pair(401, std::string("Authorization")));
    EXPECT_EQ(denied.header("www-authenticate"), "Bearer realm=\"trackd\"");
    EXPECT_EQ(HttpClient(server_->port(), "not-a-known-token-000").get("/v1/vehicles").status, 401);
    EXPECT_EQ(anonymous.get("/api").status, 200);

    // A schema that is not this build's: not ready, saying what to run.
    sql("INSERT INTO trackd.schema_migrations (version, name) VALUES (999, 'future')");
    ready = anonymous.get("/readyz");
    EXPECT_EQ(ready.status, 503);
    EXPECT_NE(ready.body.find("schema is at version 999"), std::string::npos) << ready.body;
}

TEST_F(HttpApi, LandingPagesCanBeClosed) {
    server_.reset();
    start([](config::Config& c) { c.http.open_landing_pages = false; });
    const HttpClient anonymous(server_->port());
    EXPECT_EQ(anonymous.get("/").status, 401);
    EXPECT_EQ(anonymous.get("/collections").status, 401);
    EXPECT_EQ(anonymous.get("/healthz").status, 200);
    EXPECT_EQ(read_->get("/").status, 200);
}

TEST_F(HttpApi, StatementTimeoutAnswers503) {
    server_.reset();
    start([](config::Config& c) { c.http.statement_timeout_ms = 300; });
    // Another session holds a lock the query needs; statement_timeout ends the wait.
    db::Connection locker(db_.dsn(), "test locker");
    locker.exec_script("BEGIN; LOCK TABLE trackd.vehicle_current_state IN ACCESS EXCLUSIVE MODE");
    const auto r = read_->get("/v1/vehicles?limit=5");
    EXPECT_EQ(r.status, 503) << r.body;
    EXPECT_NE(r.body.find("http.statement_timeout_ms"), std::string::npos) << r.body;
    locker.exec_script("ROLLBACK");
    EXPECT_EQ(read_->get("/v1/vehicles?limit=5").status, 200);  // the connection is fine again
}

TEST_F(HttpApi, DatabaseDownAnswers503NotAnError) {
    server_.reset();
    start([](config::Config& c) {
        c.pg.dsn = "postgresql://postgres@127.0.0.1:1/none";
        c.pg.connect_timeout_s = 2;
    });
    EXPECT_EQ(read_->get("/healthz").status, 200);
    EXPECT_EQ(read_->get("/readyz").status, 503);
    EXPECT_EQ(read_->get("/v1/vehicles/in-1").status, 503);
}

// PostgreSQL frozen (its process stopped, or a network that drops packets): the server-side
// statement_timeout cannot answer, so the pool gives up after http.statement_timeout_ms + 1 s on
// the connection it holds, one request at a time tries to connect (pg.connect_timeout_s) and the
// others are turned away at once. Every request is answered 503 while the database is still
// frozen, /healthz answers, and once it thaws the API serves again. Without the client-side
// bound the request on the open connection waited until the thaw.
TEST_F(HttpApi, AFrozenDatabaseIsAnswered503AndNoRequestWaitsForIt) {
    const auto [host, port] = pg_endpoint(db_.dsn());
    TcpRelay relay(host, port);
    server_.reset();
    start([&](config::Config& c) {
        c.pg.dsn = relay.through(db_.dsn());
        c.pg.connect_timeout_s = 2;
        c.http.statement_timeout_ms = 300;
    });
    ASSERT_EQ(read_->get("/v1/vehicles/in-1").status, 200);  // the pool holds one connection

    relay.freeze(true);
    std::vector<std::future<HttpResponse>> answers;
    for (int i = 0; i < 6; ++i) {
        answers.push_back(
            std::async(std::launch::async, [this] { return read_->get("/v1/vehicles/in-1"); }));
    }
    auto healthz = std::async(std::launch::async, [this] { return read_->get("/healthz").status; });
    // Bounded only so that a failure ends: the answers come within seconds.
    bool all_answered = true;
    for (auto& a : answers) {
        all_answered =
            all_answered && a.wait_for(std::chrono::seconds(60)) == std::future_status::ready;
    }
    const bool healthz_answered =
        healthz.wait_for(std::chrono::seconds(60)) == std::future_status::ready;
    relay.freeze(false);  // the thaw: whatever still waits is answered from here on
    ASSERT_TRUE(all_answered) << "a request waited for the frozen database";
    ASSERT_TRUE(healthz_answered) << "/healthz waited for the frozen database";
    EXPECT_EQ(healthz.get(), 200);
    int timed_out = 0;
    for (auto& a : answers) {
        const auto r = a.get();
        EXPECT_EQ(r.status, 503) << r.body;
        if (r.body.find("did not answer within 1300 ms") != std::string::npos) ++timed_out;
    }
    EXPECT_EQ(timed_out, 1) << "the request on the open connection";

    EXPECT_EQ(read_->get("/v1/vehicles/in-1").status, 200);
    EXPECT_EQ(read_->get("/readyz").status, 200);
}

// A request waits for the database in its thread's event loop, not on the thread, and so does
// opening a connection: with one I/O thread and more requests waiting on a frozen database than
// connections (here with limits of 30 s, so that they keep waiting), /healthz answers on both
// listeners. Before the requests became coroutines each held its thread, and /healthz on
// http.listen waited for the thaw.
TEST_F(HttpApi, HealthzAnswersWhileRequestsWaitOnAFrozenDatabase) {
    const auto [host, port] = pg_endpoint(db_.dsn());
    TcpRelay relay(host, port);
    start_waiting_on(relay, 2, true);
    if (HasFatalFailure()) return;

    relay.freeze(true);
    // One waits on the open connection, one opens the second, two wait for a connection.
    std::vector<std::future<HttpResponse>> api;
    for (int i = 0; i < 4; ++i) {
        api.push_back(
            std::async(std::launch::async, [this] { return read_->get("/v1/vehicles/in-1"); }));
    }
    // Held back by the freeze: the statement on the open connection and the new connection's
    // startup packet.
    ASSERT_EQ(relay.wait_holding(2), 2);
    ASSERT_EQ(relay.accepted(), 2);
    const auto healthz = read_->get("/healthz");
    EXPECT_EQ(healthz.status, 200) << healthz.body;
    const HttpClient ops(server_->metrics_port());
    EXPECT_EQ(ops.get("/healthz").status, 200);
    for (auto& a : api) {
        EXPECT_EQ(a.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout)
            << "a request was answered while the database was frozen: the test shows nothing";
    }

    relay.freeze(false);
    for (auto& a : api) EXPECT_EQ(a.get().status, 200);
    EXPECT_EQ(relay.accepted(), 2);
}

// Opening a connection does not hold the event loop either, not even the lookup of a host name,
// which libpq does only by blocking: with one I/O thread and a lookup that does not end
// (support/held_lookup.hpp, as behind a DNS server that does not answer), /healthz answers while
// the request that opens the pool's connection waits for it; once the lookup answers, so does the
// request. Before, libpq looked the name up on the I/O thread and /healthz waited with it.
TEST_F(HttpApi, HealthzAnswersWhileAHostNameLookupHangs) {
    const auto port = pg_endpoint(db_.dsn()).second;
    server_.reset();
    start([&](config::Config& c) {
        c.pg.dsn = pg_dsn_at(db_.dsn(), port, "db.held.test");
        c.pg.connect_timeout_s = 30;
        c.http.threads = 1;
    });
    HeldLookup lookup("db.held.test");
    auto api = std::async(std::launch::async, [this] { return read_->get("/v1/vehicles/in-1"); });
    ASSERT_EQ(lookup.wait_held(1, std::chrono::seconds(60)), 1) << "the name was not looked up";
    // Half the hold's own limit: past it, /healthz waited for the lookup.
    auto healthz = std::async(std::launch::async, [this] { return read_->get("/healthz"); });
    EXPECT_EQ(healthz.wait_for(std::chrono::seconds(30)), std::future_status::ready)
        << "/healthz waited for the lookup";
    EXPECT_EQ(api.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout)
        << "the request was answered while its lookup was held: the test shows nothing";

    lookup.release();
    EXPECT_EQ(healthz.get().status, 200);
    const auto r = api.get();
    EXPECT_EQ(r.status, 200) << r.body;
}

// A statement larger than the sockets' buffers, on a frozen database: a geofence of 320,000
// vertices (a body of 7.7 MB, under an http.max_body_bytes raised to 16 MiB; its statement about
// 10 MB of hexadecimal EWKB) cannot be sent in full while nothing reads it (the relay's receive
// buffer is 16 KiB). The rest waits in the event loop, as the answer does: /healthz answers
// meanwhile, and the PUT is stored once the database thaws. (With a 1 MB body, loopback's buffers
// took the whole statement even when it was sent in blocking mode.)
TEST_F(HttpApi, HealthzAnswersWhileALargeStatementWaitsOnAFrozenDatabase) {
    const auto [host, port] = pg_endpoint(db_.dsn());
    TcpRelay relay(host, port, 16384);
    start_waiting_on(relay, 1, false,
                     [](config::Config& c) { c.http.max_body_bytes = 16 * 1048576; });
    if (HasFatalFailure()) return;

    constexpr int kVertices = 320000;
    std::string ring;
    for (int i = 0; i < kVertices; ++i) {
        const double a = 2 * M_PI * i / kVertices;
        ring +=
            fmt::format("[{:.7f},{:.7f}],", 13.4 + 0.05 * std::cos(a), 52.5 + 0.03 * std::sin(a));
    }
    ring += fmt::format("[{:.7f},{:.7f}]", 13.45, 52.5);
    const std::string body = R"({"type":"Polygon","coordinates":[[)" + ring + "]]}";
    ASSERT_GT(body.size(), 7000000U);

    // A small one first: the statement is prepared, so the frozen relay holds the large one.
    const auto small = write_->request(
        "PUT", "/v1/geofences/wide",
        R"({"type":"Polygon","coordinates":[[[13,52],[13.1,52],[13.1,52.1],[13,52]]]})",
        "application/geo+json");
    ASSERT_EQ(small.status, 201) << small.body;

    relay.freeze(true);
    auto put = std::async(std::launch::async, [&] {
        return write_->request("PUT", "/v1/geofences/wide", body, "application/geo+json");
    });
    if (relay.wait_holding(1) != 1) {
        relay.freeze(false);
        const auto r = put.get();
        FAIL() << "the PUT's statement did not reach the frozen relay: " << r.status << " "
               << r.body;
    }
    auto healthz = std::async(std::launch::async, [this] { return read_->get("/healthz"); });
    EXPECT_EQ(healthz.wait_for(std::chrono::seconds(20)), std::future_status::ready)
        << "/healthz waited for the statement to be sent";
    EXPECT_EQ(put.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout)
        << "the PUT was answered while the database was frozen: the test shows nothing";

    relay.freeze(false);
    EXPECT_EQ(healthz.get().status, 200);
    const auto r = put.get();
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(sql("SELECT ST_NPoints(fence_geom) FROM trackd.geofence_zones WHERE zone_name = "
                  "'wide'")
                  .at(0, 0),
              std::to_string(kVertices + 1));
}

// A stop while requests wait on a frozen database: after its grace, the server drops them (the
// one on the server and those waiting for the connection) and closes their connections; nothing
// is left running on the stopped loops (ASan checks the teardown in CI).
TEST_F(HttpApi, AStopWhileRequestsWaitOnAFrozenDatabaseEndsEveryOne) {
    const auto [host, port] = pg_endpoint(db_.dsn());
    TcpRelay relay(host, port);
    start_waiting_on(relay, 1, false);
    if (HasFatalFailure()) return;

    relay.freeze(true);
    const HttpClient client(server_->port(), kReadToken);
    std::vector<std::future<int>> api;
    for (int i = 0; i < 3; ++i) {
        api.push_back(std::async(std::launch::async, [client] {
            try {
                return client.get("/v1/vehicles/in-1").status;
            } catch (const std::exception&) {
                return 0;  // the connection closed without an answer
            }
        }));
    }
    ASSERT_EQ(relay.wait_holding(1), 1);
    server_.reset();  // waits out its grace, then ends the loops
    for (auto& a : api) {
        ASSERT_EQ(a.wait_for(std::chrono::seconds(60)), std::future_status::ready);
        EXPECT_EQ(a.get(), 0) << "a request waiting on the frozen database was answered";
    }

    relay.freeze(false);
    start([&](config::Config& c) { c.pg.dsn = relay.through(db_.dsn()); });
    EXPECT_EQ(read_->get("/v1/vehicles/in-1").status, 200);
}

// Raw sockets: keep-alive, and connections that send nothing or too little are closed.
class RawConnection {
  public:
    explicit RawConnection(unsigned short port) : socket_(ioc_) {
        socket_.connect(
            boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), port));
    }
    void send(const std::string& text) { boost::asio::write(socket_, boost::asio::buffer(text)); }
    // Reads until the server closes the connection; returns everything read.
    std::string read_to_close() {
        std::string out;
        boost::system::error_code ec;
        std::array<char, 4096> buf{};
        while (!ec) {
            const auto n = socket_.read_some(boost::asio::buffer(buf), ec);
            out.append(buf.data(), n);
        }
        return out;
    }

  private:
    boost::asio::io_context ioc_;
    boost::asio::ip::tcp::socket socket_;
};

TEST_F(HttpApi, KeepAliveAndTimeouts) {
    server_.reset();
    start([](config::Config& c) {
        c.http.idle_timeout_ms = 200;
        c.http.read_timeout_ms = 300;
    });
    // Two requests on one connection, then the connection idles and is closed by the server.
    RawConnection keep(server_->port());
    keep.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
    const std::string both = keep.read_to_close();
    std::size_t count = 0;
    for (auto p = both.find("HTTP/1.1 200"); p != std::string::npos;
         p = both.find("HTTP/1.1 200", p + 1)) {
        ++count;
    }
    EXPECT_EQ(count, 2U) << both;

    // A client that never finishes its request does not hold the connection.
    RawConnection slow(server_->port());
    slow.send("GET /healthz HTTP/1.1\r\nHost: x\r\n");
    EXPECT_EQ(slow.read_to_close(), "");

    // Garbage is a 400 and the end of the connection.
    RawConnection garbage(server_->port());
    garbage.send("HELLO\r\n\r\n");
    EXPECT_EQ(garbage.read_to_close().rfind("HTTP/1.1 400", 0), 0U);
}

// The binary: `trackd run` serves the API beside ingest and stops both on SIGTERM.
TEST(TrackdRun, ServesHttpAndStopsOnSigterm) {
    TestDatabase db("http_run", Schema::migrated);
    // A free port: bind to 0, read it, release it for trackd.
    unsigned short port = 0;
    {
        boost::asio::io_context ioc;
        boost::asio::ip::tcp::acceptor a(
            ioc, boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0));
        port = a.local_endpoint().port();
    }
    const std::string log = ::testing::TempDir() + "trackd-http-run.log";
    ChildProcess trackd({trackd_binary(), "run"},
                        {{"TRACKD_PG_DSN", db.dsn()},
                         {"TRACKD_KAFKA_BROKERS", kafka_brokers()},
                         {"TRACKD_KAFKA_TOPIC", "trackd-http-run-" + std::to_string(getpid())},
                         {"TRACKD_KAFKA_GROUP", "trackd-http-run"},
                         {"TRACKD_HTTP_LISTEN", "127.0.0.1:" + std::to_string(port)},
                         {"TRACKD_HTTP_TOKENS_DASHBOARD", std::string("read:") + kReadToken}},
                        log);
    // Wait for it to listen (start-up includes connecting to Kafka and PostgreSQL).
    HttpResponse health;
    for (int i = 0; i < 600 && health.status != 200; ++i) {
        try {
            health = HttpClient(port).get("/healthz");
        } catch (const std::exception&) {
            ASSERT_TRUE(trackd.running()) << file_text(log);
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
    }
    ASSERT_EQ(health.status, 200) << file_text(log);
    EXPECT_EQ(HttpClient(port, kReadToken).get("/readyz").status, 200);
    EXPECT_EQ(HttpClient(port, kReadToken).get("/v1/vehicles").status, 200);
    EXPECT_EQ(HttpClient(port).get("/v1/vehicles").status, 401);
    trackd.kill(SIGTERM);
    EXPECT_EQ(trackd.wait(), 0) << file_text(log);
    const std::string text = file_text(log);
    EXPECT_NE(text.find("http: stopped"), std::string::npos) << text;
    EXPECT_EQ(text.find(kReadToken), std::string::npos) << "a token was logged";
}

}  // namespace
}  // namespace trackd::test
