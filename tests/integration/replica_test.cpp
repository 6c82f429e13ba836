// Reads from a streaming replica (http.pg_dsn) against the real local primary and its replica
// (scripts/pg-replica.sh, pg_basebackup -R -X stream): the API answers from the replica, geofence
// writes go to the primary, and a paused replay (pg_wal_replay_pause) shows in
// trackd_http_replica_lag_seconds and in /readyz until it resumes. SERIAL: it pauses the shared
// replica's replay.
#include <chrono>
#include <regex>
#include <thread>

#include <gtest/gtest.h>

#include "support/http_fixture.hpp"
#include "support/services.hpp"

namespace trackd::test {
namespace {

bool eventually(const std::function<bool()>& done) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < until) {
        if (done()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
}

class Replica : public HttpFixture {
  protected:
    void SetUp() override {
        // The test database and its fixture, as the replica has replayed them.
        ASSERT_TRUE(eventually([&] {
            try {
                return replica("SELECT count(*) FROM trackd.vehicle_current_state").at(0, 0) ==
                       "46";
            } catch (const db::DbError&) {
                return false;  // not there yet
            }
        }));
        start([&](config::Config& c) {
            c.http.pg_dsn = replica_dsn();
            c.http.replica_max_lag_ms = 1000;
        });
    }
    // Replay is paused for the whole replica, which the other test of this fixture reads too
    // (ctest -j runs them side by side): only the test that paused it resumes it, even when it
    // failed half way.
    void TearDown() override {
        if (paused_) replica("SELECT pg_wal_replay_resume()");
    }
    void pause_replay() {
        paused_ = true;
        replica("SELECT pg_wal_replay_pause()");
    }

    [[nodiscard]] std::string replica_dsn() const {
        const std::string admin = pg_replica_admin_dsn();
        return admin.substr(0, admin.rfind('/') + 1) + db_.name();
    }
    db::Result replica(const std::string& text) {
        db::Connection conn(replica_dsn(), "test");
        return conn.query(text);
    }
    // trackd_http_replica_lag_seconds as /metrics reports it.
    double lag_metric() {
        const auto r = read_->get("/metrics");
        std::smatch m;
        if (!std::regex_search(r.body, m,
                               std::regex(R"(\ntrackd_http_replica_lag_seconds ([0-9.e+-]+))"))) {
            ADD_FAILURE() << r.body;
            return -1;
        }
        return std::stod(m[1]);
    }
    std::string speed_of_in_1() {
        return std::to_string(
            read_->get("/v1/vehicles/in-1").json()["properties"]["speed_kmh"].get_double().value());
    }

  private:
    bool paused_ = false;
};

TEST_F(Replica, ReadsFromTheReplicaWritesToThePrimaryAndAPausedReplayShows) {
    const std::string connections =
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND "
        "application_name = 'trackd http'";
    ASSERT_EQ(read_->get("/v1/vehicles/in-1").status, 200);
    EXPECT_NE(replica(connections).at(0, 0), "0");
    EXPECT_EQ(sql(connections).at(0, 0), "0");  // nothing was written yet
    ASSERT_TRUE(eventually([&] { return read_->get("/readyz").status == 200; }));
    // The replica replays the whole cluster, which the tests beside this one write to: it can
    // be a moment behind what it received.
    ASSERT_TRUE(eventually([&] { return lag_metric() == 0.0; }));

    // Replay paused: the primary moves on, the API still sees the replica's rows.
    pause_replay();
    sql("UPDATE trackd.vehicle_current_state SET speed_kmh = 99 WHERE vehicle_id = 'in-1'");
    EXPECT_EQ(speed_of_in_1(), std::to_string(42.5));
    const auto put = write_->request(
        "PUT", "/v1/geofences/late",
        R"({"type":"Polygon","coordinates":[[[13,52],[13.1,52],[13.1,52.1],[13,52.1],[13,52]]]})",
        "application/geo+json");
    EXPECT_EQ(put.status, 201) << put.body;
    EXPECT_EQ(sql("SELECT count(*) FROM trackd.geofence_zones WHERE zone_name = 'late'").at(0, 0),
              "1");
    EXPECT_EQ(sql(connections).at(0, 0), "1");                // the write pool's one connection
    EXPECT_EQ(read_->get("/v1/geofences/late").status, 404);  // not replayed yet

    // The lag grows past http.replica_max_lag_ms (1000): /readyz says so, and the metric.
    ASSERT_TRUE(eventually([&] { return read_->get("/readyz").status == 503; }));
    const auto ready = read_->get("/readyz");
    EXPECT_NE(std::string(ready.json()["detail"].get_string().value())
                  .find("more than http.replica_max_lag_ms (1000 ms)"),
              std::string::npos)
        << ready.body;
    EXPECT_GT(lag_metric(), 1.0);
    EXPECT_EQ(replica("SELECT pg_get_wal_replay_pause_state()").at(0, 0), "paused");

    // Resumed: the replica catches up, the lag is 0 again (received = replayed), ready.
    replica("SELECT pg_wal_replay_resume()");
    ASSERT_TRUE(eventually([&] { return speed_of_in_1() == std::to_string(99.0); }));
    // (the zone was committed after the update: it may be replayed a moment later)
    EXPECT_TRUE(eventually([&] { return read_->get("/v1/geofences/late").status == 200; }));
    ASSERT_TRUE(eventually([&] { return read_->get("/readyz").status == 200; }));
    ASSERT_TRUE(eventually([&] { return lag_metric() == 0.0; }));
}

TEST_F(Replica, AReadReplicaThatIsNotThereIsUnready) {
    start([&](config::Config& c) { c.http.pg_dsn = "postgresql://postgres@127.0.0.1:1/none"; });
    EXPECT_EQ(read_->get("/readyz").status, 503);
    EXPECT_EQ(read_->get("/v1/vehicles/in-1").status, 503);
}

}  // namespace
}  // namespace trackd::test
