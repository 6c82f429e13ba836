// Geofence enter/exit events end to end: positions produced to the real broker, trackd run,
// the trackd.geofence_events table and the live stream (Server-Sent Events) compared with the
// expected events (docs/ingest.md, "Geofence events"; docs/api.md, "Geofence events").
#include <memory>
#include <random>
#include <regex>
#include <thread>

#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "trackd/events/counters.hpp"
#include "trackd/events/geofence_detector.hpp"

#include "support/free_port.hpp"
#include "support/http_client.hpp"
#include "support/http_fixture.hpp"
#include "support/ingest_harness.hpp"
#include "support/positions.hpp"

namespace trackd::test {
namespace {

constexpr const char* kToken = "read-token-0123456789abcdef";

struct Msg {
    std::string vehicle;
    int t_min = 0;  // minutes after the test's base time (slow enough for the speed check)
    double lon = 0;
    double lat = 0;
};

void produce(const std::string& topic, const std::vector<Msg>& msgs, std::int64_t base_s) {
    std::vector<TestPosition> out;
    out.reserve(msgs.size());
    for (const auto& m : msgs)
        out.push_back({m.vehicle, (base_s + m.t_min * 60) * 1000, m.lon, m.lat});
    produce_positions(topic, out);
}

std::string format_time(std::int64_t epoch_s) {
    const auto t = static_cast<std::time_t>(epoch_s);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

// One Server-Sent Events message.
struct SseEvent {
    std::int64_t id = 0;
    std::string kind;
    std::string data;
};

// A minimal EventSource: connects, sends the request, parses messages from the raw stream.
class SseClient {
  public:
    SseClient(unsigned short port, const std::string& target, const std::string& last_event_id) {
        fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(port);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
        timeval tv{1, 0};  // reads wake up every second so that deadlines are checked
        ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        std::string req = "GET " + target +
                          " HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + kToken +
                          "\r\nAccept: text/event-stream\r\n";
        if (!last_event_id.empty()) req += "Last-Event-ID: " + last_event_id + "\r\n";
        req += "\r\n";
        if (connected_) ::send(fd_, req.data(), req.size(), MSG_NOSIGNAL);
    }
    ~SseClient() { ::close(fd_); }
    SseClient(const SseClient&) = delete;
    SseClient& operator=(const SseClient&) = delete;

    [[nodiscard]] bool connected() const { return connected_; }
    [[nodiscard]] const std::string& head() const { return head_; }

    // Reads until `count` events arrived in total or the deadline passed.
    std::vector<SseEvent>& read_until(std::size_t count, std::chrono::seconds timeout) {
        const auto until = std::chrono::steady_clock::now() + timeout;
        while (events_.size() < count && std::chrono::steady_clock::now() < until) {
            char buf[8192];
            const auto n = ::recv(fd_, buf, sizeof buf, 0);
            if (n == 0) break;    // closed
            if (n < 0) continue;  // the receive timeout
            raw_.append(buf, static_cast<size_t>(n));
            parse();
        }
        return events_;
    }
    [[nodiscard]] int comments() const { return comments_; }

  private:
    void parse() {
        if (head_.empty()) {
            const auto end = raw_.find("\r\n\r\n");
            if (end == std::string::npos) return;
            head_ = raw_.substr(0, end);
            raw_.erase(0, end + 4);
        }
        for (auto end = raw_.find("\n\n"); end != std::string::npos; end = raw_.find("\n\n")) {
            const std::string block = raw_.substr(0, end);
            raw_.erase(0, end + 2);
            SseEvent e;
            bool any = false;
            std::istringstream lines(block);
            for (std::string line; std::getline(lines, line);) {
                if (line.rfind(':', 0) == 0) {
                    ++comments_;
                } else if (line.rfind("id: ", 0) == 0) {
                    e.id = std::stoll(line.substr(4));
                    any = true;
                } else if (line.rfind("event: ", 0) == 0) {
                    e.kind = line.substr(7);
                } else if (line.rfind("data: ", 0) == 0) {
                    e.data = line.substr(6);
                }
            }
            if (any) events_.push_back(e);
        }
    }

    int fd_ = -1;
    bool connected_ = false;
    std::string raw_;
    std::string head_;
    std::vector<SseEvent> events_;
    int comments_ = 0;
};

// "vehicle zone kind t_min", one per event, in event_id order per vehicle.
std::vector<std::string> stored_events(const std::string& dsn, std::int64_t base_s) {
    db::Connection conn(dsn, "test");
    auto r = conn.query(
        "SELECT vehicle_id, zone_name, kind, (extract(epoch FROM event_time)::bigint - $1::bigint) "
        "/ 60 "
        "FROM trackd.geofence_events ORDER BY vehicle_id, event_id",
        {std::to_string(base_s)});
    std::vector<std::string> out;
    for (int i = 0; i < r.rows(); ++i) {
        out.push_back(r.at(i, 0) + " " + r.at(i, 1) + " " + r.at(i, 2) + " " + r.at(i, 3));
    }
    return out;
}

// Scripted paths through a set of zones, in two runs of trackd with a zone change between
// them; a stream client reads the first run's events, disconnects, and resumes with
// Last-Event-ID in the second run.
TEST(GeofenceEvents, ScriptedPathsGiveExactlyTheExpectedEventsAndTheStreamMissesNone) {
    IngestHarness h("geoev", 1);
    {
        db::Connection conn(h.db().dsn(), "test");
        conn.exec_script(R"SQL(
INSERT INTO trackd.geofence_zones (zone_name, fence_geom, dwell_s) VALUES
  -- two overlapping boxes
  ('a', ST_Multi(ST_MakeEnvelope(10.0, 50.0, 10.1, 50.1, 4326)), 0),
  ('b', ST_Multi(ST_MakeEnvelope(10.05, 50.0, 10.15, 50.1, 4326)), 0),
  -- a MultiPolygon with a hole in its first part
  ('donut', ST_GeomFromText('MULTIPOLYGON(((11 50, 11.2 50, 11.2 50.2, 11 50.2, 11 50),
      (11.05 50.05, 11.05 50.15, 11.15 50.15, 11.15 50.05, 11.05 50.05)),
      ((11.5 50, 11.6 50, 11.6 50.1, 11.5 50.1, 11.5 50)))', 4326), 0),
  -- boundary jitter: without and with debounce (30 min)
  ('fast', ST_Multi(ST_MakeEnvelope(12.2, 50.0, 12.3, 50.1, 4326)), 0),
  ('slow', ST_Multi(ST_MakeEnvelope(12.0, 50.0, 12.1, 50.1, 4326)), 1800),
  -- deleted between the runs while a vehicle is inside
  ('gone', ST_Multi(ST_MakeEnvelope(13.0, 50.0, 13.1, 50.1, 4326)), 0);
)SQL");
    }
    const auto base_s = std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count() -
                        7200;
    // Run 1, in the order produced (one partition: Kafka order).
    const std::vector<Msg> run1 = {
        // overlapping zones: a, a+b, b, none
        {"v-overlap", 0, 9.95, 50.05},
        {"v-overlap", 10, 10.02, 50.05},
        {"v-overlap", 20, 10.07, 50.05},
        {"v-overlap", 30, 10.12, 50.05},
        {"v-overlap", 40, 10.2, 50.05},
        // the donut: outer part, the hole, the second part, out
        {"v-donut", 0, 10.9, 50.1},
        {"v-donut", 10, 11.02, 50.1},
        {"v-donut", 20, 11.1, 50.1},
        {"v-donut", 30, 11.55, 50.05},
        {"v-donut", 40, 11.7, 50.05},
        // in and out within one batch
        {"v-quick", 0, 9.99, 50.05},
        {"v-quick", 1, 10.01, 50.05},
        {"v-quick", 2, 9.99, 50.05},
        // jitter on the east edge of "fast" (no debounce): every crossing counts
        {"v-jitter", 0, 12.2999, 50.05},
        {"v-jitter", 1, 12.3001, 50.05},
        {"v-jitter", 2, 12.2999, 50.05},
        {"v-jitter", 3, 12.3001, 50.05},
        // jitter on the east edge of "slow" (30 min): nothing, then inside since t=4 ...
        {"v-slow", 0, 12.0999, 50.05},
        {"v-slow", 1, 12.1001, 50.05},
        {"v-slow", 2, 12.0999, 50.05},
        {"v-slow", 3, 12.1001, 50.05},
        {"v-slow", 4, 12.0999, 50.05},
        {"v-slow", 10, 12.05, 50.05},
        // out of order: t=5 (inside a and b) arrives after t=10 and is too late to count
        {"v-ooo", 0, 9.9, 50.05},
        {"v-ooo", 10, 10.02, 50.05},
        {"v-ooo", 5, 10.06, 50.05},
        {"v-ooo", 20, 9.9, 50.05},
        // inside "gone" when the run ends; parked where "late" will be created
        {"v-gone", 0, 13.05, 50.05},
        {"v-parked", 0, 14.05, 50.05},
    };
    // Run 2: "gone" deleted, "late" created over v-parked.
    const std::vector<Msg> run2 = {
        // ... confirmed at t=40 (36 min after t=4); then leaves: out 50, back 55, out 60..95
        {"v-slow", 40, 12.05, 50.05},
        {"v-slow", 50, 12.15, 50.05},
        {"v-slow", 55, 12.05, 50.05},
        {"v-slow", 60, 12.15, 50.05},
        {"v-slow", 95, 12.15, 50.05},
        // older than its committed t=20 (and inside a): history only
        {"v-ooo", 15, 10.02, 50.05},
        {"v-ooo", 30, 10.02, 50.05},
        {"v-gone", 10, 13.5, 50.05},
        {"v-parked", 10, 14.05, 50.05},
        {"v-overlap", 50, 10.07, 50.05},
    };
    const std::vector<std::string> expected1 = {
        "v-donut donut enter 10", "v-donut donut exit 20", "v-donut donut enter 30",
        "v-donut donut exit 40",  "v-gone gone enter 0",   "v-jitter fast enter 0",
        "v-jitter fast exit 1",   "v-jitter fast enter 2", "v-jitter fast exit 3",
        "v-ooo a enter 10",       "v-ooo a exit 20",       "v-overlap a enter 10",
        "v-overlap b enter 20",   "v-overlap a exit 30",   "v-overlap b exit 40",
        "v-quick a enter 1",      "v-quick a exit 2",
    };
    const std::vector<std::string> expected_all = {
        "v-donut donut enter 10", "v-donut donut exit 20", "v-donut donut enter 30",
        "v-donut donut exit 40",  "v-gone gone enter 0",   "v-jitter fast enter 0",
        "v-jitter fast exit 1",   "v-jitter fast enter 2", "v-jitter fast exit 3",
        "v-ooo a enter 10",       "v-ooo a exit 20",       "v-ooo a enter 30",
        "v-overlap a enter 10",   "v-overlap b enter 20",  "v-overlap a exit 30",
        "v-overlap b exit 40",    "v-overlap a enter 50",  "v-overlap b enter 50",
        "v-parked late enter 10", "v-quick a enter 1",     "v-quick a exit 2",
        "v-slow slow enter 4",    "v-slow slow exit 60",
    };

    const unsigned short port = free_port();
    const std::map<std::string, std::string> env = {
        {"TRACKD_HTTP_ENABLED", "true"},
        {"TRACKD_HTTP_LISTEN", "127.0.0.1:" + std::to_string(port)},
        {"TRACKD_HTTP_TOKENS_TEST", std::string("read:") + kToken},
        {"TRACKD_BATCH_MAX_MS", "1000"}};
    auto wait_http = [&] {
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        while (std::chrono::steady_clock::now() < until) {
            try {
                if (HttpClient(port).get("/healthz").status == 200) return true;
            } catch (const std::exception&) {  // NOLINT(bugprone-empty-catch): not up yet
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        return false;
    };

    produce(h.topic(), run1, base_s);
    auto trackd = h.start_trackd(env);
    ASSERT_TRUE(wait_http()) << IngestHarness::read_file(h.log_path());
    // From the beginning, by the query parameter.
    SseClient first(port, "/v1/events/stream?last_event_id=0", "");
    ASSERT_TRUE(h.wait_drained(static_cast<std::int64_t>(run1.size()), std::chrono::seconds(60)))
        << IngestHarness::read_file(h.log_path());
    EXPECT_EQ(stored_events(h.db().dsn(), base_s), expected1);
    ASSERT_TRUE(first.connected());
    const auto& seen1 = first.read_until(expected1.size(), std::chrono::seconds(60));
    EXPECT_NE(first.head().find("200"), std::string::npos) << first.head();
    EXPECT_NE(first.head().find("text/event-stream"), std::string::npos) << first.head();
    ASSERT_EQ(seen1.size(), expected1.size());
    const std::int64_t last_seen = seen1.back().id;
    trackd->kill(SIGTERM);
    ASSERT_TRUE(trackd->wait_for(std::chrono::seconds(15)));

    {
        db::Connection conn(h.db().dsn(), "test");
        // What DELETE /v1/geofences/gone does, and a new zone around a parked vehicle.
        conn.exec_script(
            "WITH z AS (DELETE FROM trackd.geofence_zones WHERE zone_name = 'gone' RETURNING "
            "zone_id) DELETE FROM trackd.geofence_vehicle_state WHERE zone_id IN (SELECT zone_id "
            "FROM z);"
            "INSERT INTO trackd.geofence_zones (zone_name, fence_geom) VALUES ('late', "
            "ST_Multi(ST_MakeEnvelope(14.0, 50.0, 14.1, 50.1, 4326)));");
    }
    produce(h.topic(), run2, base_s);
    trackd = h.start_trackd(env);
    ASSERT_TRUE(wait_http()) << IngestHarness::read_file(h.log_path());
    ASSERT_TRUE(h.wait_drained(static_cast<std::int64_t>(run1.size() + run2.size()),
                               std::chrono::seconds(60)))
        << IngestHarness::read_file(h.log_path());
    EXPECT_EQ(stored_events(h.db().dsn(), base_s), expected_all);

    // Resume: the header, as EventSource sends it.
    SseClient second(port, "/v1/events/stream", std::to_string(last_seen));
    const auto& seen2 =
        second.read_until(expected_all.size() - expected1.size(), std::chrono::seconds(60));
    ASSERT_EQ(seen2.size(), expected_all.size() - expected1.size());
    // Every event exactly once, ids 1..N in order, each as stored.
    db::Connection conn(h.db().dsn(), "test");
    auto rows = conn.query(
        "SELECT event_id, kind, vehicle_id, zone_name FROM trackd.geofence_events "
        "ORDER BY event_id");
    ASSERT_EQ(static_cast<size_t>(rows.rows()), expected_all.size());
    std::vector<SseEvent> seen = seen1;
    seen.insert(seen.end(), seen2.begin(), seen2.end());
    for (int i = 0; i < rows.rows(); ++i) {
        const auto& e = seen[static_cast<size_t>(i)];
        EXPECT_EQ(e.id, i + 1);
        EXPECT_EQ(std::to_string(e.id), rows.at(i, 0));
        EXPECT_EQ(e.kind, rows.at(i, 1));
        EXPECT_NE(e.data.find("\"vehicle_id\":\"" + rows.at(i, 2) + "\""), std::string::npos)
            << e.data;
        EXPECT_NE(e.data.find("\"zone_name\":\"" + rows.at(i, 3) + "\""), std::string::npos)
            << e.data;
    }
    // The deleted zone's state went with it; nothing stayed behind for v-gone.
    EXPECT_EQ(conn.query("SELECT count(*) FROM trackd.geofence_vehicle_state WHERE vehicle_id = "
                         "'v-gone'")
                  .at(0, 0),
              "0");
    // History keeps the late positions that made no events.
    EXPECT_EQ(conn.query("SELECT count(*) FROM trackd.vehicle_telemetry_history WHERE "
                         "vehicle_id = 'v-ooo'")
                  .at(0, 0),
              "6");

    // The list endpoints.
    HttpClient api(port, kToken);
    auto zone = api.get("/v1/geofences/a/events");
    ASSERT_EQ(zone.status, 200) << zone.body;
    EXPECT_EQ(int64_t(zone.json()["numberReturned"]), 8);
    auto ranged = api.get("/v1/vehicles/v-overlap/events?from=" + format_time(base_s + 15 * 60) +
                          "&to=" + format_time(base_s + 40 * 60) + "&limit=2");
    ASSERT_EQ(ranged.status, 200) << ranged.body;
    EXPECT_EQ(int64_t(ranged.json()["numberReturned"]), 2);
    const auto next = link(ranged.json(), "next");
    ASSERT_FALSE(next.empty()) << ranged.body;
    auto page2 = api.get(path_of(next));
    ASSERT_EQ(page2.status, 200) << page2.body;
    EXPECT_EQ(int64_t(page2.json()["numberReturned"]), 1);  // b enter 20, a exit 30 | b exit 40
    EXPECT_EQ(str(page2.json()["features"].at(0)["properties"]["kind"]), "exit");
    EXPECT_EQ(api.get("/v1/vehicles/v-overlap/events?from=x").status, 400);
    EXPECT_EQ(
        SseClient(port, "/v1/events/stream", "abc").read_until(1, std::chrono::seconds(5)).size(),
        0U);

    trackd->kill(SIGTERM);
    ASSERT_TRUE(trackd->wait_for(std::chrono::seconds(15)))
        << "trackd did not stop with a stream open";
    EXPECT_EQ(trackd->exit_code(), 0) << IngestHarness::read_file(h.log_path());
}

// The SIGKILL crash test of the ingest, with zones: trackd is killed at random moments while the
// fleet produces (in order: no re-sends), and the events must be exactly what the detector gives
// over each vehicle's accepted positions in time order, with membership from PostGIS: none
// duplicated, none missing, ids 1..N.
TEST(GeofenceEvents, SurvivesRepeatedSigkillWithoutDuplicatedOrMissingEvents) {
    constexpr int kVehicles = 300;
    constexpr int kMessages = 40000;
    IngestHarness h("geocrash", 4);
    {
        db::Connection conn(h.db().dsn(), "test");
        // Stripes across the fleet's city, north-south and east-west, some debounced (20 s).
        conn.exec_script(R"SQL(
INSERT INTO trackd.geofence_zones (zone_name, fence_geom, dwell_s)
SELECT 'ns-' || i, ST_Multi(ST_MakeEnvelope(13.18 + i * 0.011, 52.38, 13.184 + i * 0.011, 52.66,
       4326)), CASE WHEN i % 3 = 0 THEN 20 ELSE 0 END
FROM generate_series(0, 40) i;
INSERT INTO trackd.geofence_zones (zone_name, fence_geom, dwell_s)
SELECT 'ew-' || j, ST_Multi(ST_MakeEnvelope(13.18, 52.38 + j * 0.009, 13.63, 52.383 + j * 0.009,
       4326)), CASE WHEN j % 4 = 0 THEN 20 ELSE 0 END
FROM generate_series(0, 30) j;
)SQL");
    }
    const std::map<std::string, std::string> env = {
        {"TRACKD_KAFKA_INSTANCE_ID", "geocrash-instance"}};
    auto cmd = h.fleet_command(kVehicles, kMessages, 4000);
    for (const char* a :
         {"--out-of-order-share", "0", "--duplicate-share", "0", "--interval-ms", "5000"}) {
        cmd.emplace_back(a);
    }
    ChildProcess fleet(cmd, {}, ::testing::TempDir() + "geocrash-fleet.log");
    const auto killed = h.kill_and_restart_until_drained(fleet, kMessages, env, 4, 4242);
    ASSERT_TRUE(killed.drained);
    h.check_accounting(load_manifest(h.manifest_path()));

    db::Connection conn(h.db().dsn(), "test");
    std::map<std::string, std::int64_t> dwell_us;
    auto z = conn.query("SELECT zone_name, dwell_s FROM trackd.geofence_zones");
    for (int i = 0; i < z.rows(); ++i) dwell_us[z.at(i, 0)] = std::stoll(z.at(i, 1)) * 1000000;
    // Every accepted position in time order, with the zones covering it.
    auto p = conn.query(
        "SELECT h.vehicle_id, (extract(epoch FROM h.recorded_at) * 1000000)::bigint, "
        "ST_X(h.geom), ST_Y(h.geom), h.kafka_partition, h.kafka_offset, "
        "coalesce(string_agg(z.zone_name, ','), '') "
        "FROM trackd.vehicle_telemetry_history h LEFT JOIN trackd.geofence_zones z "
        "ON ST_Covers(z.fence_geom, h.geom) GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1, 2, 6, 5");
    std::map<std::string, std::vector<events::Step>> steps_of;
    for (int i = 0; i < p.rows(); ++i) {
        events::Step s{{std::stoll(p.at(i, 1)), std::stod(p.at(i, 2)), std::stod(p.at(i, 3)),
                        std::stoi(p.at(i, 4)), std::stoll(p.at(i, 5))},
                       {}};
        std::istringstream names(p.at(i, 6));
        for (std::string n; std::getline(names, n, ',');) s.zones.insert(n);
        steps_of[p.at(i, 0)].push_back(std::move(s));
    }
    std::vector<std::string> expected;
    for (auto& [vehicle, all] : steps_of) {
        std::vector<events::OrderKey> times;
        for (const auto& s : all)
            times.push_back(events::OrderKey{s.sample.time_us, s.sample.offset});
        std::vector<events::Step> steps;
        for (const auto i : events::advancing(std::nullopt, times)) steps.push_back(all[i]);
        for (const auto& e : events::detect({}, steps, dwell_us).events) {
            expected.push_back(vehicle + " " + e.zone + " " + events::kind_name(e.kind) + " " +
                               std::to_string(e.at.time_us) + " " + std::to_string(e.at.partition) +
                               "/" + std::to_string(e.at.offset));
        }
    }
    auto r = conn.query(
        "SELECT vehicle_id, zone_name, kind, (extract(epoch FROM event_time) * 1000000)::bigint, "
        "kafka_partition, kafka_offset FROM trackd.geofence_events ORDER BY vehicle_id, event_id");
    std::vector<std::string> stored;
    for (int i = 0; i < r.rows(); ++i) {
        stored.push_back(r.at(i, 0) + " " + r.at(i, 1) + " " + r.at(i, 2) + " " + r.at(i, 3) + " " +
                         r.at(i, 4) + "/" + r.at(i, 5));
    }
    ASSERT_GT(expected.size(), 100U) << "the paths should cross the stripes often";
    EXPECT_EQ(stored.size(), expected.size());
    EXPECT_EQ(stored, expected);
    auto ids = conn.query(
        "SELECT count(*), count(DISTINCT event_id), min(event_id), max(event_id), "
        "(SELECT last_event_id FROM trackd.geofence_event_ids) FROM trackd.geofence_events");
    EXPECT_EQ(ids.at(0, 0), std::to_string(expected.size()));
    EXPECT_EQ(ids.at(0, 1), ids.at(0, 0));
    EXPECT_EQ(ids.at(0, 2), "1");
    EXPECT_EQ(ids.at(0, 3), ids.at(0, 0));
    EXPECT_EQ(ids.at(0, 4), ids.at(0, 0));
    std::printf("[ measured ] %zu events, trackd killed %d times\n", expected.size(), killed.kills);
}

// The zone API's part: the dwell time is set, kept and checked; deleting a zone deletes its
// detection state but not its events.
class GeofenceEventsApi : public HttpFixture {};

TEST_F(GeofenceEventsApi, DwellTimeAndZoneDeletion) {
    const std::string square =
        R"({"type":"Polygon","coordinates":[[[10,50],[10.1,50],[10.1,50.1],[10,50.1],[10,50]]]})";
    auto created =
        write_->request("PUT", "/v1/geofences/depot?dwell_s=30", square, "application/geo+json");
    ASSERT_EQ(created.status, 201) << created.body;
    EXPECT_EQ(int64_t(created.json()["properties"]["dwell_s"]), 30);
    auto replaced = write_->request("PUT", "/v1/geofences/depot", square, "application/geo+json");
    ASSERT_EQ(replaced.status, 200) << replaced.body;
    EXPECT_EQ(int64_t(replaced.json()["properties"]["dwell_s"]), 30) << "kept when not given";
    EXPECT_EQ(int64_t(read_->get("/v1/geofences/depot").json()["properties"]["dwell_s"]), 30);
    for (const char* bad : {"-1", "1.5", "86401", "x"}) {
        auto r = write_->request("PUT", std::string("/v1/geofences/depot?dwell_s=") + bad, square,
                                 "application/geo+json");
        EXPECT_EQ(r.status, 400) << bad;
        EXPECT_EQ(str(r.json()["parameter"]), "dwell_s") << bad;
    }
    EXPECT_EQ(int64_t(read_->get("/v1/geofences/square").json()["properties"]["dwell_s"]), 0);

    sql("INSERT INTO trackd.geofence_vehicle_state (vehicle_id, zone_id, inside, ingest_batch_id) "
        "SELECT 'bus-1', zone_id, true, 1 FROM trackd.geofence_zones WHERE zone_name = 'depot'");
    sql("INSERT INTO trackd.geofence_events (event_id, vehicle_id, zone_name, kind, event_time, "
        "geom, kafka_partition, kafka_offset, ingest_batch_id) VALUES (1, 'bus-1', 'depot', "
        "'enter', '2026-01-01T00:00:00Z', ST_SetSRID(ST_MakePoint(10.05, 50.05), 4326), 0, 7, 1)");
    EXPECT_EQ(write_->request("DELETE", "/v1/geofences/depot").status, 204);
    EXPECT_EQ(sql("SELECT count(*) FROM trackd.geofence_vehicle_state").at(0, 0), "0");
    auto events = read_->get("/v1/geofences/depot/events");
    ASSERT_EQ(events.status, 200) << events.body;
    EXPECT_EQ(int64_t(events.json()["numberReturned"]), 1) << "events outlive their zone";
    EXPECT_EQ(str(events.json()["features"].at(0)["properties"]["event_time"]),
              "2026-01-01T00:00:00Z");
    EXPECT_EQ(read_->get("/v1/vehicles/bus-1/events?after=-1").status, 400);
    // after=0 starts at the first event; after the last one the page is empty; an id of no
    // event is a 400 naming `after`, not an empty page that reads as "no more".
    EXPECT_EQ(int64_t(read_->get("/v1/vehicles/bus-1/events?after=0").json()["numberReturned"]), 1);
    EXPECT_EQ(int64_t(read_->get("/v1/vehicles/bus-1/events?after=1").json()["numberReturned"]), 0);
    const auto unknown = read_->get("/v1/vehicles/bus-1/events?after=999");
    EXPECT_EQ(unknown.status, 400) << unknown.body;
    EXPECT_EQ(str(unknown.json()["parameter"]), "after");
    EXPECT_NE(str(unknown.json()["detail"]).find("'999' is the id of no event"), std::string::npos)
        << unknown.body;
    EXPECT_EQ(
        read_->get("/v1/vehicles/bus-1/events?from=2026-02-01T00:00:00Z&to=2026-01-01T00:00:00Z")
            .status,
        400);
    EXPECT_EQ(int64_t(read_->get("/v1/vehicles/bus-1/events?to=2025-12-31T00:00:00Z")
                          .json()["numberReturned"]),
              0);
}

// A client that goes while its stream's poll waits for the database: the stream ends once the
// answer comes, and the poll, which runs on the stream's members, never outlives them (the
// ASan build fails here if it does). The poll is held by a lock on the table it reads.
TEST_F(GeofenceEventsApi, AClientGoneWhileTheStreamWaitsForTheDatabaseEndsItCleanly) {
    const double open_before = events::stream_clients_open().value();
    auto client = std::make_unique<SseClient>(server_->port(), "/v1/events/stream", "");
    ASSERT_TRUE(client->connected());
    client->read_until(1, std::chrono::seconds(1));  // the head; no event comes
    ASSERT_NE(client->head().find("200"), std::string::npos) << client->head();
    EXPECT_EQ(events::stream_clients_open().value(), open_before + 1);

    db::Connection holder(db_.dsn(), "test lock holder");
    holder.exec_script("BEGIN; LOCK TABLE trackd.geofence_event_ids IN ACCESS EXCLUSIVE MODE");
    // The stream's next poll (every 250 ms) now waits for the lock.
    bool waiting = false;
    for (int i = 0; i < 100 && !waiting; ++i) {
        waiting =
            sql("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock' AND query LIKE '%FROM trackd.geofence_event_ids%'")
                .at(0, 0) == "1";
        if (!waiting) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ASSERT_TRUE(waiting) << "the stream's poll never reached the locked table";

    client.reset();  // the client goes; the server sees it while the poll still waits
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    holder.exec_script("COMMIT");

    // The poll's answer arrives for a stream whose client is gone: the stream ends.
    for (int i = 0; i < 100 && events::stream_clients_open().value() != open_before; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    EXPECT_EQ(events::stream_clients_open().value(), open_before);
    // And the server goes on: a new stream gets an event stored afterwards.
    SseClient next(server_->port(), "/v1/events/stream", "");
    next.read_until(1, std::chrono::seconds(1));
    sql("INSERT INTO trackd.geofence_events (event_id, vehicle_id, zone_name, kind, event_time, "
        "geom, kafka_partition, kafka_offset, ingest_batch_id) VALUES (1, 'bus-1', 'square', "
        "'enter', '2026-01-01T00:00:00Z', ST_SetSRID(ST_MakePoint(10.05, 50.05), 4326), 0, 7, 1)");
    sql("UPDATE trackd.geofence_event_ids SET last_event_id = 1");
    const auto& got = next.read_until(1, std::chrono::seconds(10));
    ASSERT_EQ(got.size(), 1U);
    EXPECT_EQ(got[0].id, 1);
    EXPECT_EQ(got[0].kind, "enter");
    EXPECT_EQ(read_->get("/v1/geofences/square").status, 200);
}

}  // namespace
}  // namespace trackd::test
