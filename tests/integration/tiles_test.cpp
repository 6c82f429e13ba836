// Vector tiles against the real PostgreSQL/PostGIS: every tile of a grid at several zooms
// (the antimeridian, the poles' rows and empty tiles included) is byte for byte what PostGIS's
// own ST_AsMVT answers for the same Web Mercator bounds, GDAL's MVT driver reads a tile with the
// features and coordinates PostGIS has for those bounds, and bad z/x/y are 400s.
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <tuple>

#include <gtest/gtest.h>

#include "support/http_fixture.hpp"
#include "support/process.hpp"

namespace trackd::test {
namespace {

// Vehicles near the antimeridian (both sides, and on it), near the Mercator limit, and far
// north (beyond it: in no tile), added to the fixture's.
constexpr const char* kEdgeVehicles = R"SQL(
INSERT INTO trackd.vehicle_current_state (vehicle_id, last_updated, geom, speed_kmh, heading_deg,
  ingest_batch_id, kafka_partition, kafka_offset)
SELECT id, '2025-06-01T10:00:00.123456Z', ST_SetSRID(ST_MakePoint(lon, lat, 0), 4326), 10, 180,
       2, 0, n
FROM (VALUES ('am-east', 179.999, 10.0, 1), ('am-west', -179.999, 10.0, 2),
             ('am-on', 180.0, -10.0, 3), ('am-on-west', -180.0, -20.0, 4),
             ('north', 20.0, 85.0, 5), ('pole', 20.0, 89.0, 6)) AS v(id, lon, lat, n);
)SQL";

// PostGIS's own answer: the straightforward query over the same bounds, the rows selected by
// the buffered tile in EPSG:3857 (pole rows excluded first: they have no Mercator y).
std::string reference_sql(const std::string& collection,
                          const std::string& positions_filter = "recorded_at BETWEEN $4 AND $5") {
    const std::string mask = " & 4503599627370495";
    const std::string tile = "ST_TileEnvelope($1::int, $2::int, $3::int)";
    const std::string buffered =
        "ST_TileEnvelope($1::int, $2::int, $3::int, margin => 64.0 / 4096)";
    const auto ts = [](const char* c) {
        return std::string("(to_json(") + c + " AT TIME ZONE 'UTC') #>> '{}') || 'Z' AS " + c;
    };
    std::string select;
    std::string from;
    std::string g = "geom";
    if (collection == "vehicles") {
        select = "hashtextextended(vehicle_id, 0)" + mask + " AS id, vehicle_id, " +
                 ts("last_updated") + ", speed_kmh, heading_deg";
        from = "trackd.vehicle_current_state WHERE ST_Y(geom) BETWEEN -85.06 AND 85.06";
    } else if (collection == "positions") {
        const std::string fid = "ingest_batch_id || '-' || kafka_partition || '-' || kafka_offset";
        select = "hashtextextended(" + fid + ", 0)" + mask + " AS id, vehicle_id, " + fid +
                 " AS feature_id, " + ts("recorded_at") + ", speed_kmh, heading_deg";
        from = "trackd.vehicle_telemetry_history WHERE " + positions_filter;
    } else {
        select = "hashtextextended(zone_name, 0)" + mask + " AS id, zone_name, " + ts("updated_at");
        from = "trackd.geofence_zones WHERE true";
        g = "fence_geom";
    }
    return "SELECT ST_AsMVT(t, '" + collection + "', 4096, 'geom', 'id') FROM (SELECT " + select +
           ", ST_AsMVTGeom(ST_Transform(" + g + ", 3857), " + tile +
           ", 4096, 64, true) AS geom FROM " + from + " AND ST_Transform(" + g + ", 3857) && " +
           buffered + " ORDER BY 1) t";
}

std::string unhex(const std::string& hex) {
    std::string out;
    for (std::size_t i = 2; i + 1 < hex.size(); i += 2) {
        out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
    }
    return out;
}

// The tiles with a vehicle of the fixture in them at zoom z, their neighbours, the tiles at both
// ends of the antimeridian row, and the top row.
std::set<std::tuple<int, int, int>> grid(int z) {
    const int n = 1 << z;
    const auto tile_of = [&](double lon, double lat) {
        const double x = (lon + 180.0) / 360.0 * n;
        const double rad = lat * M_PI / 180.0;
        const double y = (1.0 - std::log(std::tan(rad) + 1.0 / std::cos(rad)) / M_PI) / 2.0 * n;
        return std::pair<int, int>{std::min(n - 1, static_cast<int>(x)),
                                   std::min(n - 1, static_cast<int>(y))};
    };
    std::set<std::tuple<int, int, int>> out;
    for (const auto& [lon, lat] : std::vector<std::pair<double, double>>{{13.05, 52.05},
                                                                         {14.1, 52.1},
                                                                         {10.1, 50.0},
                                                                         {179.999, 10.0},
                                                                         {-179.999, 10.0},
                                                                         {180.0, -10.0},
                                                                         {-180.0, -20.0},
                                                                         {20.0, 85.0}}) {
        const auto [x, y] = tile_of(lon, lat);
        for (int dx = -1; dx <= 1; ++dx) {
            for (int dy = -1; dy <= 1; ++dy) {
                const int tx = x + dx;
                const int ty = y + dy;
                if (tx >= 0 && tx < n && ty >= 0 && ty < n) out.emplace(z, tx, ty);
            }
        }
    }
    out.emplace(z, 0, 0);
    out.emplace(z, n - 1, n - 1);
    return out;
}

class Tiles : public HttpFixture {
  protected:
    void SetUp() override {
        sql(kEdgeVehicles);
        HttpFixture::SetUp();
    }
    // The tile as the API answers it ("" for 204) and as PostGIS answers it.
    std::pair<HttpResponse, std::string> both(const std::string& collection, int z, int x, int y,
                                              const std::string& query = {},
                                              const db::Params& interval = {}) {
        auto res = read_->get("/tiles/" + collection + "/" + std::to_string(z) + "/" +
                              std::to_string(x) + "/" + std::to_string(y) + ".mvt" + query);
        db::Params p{std::to_string(z), std::to_string(x), std::to_string(y)};
        p.insert(p.end(), interval.begin(), interval.end());
        if (!conn_) conn_ = std::make_unique<db::Connection>(db_.dsn(), "test");
        const auto ref = conn_->query(reference_sql(collection), p);
        return {std::move(res), unhex(ref.at(0, 0))};
    }
    std::unique_ptr<db::Connection> conn_;
};

TEST_F(Tiles, EveryTileOfAGridEqualsPostgisAnswerForTheSameBounds) {
    int non_empty = 0;
    int empty = 0;
    for (const int z : {0, 1, 3, 7, 12}) {
        for (const auto& [tz, x, y] : grid(z)) {
            for (const std::string c : {"vehicles", "geofences"}) {
                const auto [res, expected] = both(c, tz, x, y);
                SCOPED_TRACE(c + " " + std::to_string(tz) + "/" + std::to_string(x) + "/" +
                             std::to_string(y));
                if (expected.empty()) {
                    ++empty;
                    EXPECT_EQ(res.status, 204);
                    EXPECT_EQ(res.body, "");
                } else {
                    ++non_empty;
                    ASSERT_EQ(res.status, 200) << res.body;
                    EXPECT_EQ(res.header("content-type"), "application/vnd.mapbox-vector-tile");
                    EXPECT_EQ(res.body, expected);
                }
                EXPECT_FALSE(res.header("etag").empty());
            }
            const auto [res, expected] =
                both("positions", tz, x, y, "?datetime=2025-06-01T00:00:00Z/2025-06-03T00:00:00Z",
                     {"2025-06-01T00:00:00Z", "2025-06-03T00:00:00Z"});
            EXPECT_EQ(res.status, expected.empty() ? 204 : 200);
            EXPECT_EQ(res.body, expected);
        }
    }
    // The grid has both kinds, so neither branch is vacuous.
    EXPECT_GE(non_empty, 40);
    EXPECT_GE(empty, 40);
}

TEST_F(Tiles, TheAntimeridianTilesHoldTheVehiclesOnTheirSide) {
    // At z 3 the vehicles at 179.999 and 180 are in the east-most column, those at -179.999 and
    // -180 in the west-most; no vehicle is lost to a box that wraps around.
    const auto count_in = [&](int x, int y) {
        const auto r =
            sql("SELECT count(*) FROM trackd.vehicle_current_state WHERE ST_Y(geom) < 85.06 AND "
                "ST_Transform(geom, 3857) && ST_TileEnvelope(3, $1::int, $2::int, margin => 64.0 / "
                "4096)",
                {std::to_string(x), std::to_string(y)});
        return std::stoi(r.at(0, 0));
    };
    EXPECT_EQ(count_in(7, 3), 1);  // am-east (lat 10)
    EXPECT_EQ(count_in(0, 3), 1);  // am-west
    EXPECT_EQ(count_in(7, 4), 1);  // am-on (180, -10)
    EXPECT_EQ(count_in(0, 4), 1);  // am-on-west (-180, -20)
    const auto east = read_->get("/tiles/vehicles/3/7/3.mvt");
    EXPECT_NE(east.body.find("am-east"), std::string::npos);
    EXPECT_NE(east.body.find("2025-06-01T10:00:00.123456Z"), std::string::npos);
    for (const auto& [x, y] : std::vector<std::pair<int, int>>{{7, 3}, {0, 3}, {7, 4}, {0, 4}}) {
        const auto [res, expected] = both("vehicles", 3, x, y);
        ASSERT_EQ(res.status, 200);
        EXPECT_EQ(res.body, expected);
    }
}

TEST_F(Tiles, GdalReadsATileWithTheFeaturesPostgisHasForItsBounds) {
    // z 7 tile 68/42 holds the fixture's vehicles around 13..14 E, 52 N.
    const int z = 7;
    const int x = 68;
    const int y = 42;
    const auto dir = std::filesystem::temp_directory_path() /
                     ("trackd-tiles-" + std::to_string(::getpid())) / std::to_string(z) /
                     std::to_string(x);
    std::filesystem::create_directories(dir);
    const auto res = read_->get("/tiles/vehicles/7/68/42.mvt");
    ASSERT_EQ(res.status, 200);
    const auto file = dir / (std::to_string(y) + ".mvt");
    std::ofstream(file, std::ios::binary) << res.body;

    const auto out = run_command("ogrinfo -ro -al -q -oo CLIP=NO " + shell_quote(file.string()));
    ASSERT_EQ(out.exit_code, 0) << out.output;
    // Times in RFC 3339, UTC, as the rest of the API writes them (in-1: 10:05:00 exactly).
    EXPECT_NE(out.output.find("last_updated (String) = 2025-06-01T10:05:00Z"), std::string::npos)
        << out.output;
    // CLIP=NO: also the features in the buffer. Per feature "vehicle_id (String) = in-1" ...
    // "POINT (1452685.7 6809163.3)".
    const std::regex feature_re(
        R"(vehicle_id \(String\) = (\S+)[\s\S]*?POINT \(([-\d.e+]+) ([-\d.e+]+)\))");
    std::map<std::string, std::pair<double, double>> read;
    for (auto it = std::sregex_iterator(out.output.begin(), out.output.end(), feature_re);
         it != std::sregex_iterator(); ++it) {
        read[(*it)[1]] = {std::stod((*it)[2]), std::stod((*it)[3])};
    }
    // PostGIS's features for the same bounds, in EPSG:3857 at the tile's resolution.
    const auto ref = sql(
        "WITH e AS (SELECT ST_TileEnvelope($1::int, $2::int, $3::int) AS env) "
        "SELECT vehicle_id, ST_XMin(env) + ST_X(g) * (ST_XMax(env) - ST_XMin(env)) / 4096, "
        "ST_YMax(env) - ST_Y(g) * (ST_YMax(env) - ST_YMin(env)) / 4096 FROM ("
        "SELECT vehicle_id, ST_AsMVTGeom(ST_Transform(geom, 3857), env, 4096, 64, true) AS g, env "
        "FROM trackd.vehicle_current_state, e WHERE ST_Y(geom) < 85.06 AND "
        "ST_Transform(geom, 3857) && ST_TileEnvelope($1::int, $2::int, $3::int, margin => 64.0 / "
        "4096)"
        ") f ORDER BY 1",
        {std::to_string(z), std::to_string(x), std::to_string(y)});
    // in-1, in-2, edge, out-1, out-2, ring, hole-edge, and hole (x 69.013: in the buffer).
    ASSERT_EQ(ref.rows(), 8);
    ASSERT_EQ(read.size(), static_cast<std::size_t>(ref.rows())) << out.output;
    for (int i = 0; i < ref.rows(); ++i) {
        const auto id = ref.at(i, 0);
        ASSERT_EQ(read.count(id), 1U) << id << "\n" << out.output;
        EXPECT_NEAR(read[id].first, std::stod(ref.at(i, 1)), 0.01) << id;
        EXPECT_NEAR(read[id].second, std::stod(ref.at(i, 2)), 0.01) << id;
    }
    std::filesystem::remove_all(dir.parent_path().parent_path());
}

TEST_F(Tiles, BadCoordinatesAreProblemDocumentsNamingTheParameter) {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"/tiles/vehicles/25/0/0.mvt", "z"},
        {"/tiles/vehicles/-1/0/0.mvt", "z"},
        {"/tiles/vehicles/3/8/0.mvt", "x"},
        {"/tiles/vehicles/3/0/8.mvt", "y"},
        {"/tiles/vehicles/3/a/0.mvt", "x"},
        {"/tiles/vehicles/3/0/1.png", "y"},
        {"/tiles/vehicles/3/0/.mvt", "y"},
        {"/tiles/vehicles/03x/0/0.mvt", "z"},
        {"/tiles/positions/3/0/0.mvt?datetime=yesterday", "datetime"},
        {"/tiles/vehicles/3/0/0.mvt?limit=3", "limit"},
    };
    for (const auto& [target, parameter] : cases) {
        const auto r = read_->get(target);
        EXPECT_EQ(r.status, 400) << target;
        EXPECT_EQ(r.header("content-type"), "application/problem+json") << target;
        EXPECT_EQ(std::string(r.json()["parameter"].get_string().value()), parameter) << target;
    }
    EXPECT_EQ(read_->get("/tiles/trucks/0/0/0.mvt").status, 404);
    EXPECT_EQ(read_->get("/tiles/trucks").status, 404);
    EXPECT_EQ(HttpClient(server_->port()).get("/tiles/vehicles/0/0/0.mvt").status, 401);
    EXPECT_EQ(HttpClient(server_->port(), "wrong").get("/tiles/vehicles/0/0/0.mvt").status, 401);
}

TEST_F(Tiles, EtagRevalidatesAndPositionsDefaultToTheLastFifteenMinutes) {
    const auto first = read_->get("/tiles/vehicles/0/0/0.mvt");
    ASSERT_EQ(first.status, 200);
    EXPECT_EQ(first.header("cache-control"), "private, no-cache");
    const auto again = read_->request("GET", "/tiles/vehicles/0/0/0.mvt", {}, {},
                                      {{"If-None-Match", first.header("etag")}});
    EXPECT_EQ(again.status, 304);
    EXPECT_EQ(again.body, "");
    EXPECT_EQ(again.header("etag"), first.header("etag"));
    sql("UPDATE trackd.vehicle_current_state SET speed_kmh = 99 WHERE vehicle_id = 'in-1'");
    const auto changed = read_->request("GET", "/tiles/vehicles/0/0/0.mvt", {}, {},
                                        {{"If-None-Match", first.header("etag")}});
    EXPECT_EQ(changed.status, 200);
    EXPECT_NE(changed.header("etag"), first.header("etag"));

    // The fixture's history is from 2025: nothing in the last 15 minutes, until a row is.
    EXPECT_EQ(read_->get("/tiles/positions/0/0/0.mvt").status, 204);
    sql("INSERT INTO trackd.vehicle_telemetry_history (vehicle_id, recorded_at, geom, "
        "ingest_batch_id, kafka_partition, kafka_offset) VALUES ('in-1', now() - interval '5 min', "
        "ST_SetSRID(ST_MakePoint(13.0, 52.0, 0), 4326), 9, 0, 300), ('in-1', now() - interval "
        "'20 min', ST_SetSRID(ST_MakePoint(13.0, 52.0, 0), 4326), 9, 0, 301)");
    const auto recent = read_->get("/tiles/positions/0/0/0.mvt");
    ASSERT_EQ(recent.status, 200);
    // PostGIS's answer for the last 15 minutes: offset 300 only.
    const auto ref = sql(reference_sql("positions", "recorded_at >= now() - interval '15 min'"),
                         {"0", "0", "0"});
    EXPECT_EQ(recent.body, unhex(ref.at(0, 0)));
    const auto count =
        sql("SELECT count(*) FROM trackd.vehicle_telemetry_history WHERE recorded_at >= now() - "
            "interval '15 min'");
    EXPECT_EQ(count.at(0, 0), "1");

    const auto tj = read_->get("/tiles/positions");
    ASSERT_EQ(tj.status, 200);
    EXPECT_EQ(std::string(tj.json()["tilejson"].get_string().value()), "3.0.0");
    EXPECT_EQ(
        std::string(tj.json()["tiles"].at(0).get_string().value()),
        "http://127.0.0.1:" + std::to_string(server_->port()) + "/tiles/positions/{z}/{x}/{y}.mvt");
    EXPECT_EQ(std::string(tj.json()["vector_layers"].at(0)["id"].get_string().value()),
              "positions");
}

TEST_F(Tiles, TheMapPageAndMaplibreAreServedFromTheBinary) {
    const HttpClient anonymous(server_->port());
    const auto page = anonymous.get("/map");
    ASSERT_EQ(page.status, 200);
    EXPECT_EQ(page.header("content-type"), "text/html; charset=utf-8");
    EXPECT_NE(page.header("content-security-policy").find("default-src 'self'"), std::string::npos);
    EXPECT_NE(page.body.find("/map/map.js"), std::string::npos);
    const auto file = [](const std::string& rel) {
        std::ifstream in(std::string(TRACKD_SOURCE_DIR) + "/web/" + rel, std::ios::binary);
        return std::string(std::istreambuf_iterator<char>(in), {});
    };
    // Byte for byte what npm installed (web/package-lock.json), as JavaScript modules.
    for (const auto& [path, rel] : std::vector<std::pair<std::string, std::string>>{
             {"/map/maplibre-gl.mjs", "node_modules/maplibre-gl/dist/maplibre-gl.mjs"},
             {"/map/maplibre-gl-worker.mjs?v=6.17.0",
              "node_modules/maplibre-gl/dist/maplibre-gl-worker.mjs"},
             {"/map/map.js", "map/map.js"}}) {
        const auto r = anonymous.get(path);
        ASSERT_EQ(r.status, 200) << path;
        EXPECT_EQ(r.header("content-type"), "text/javascript; charset=utf-8") << path;
        EXPECT_EQ(r.header("x-content-type-options"), "nosniff") << path;
        const auto expected = file(rel);
        EXPECT_GT(expected.size(), 1000U) << rel;
        EXPECT_TRUE(r.body == expected)
            << path << ": " << r.body.size() << " bytes, expected " << expected.size();
    }
    EXPECT_EQ(anonymous.get("/map/maplibre-gl.css").header("content-type"),
              "text/css; charset=utf-8");
    const auto again = anonymous.request("GET", "/map/maplibre-gl.mjs", {}, {},
                                         {{"If-None-Match", page.header("etag")}});
    EXPECT_EQ(again.status, 200);  // another file's tag
    const auto same =
        anonymous.request("GET", "/map", {}, {}, {{"If-None-Match", page.header("etag")}});
    EXPECT_EQ(same.status, 304);
    EXPECT_EQ(anonymous.get("/map/secrets.txt").status, 404);
    EXPECT_EQ(anonymous.get("/map/map.js?token=x").status, 400);
}

}  // namespace
}  // namespace trackd::test
