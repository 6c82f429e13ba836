// The live map page (/map) in a real browser: Debian's chromium, headless, driven by
// playwright-core (tests/browser/map_test.mjs), against a running trackd with the real
// PostgreSQL/PostGIS and Kafka and the simulated fleet. The page draws the vehicles the API
// reports in the viewport, redraws a vehicle that moved at its new place, shows a clicked
// vehicle's details and last hour, and the geofence event of the move in its ticker. The
// screenshot is kept in <build>/test-output/map/map.png.
#include <chrono>
#include <filesystem>
#include <regex>
#include <thread>

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "support/child_process.hpp"
#include "support/free_port.hpp"
#include "support/http_client.hpp"
#include "support/ingest_harness.hpp"
#include "support/positions.hpp"

namespace trackd::test {
namespace {

constexpr const char* kRead = "map-read-token-0123456789";
constexpr const char* kWrite = "map-write-token-0123456789";

bool wait_for(const std::function<bool()>& done, std::chrono::seconds timeout) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < until) {
        if (done()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
}

TEST(MapBrowser, DrawsWhatTheApiReportsFollowsAMoveAndShowsDetails) {
    IngestHarness h("map", 1);
    // 300 vehicles around Berlin (13.405, 52.52, 15 km), 10 positions each; then one of them
    // jumps 24 km east into zone "target", where no other vehicle is.
    constexpr int kVehicles = 300;
    constexpr int kMessages = 3000;
    const std::string vehicle = "veh-000001";
    const double to_lon = 13.755;
    const double to_lat = 52.52;
    ChildProcess fleet(h.fleet_command(kVehicles, kMessages, 0,
                                       {"--bad-share", "0", "--out-of-order-share", "0",
                                        "--duplicate-share", "0"}),
                       {}, h.dir() + "/fleet.log");
    ASSERT_EQ(fleet.wait(), 0) << IngestHarness::read_file(h.dir() + "/fleet.log");

    const unsigned short port = free_port();
    auto trackd = h.start_trackd({{"TRACKD_HTTP_ENABLED", "true"},
                                  {"TRACKD_HTTP_LISTEN", "127.0.0.1:" + std::to_string(port)},
                                  {"TRACKD_HTTP_TOKENS_DASHBOARD", std::string("read:") + kRead},
                                  {"TRACKD_HTTP_TOKENS_OPS", std::string("write:") + kWrite},
                                  // The move is a 24 km jump seconds later: not a GPS glitch here.
                                  {"TRACKD_VALIDATE_MAX_SPEED_KMH", "100000"},
                                  {"TRACKD_BATCH_MAX_MS", "200"}});
    ASSERT_TRUE(h.wait_drained(kMessages, std::chrono::seconds(60)))
        << IngestHarness::read_file(h.log_path());
    const HttpClient ops(port, kWrite);
    const auto zone = ops.request(
        "PUT", "/v1/geofences/target",
        R"({"type":"Polygon","coordinates":[[[13.745,52.51],[13.765,52.51],[13.765,52.53],)"
        R"([13.745,52.53],[13.745,52.51]]]})",
        "application/geo+json");
    ASSERT_TRUE(zone.status == 200 || zone.status == 201) << zone.status << " " << zone.body;

    const auto out = std::filesystem::path(TRACKD_BINARY_DIR) / "test-output" / "map";
    std::filesystem::remove_all(out);
    std::filesystem::create_directories(out);
    const std::string url = "http://127.0.0.1:" + std::to_string(port);
    ChildProcess browser(
        {"/usr/bin/env", "node", std::string(TRACKD_SOURCE_DIR) + "/tests/browser/map_test.mjs",
         "--url", url, "--token", kRead, "--out", out.string(), "--vehicle", vehicle, "--to",
         "13.755,52.52", "--bounds", "13.30,52.45,13.50,52.60"},
        {}, (out / "browser.log").string());
    const auto log = [&] { return IngestHarness::read_file((out / "browser.log").string()); };
    ASSERT_TRUE(wait_for(
        [&] { return std::filesystem::exists(out / "ready-to-move") || !browser.running(); },
        std::chrono::seconds(120)));
    ASSERT_TRUE(std::filesystem::exists(out / "ready-to-move")) << log();
    const auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
    produce_positions(h.topic(), {{vehicle, now_ms, to_lon, to_lat}});
    ASSERT_TRUE(h.wait_drained(kMessages + 1, std::chrono::seconds(60)))
        << IngestHarness::read_file(h.log_path());
    std::ofstream(out / "moved") << "";
    ASSERT_TRUE(wait_for([&] { return !browser.running(); }, std::chrono::seconds(120))) << log();
    EXPECT_EQ(browser.wait(), 0) << log();

    const std::string text = log();
    std::smatch m;
    ASSERT_TRUE(std::regex_search(text, m, std::regex(R"(RESULT (\{.*\}))"))) << text;
    // Every check passed, and the counts are the ones the API and the map agree on.
    EXPECT_EQ(text.find("map-test: FAIL"), std::string::npos) << text;
    std::smatch n;
    ASSERT_TRUE(
        std::regex_search(text, n, std::regex(R"("api_in_view":(\d+),"drawn_in_view":(\d+))")))
        << text;
    EXPECT_GT(std::stoi(n[1]), 20) << text;
    EXPECT_EQ(std::filesystem::exists(out / "map.png"), true);
    EXPECT_GT(std::filesystem::file_size(out / "map.png"), 20000U);
    std::cout << text;
}

}  // namespace
}  // namespace trackd::test
