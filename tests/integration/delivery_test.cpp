// The edges of the delivery promise (docs/reliability.md) against the real broker and PostGIS:
// a second consumer group on the same topic and database, equal timestamps batched in
// different ways, and messages Kafka deleted before trackd read them.
#include <cstdio>

#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>

#include "support/ingest_harness.hpp"
#include "support/log_wait.hpp"
#include "support/positions.hpp"
#include "support/tcp_relay.hpp"

namespace trackd::test {
namespace {

std::int64_t now_s() {
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

using Msg = TestPosition;

void produce(const std::string& topic, const std::vector<Msg>& msgs) {
    produce_positions(topic, msgs);
}

// Kafka's DeleteRecords, as retention does it: the log of `partition` starts at `before` after.
void delete_records_before(const std::string& topic, std::int32_t partition, std::int64_t before) {
    char err[512];
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "bootstrap.servers", kafka_brokers().c_str(), err, sizeof err);
    rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    ASSERT_NE(rk, nullptr) << err;
    rd_kafka_topic_partition_list_t* offsets = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(offsets, topic.c_str(), partition)->offset = before;
    rd_kafka_DeleteRecords_t* del = rd_kafka_DeleteRecords_new(offsets);
    rd_kafka_topic_partition_list_destroy(offsets);
    rd_kafka_queue_t* q = rd_kafka_queue_new(rk);
    rd_kafka_DeleteRecords(rk, &del, 1, nullptr, q);
    rd_kafka_event_t* ev = rd_kafka_queue_poll(q, 30000);
    ASSERT_NE(ev, nullptr) << "DeleteRecords timed out";
    ASSERT_EQ(rd_kafka_event_error(ev), RD_KAFKA_RESP_ERR_NO_ERROR)
        << rd_kafka_event_error_string(ev);
    const auto* result =
        rd_kafka_DeleteRecords_result_offsets(rd_kafka_event_DeleteRecords_result(ev));
    ASSERT_EQ(result->cnt, 1);
    EXPECT_EQ(result->elems[0].err, RD_KAFKA_RESP_ERR_NO_ERROR);
    EXPECT_EQ(result->elems[0].offset, before);
    rd_kafka_event_destroy(ev);
    rd_kafka_DeleteRecords_destroy(del);
    rd_kafka_queue_destroy(q);
    rd_kafka_destroy(rk);
}

std::string one_value(const TestDatabase& db, const std::string& sql) {
    db::Connection conn(db.dsn(), "test");
    return conn.query(sql).at(0, 0);
}

// A renamed kafka.group would read the topic from its start and store every message again:
// trackd refuses to start, naming the group that owns the topic here and the fix; after the
// fix (the offsets moved to the new name) it goes on where the old group stopped.
TEST(Delivery, ARenamedGroupRefusesToStartUntilTheOffsetsMove) {
    IngestHarness h("rename", 2);
    h.produce(50, 2000);
    const auto manifest = load_manifest(h.manifest_path());
    {
        auto trackd = h.start_trackd();
        ASSERT_TRUE(h.wait_drained(2000, std::chrono::seconds(120)))
            << IngestHarness::read_file(h.log_path());
        trackd->kill(SIGTERM);
        ASSERT_TRUE(trackd->wait_for(std::chrono::seconds(30)));
    }
    h.check_accounting(manifest);

    const std::string renamed_log = h.dir() + "/renamed.log";
    auto renamed = h.start_trackd({{"TRACKD_KAFKA_GROUP", "trackd-rename-v2"}}, renamed_log);
    ASSERT_TRUE(renamed->wait_for(std::chrono::seconds(60))) << "trackd should refuse to start";
    EXPECT_EQ(renamed->exit_code(), 1);
    const auto log = IngestHarness::read_file(renamed_log);
    EXPECT_NE(log.find("kafka.group: this database already holds the offsets of topic '" +
                       h.topic() + "' for consumer group 'trackd-rename'"),
              std::string::npos)
        << log;
    EXPECT_NE(log.find("UPDATE trackd.kafka_offsets SET consumer_group = 'trackd-rename-v2' "
                       "WHERE consumer_group = 'trackd-rename'"),
              std::string::npos)
        << log;
    h.check_accounting(manifest);  // nothing stored twice

    // The fix the message names: the new group takes the old one's offsets.
    {
        db::Connection conn(h.db().dsn(), "test");
        conn.query(
            "UPDATE trackd.kafka_offsets SET consumer_group = 'trackd-rename-v2' "
            "WHERE consumer_group = 'trackd-rename' AND topic = $1",
            {h.topic()});
    }
    auto moved = h.start_trackd({{"TRACKD_KAFKA_GROUP", "trackd-rename-v2"}}, renamed_log);
    // It claims the two partitions (epochs move on) and reads nothing again.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (one_value(h.db(),
                     "SELECT count(*) FROM trackd.kafka_offsets WHERE owner_epoch >= 2 "
                     "AND consumer_group = 'trackd-rename-v2'") != "2" &&
           std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    std::this_thread::sleep_for(std::chrono::seconds(2));
    moved->kill(SIGTERM);
    ASSERT_TRUE(moved->wait_for(std::chrono::seconds(30)));
    EXPECT_EQ(moved->exit_code(), 0) << IngestHarness::read_file(renamed_log);
    h.check_accounting(manifest);
}

// Positions of one vehicle with equal timestamps: trackd's one total order is (recorded_at,
// Kafka offset), so the later message is the vehicle's latest in the current state, in the
// validator and in geofence detection, whatever the batch size.
TEST(Delivery, EqualTimestampsGiveTheSameTablesAtBatchSizes1And20000) {
    const std::int64_t base_ms = (now_s() - 3600) * 1000;
    std::vector<Msg> msgs;
    // 20 vehicles, each 30 positions moving east across the fence line at lon 13.4005, in
    // groups of three that share one timestamp (10 s apart): ~8 m a step, far below the
    // speed limit even when two share a time.
    for (int step = 0; step < 30; ++step) {
        for (int v = 0; v < 20; ++v) {
            const double lon = 13.4 + 0.0001 * step;
            const double lat = 52.5 + 0.001 * v;
            msgs.push_back(
                Msg{"veh-eq-" + std::to_string(v), base_ms + (step / 3) * 10000, lon, lat});
        }
    }
    const char* zone =
        "INSERT INTO trackd.geofence_zones (zone_name, fence_geom, dwell_s) VALUES ('east', "
        "ST_Multi(ST_MakeEnvelope(13.4005, 52.0, 14.0, 53.0, 4326)), 0)";
    struct Run {
        std::unique_ptr<IngestHarness> h;
        std::string current;
        std::string geofence_state;
        std::string events;
        std::string history;
    };
    Run runs[2];
    const char* sizes[2] = {"1", "20000"};
    for (int i = 0; i < 2; ++i) {
        auto& r = runs[i];
        r.h = std::make_unique<IngestHarness>(std::string("equal") + sizes[i], 1);
        {
            db::Connection conn(r.h->db().dsn(), "test");
            conn.exec_script(zone);
        }
        produce(r.h->topic(), msgs);
        auto trackd = r.h->start_trackd({{"TRACKD_BATCH_MAX_ROWS", sizes[i]},
                                         {"TRACKD_BATCH_MAX_MS", "2000"},
                                         {"TRACKD_BATCH_MIN_MS", "2000"}});
        ASSERT_TRUE(
            r.h->wait_drained(static_cast<std::int64_t>(msgs.size()), std::chrono::seconds(180)))
            << IngestHarness::read_file(r.h->log_path());
        trackd->kill(SIGTERM);
        ASSERT_TRUE(trackd->wait_for(std::chrono::seconds(30)));
        db::Connection conn(r.h->db().dsn(), "test");
        if (i == 1) {  // the large batch size did make one batch
            EXPECT_EQ(conn.query("SELECT count(DISTINCT ingest_batch_id) FROM "
                                 "trackd.vehicle_telemetry_history")
                          .at(0, 0),
                      "1");
        }
        r.current = conn.query(
                            "SELECT string_agg(vehicle_id || ' ' || last_updated || ' ' || "
                            "kafka_offset || ' ' || ST_AsText(geom), E'\\n' ORDER BY "
                            "vehicle_id) FROM trackd.vehicle_current_state")
                        .at(0, 0);
        r.geofence_state =
            conn.query(
                    "SELECT coalesce(string_agg(vehicle_id || ' ' || inside, E'\\n' ORDER BY "
                    "vehicle_id), '') FROM trackd.geofence_vehicle_state")
                .at(0, 0);
        r.events = conn.query(
                           "SELECT coalesce(string_agg(vehicle_id || ' ' || kind || ' ' "
                           "|| event_time || ' ' || kafka_offset, E'\\n' ORDER BY vehicle_id, "
                           "event_time, kafka_offset), '') FROM trackd.geofence_events")
                       .get(0, 0)
                       .value_or("");
        r.history = conn.query(
                            "SELECT count(*) || ' ' || count(DISTINCT kafka_offset) FROM "
                            "trackd.vehicle_telemetry_history")
                        .at(0, 0);
        EXPECT_EQ(r.history, "600 600") << "batch size " << sizes[i];
        // Every vehicle's latest is its last message: time group 9, the third of its group.
        auto last = conn.query(
            "SELECT count(*) FROM trackd.vehicle_current_state s WHERE kafka_offset = "
            "(SELECT max(kafka_offset) FROM trackd.vehicle_telemetry_history h "
            "WHERE h.vehicle_id = s.vehicle_id)");
        EXPECT_EQ(last.at(0, 0), "20") << "batch size " << sizes[i];
    }
    EXPECT_EQ(runs[0].current, runs[1].current);
    EXPECT_EQ(runs[0].geofence_state, runs[1].geofence_state);
    EXPECT_EQ(runs[0].events, runs[1].events);
    EXPECT_FALSE(runs[0].events.empty()) << "the vehicles cross the fence line";
}

// trackd's log reports exactly one loss, of offsets `from`..`to`.
void expect_one_loss(const std::string& log, std::int64_t from, std::int64_t to) {
    const auto at = log.find("data loss: Kafka deleted messages before trackd read them");
    ASSERT_NE(at, std::string::npos) << log;
    const auto line = log.substr(at, log.find('\n', at) - at);
    EXPECT_NE(line.find("lost_from_offset=" + std::to_string(from) + " "), std::string::npos)
        << line;
    EXPECT_NE(line.find("lost_to_offset=" + std::to_string(to) + " "), std::string::npos) << line;
    EXPECT_NE(line.find("messages=" + std::to_string(to - from + 1) + " "), std::string::npos)
        << line;
    EXPECT_EQ(log.find("data loss", at + 1), std::string::npos) << "reported once: " << log;
}

// Retention deleted messages after the stored offset before trackd read them: trackd says so
// with the exact range (never silent), and goes on from where the log starts.
TEST(Delivery, MessagesKafkaDeletedBeforeTrackdReadThemAreReportedAsLoss) {
    IngestHarness h("loss", 1);
    const std::int64_t base_ms = (now_s() - 600) * 1000;
    std::vector<Msg> msgs;
    for (int i = 0; i < 100; ++i) {
        msgs.push_back(
            Msg{"veh-loss-" + std::to_string(i % 5), base_ms + i * 1000, 13.4 + 0.0001 * i, 52.5});
    }
    produce(h.topic(), msgs);
    // As if trackd had stored offsets up to 10 before an outage longer than the retention.
    {
        db::Connection conn(h.db().dsn(), "test");
        conn.query(
            "INSERT INTO trackd.kafka_offsets (consumer_group, topic, kafka_partition, "
            "next_offset, owner_epoch) VALUES ('trackd-loss', $1, 0, 10, 1)",
            {h.topic()});
    }
    delete_records_before(h.topic(), 0, 40);

    auto trackd = h.start_trackd();
    ASSERT_TRUE(h.wait_drained(100, std::chrono::seconds(120)))
        << IngestHarness::read_file(h.log_path());
    trackd->kill(SIGTERM);
    ASSERT_TRUE(trackd->wait_for(std::chrono::seconds(30)));
    EXPECT_EQ(trackd->exit_code(), 0);
    expect_one_loss(IngestHarness::read_file(h.log_path()), 10, 39);
    EXPECT_EQ(one_value(h.db(),
                        "SELECT count(*) || ' ' || min(kafka_offset) || ' ' || "
                        "max(kafka_offset) FROM trackd.vehicle_telemetry_history"),
              "60 40 99");
}

// The same while trackd runs: it has read offsets 0..49 and is frozen (SIGSTOP) before it
// fetches again; meanwhile 50 more messages arrive and retention deletes up to offset 80. Its
// next fetch is out of range and auto.offset.reset moves it to 80: the 30 messages it never
// saw are reported with their range and counted, not only a consumer warning.
TEST(Delivery, MessagesKafkaDeletedWhileTrackdRunsAreReportedAsLoss) {
    IngestHarness h("losslive", 1);
    const std::int64_t base_ms = (now_s() - 600) * 1000;
    const auto batch = [&](int from, int to) {
        std::vector<Msg> msgs;
        for (int i = from; i < to; ++i) {
            msgs.push_back(Msg{"veh-live-" + std::to_string(i % 5), base_ms + i * 1000,
                               13.4 + 0.0001 * i, 52.5});
        }
        return msgs;
    };
    produce(h.topic(), batch(0, 50));
    auto trackd = h.start_trackd();
    ASSERT_TRUE(h.wait_drained(50, std::chrono::seconds(120)))
        << IngestHarness::read_file(h.log_path());
    trackd->kill(SIGSTOP);
    // A fetch sent before the freeze waits at the broker for at most fetch.wait.max.ms (100 ms)
    // and is answered empty before the new messages come (the freeze stays well inside the
    // 6 s session timeout).
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    produce(h.topic(), batch(50, 100));
    delete_records_before(h.topic(), 0, 80);
    trackd->kill(SIGCONT);
    ASSERT_TRUE(h.wait_drained(100, std::chrono::seconds(120)))
        << IngestHarness::read_file(h.log_path());
    trackd->kill(SIGTERM);
    ASSERT_TRUE(trackd->wait_for(std::chrono::seconds(30)));
    EXPECT_EQ(trackd->exit_code(), 0);
    const auto log = IngestHarness::read_file(h.log_path());
    expect_one_loss(log, 50, 79);
    // The harness turns the API off and sets no metrics.listen: trackd says nothing is served.
    EXPECT_NE(log.find("no /metrics, /healthz or /readyz is served"), std::string::npos) << log;
    EXPECT_EQ(one_value(h.db(),
                        "SELECT count(*) || ' ' || min(kafka_offset) || ' ' || "
                        "max(kafka_offset) FROM trackd.vehicle_telemetry_history"),
              "70 0 99");
}

bool wait_for_text(const std::string& path, const std::string& text, std::chrono::seconds timeout) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < until) {
        if (IngestHarness::read_file(path).find(text) != std::string::npos) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
}

// An instance frozen in the middle of a COPY: the server waits for its data, holding the
// partitions' offsets row locks, and neither idle_in_transaction_session_timeout nor TCP would
// ever end that. The next owner's claim times out on the lock, ends the stuck session once it
// has waited longer than pg.idle_in_transaction_timeout_ms, claims and ingests everything; the
// frozen instance, thawed, finds its session gone and its batch fenced. Exact accounting.
TEST(Delivery, AWriterFrozenInsideACopyLosesItsLocksAndItsPartitions) {
    IngestHarness h("incopy", 2);
    h.produce(100, 3000);
    const auto manifest = load_manifest(h.manifest_path());
    const std::map<std::string, std::string> limits = {
        {"TRACKD_PG_LOCK_TIMEOUT_MS", "1000"},
        {"TRACKD_PG_IDLE_IN_TRANSACTION_TIMEOUT_MS", "5000"},
        {"TRACKD_BATCH_MAX_ROWS", "500"}};
    auto env_a = limits;
    const std::string release = h.dir() + "/release-a";
    env_a["TRACKD_TEST_INGEST_PAUSE_AT"] = "in-copy@" + release;
    const std::string log_a = h.dir() + "/a.log";
    const std::string log_b = h.dir() + "/b.log";
    auto a = h.start_trackd(env_a, log_a);
    ASSERT_TRUE(wait_for_text(log_a, "paused at in-copy", std::chrono::seconds(60)))
        << IngestHarness::read_file(log_a);
    a->kill(SIGSTOP);  // frozen: no heartbeats, no bytes, its kernel still answers TCP
    const auto frozen_at = std::chrono::steady_clock::now();
    auto b = h.start_trackd(limits, log_b);
    ASSERT_TRUE(h.wait_drained(3000, std::chrono::seconds(180))) << IngestHarness::read_file(log_b);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - frozen_at).count();
    EXPECT_TRUE(wait_for_text(log_b, "ended a stuck ingest session", std::chrono::seconds(5)))
        << IngestHarness::read_file(log_b);
    a->kill(SIGCONT);
    run_command("touch " + shell_quote(release));  // its COPY goes on, into a dead session
    EXPECT_TRUE(wait_for_text(log_a, "commit refused by the epoch fence", std::chrono::seconds(60)))
        << IngestHarness::read_file(log_a);
    a->kill(SIGTERM);
    b->kill(SIGTERM);
    ASSERT_TRUE(a->wait_for(std::chrono::seconds(30)));
    ASSERT_TRUE(b->wait_for(std::chrono::seconds(30)));
    EXPECT_EQ(b->exit_code(), 0) << IngestHarness::read_file(log_b);
    h.check_accounting(manifest);
    std::printf("[ measured ] the frozen writer's partitions were drained %.1f s after it froze\n",
                seconds);
}

// A stop whose leave of the consumer group never finishes (librdkafka 2.0.2 can hang in
// rd_kafka_consumer_close() right after an assignment; the pause point stops the close the same
// way): trackd still exits, cleanly, within its bound, with everything committed, and says so.
// The next instance is given the partitions once the group has timed the first one out.
TEST(Delivery, AStopWhoseGroupLeaveHangsEndsWithinItsBound) {
    IngestHarness h("closehang", 2);
    h.produce(50, 500);
    const auto manifest = load_manifest(h.manifest_path());
    const std::string log_a = h.dir() + "/a.log";
    auto a = h.start_trackd({{"TRACKD_TEST_INGEST_PAUSE_AT", "in-consumer-close"}}, log_a);
    ASSERT_TRUE(h.wait_drained(500, std::chrono::seconds(120))) << IngestHarness::read_file(log_a);
    a->kill(SIGTERM);
    ASSERT_TRUE(a->wait_for(std::chrono::seconds(30)))
        << "trackd did not stop within 30 s of SIGTERM\n"
        << IngestHarness::read_file(log_a);
    EXPECT_EQ(a->exit_code(), 0) << IngestHarness::read_file(log_a);
    const auto log = IngestHarness::read_file(log_a);
    EXPECT_NE(log.find("paused at in-consumer-close"), std::string::npos) << log;
    EXPECT_NE(log.find("leaving the consumer group did not finish in time"), std::string::npos)
        << log;
    EXPECT_NE(log.find("trackd stopped"), std::string::npos) << log;
    h.check_accounting(manifest);

    const std::string log_b = h.dir() + "/b.log";
    auto b = h.start_trackd({}, log_b);
    EXPECT_TRUE(wait_for_text(log_b, "partitions assigned", std::chrono::seconds(60)))
        << IngestHarness::read_file(log_b);
    b->kill(SIGTERM);
    ASSERT_TRUE(b->wait_for(std::chrono::seconds(30))) << IngestHarness::read_file(log_b);
    EXPECT_EQ(b->exit_code(), 0) << IngestHarness::read_file(log_b);
    h.check_accounting(manifest);
}

// A stop while PostgreSQL's process is frozen (a relay that relays nothing, as SIGSTOP on the
// server: connections stay open and no keepalive ends the wait) and a writer's statement is in
// flight: the stop cannot finish, so trackd exits at its stop bound (shortened to 5 s here) with
// status 1 and says why. Nothing is lost: once the database thaws, a new instance finds every
// message stored exactly once.
TEST(Delivery, AStopWhileThePostgresqlServerIsFrozenEndsAtItsBound) {
    IngestHarness h("stopfrozen", 2);
    h.produce(50, 500);
    auto manifest = load_manifest(h.manifest_path());  // the next produce writes a new one
    const std::string dsn = h.trackd_env().at("TRACKD_PG_DSN");
    const auto [host, port] = pg_endpoint(dsn);
    TcpRelay relay(host, port);
    const std::string log_a = h.dir() + "/a.log";
    auto a = h.start_trackd({{"TRACKD_PG_DSN", relay.through(dsn)},
                             {"TRACKD_BATCH_MAX_MS", "200"},
                             {"TRACKD_TEST_STOP_BOUND_S", "5"}},
                            log_a);
    ASSERT_TRUE(h.wait_drained(500, std::chrono::seconds(120))) << IngestHarness::read_file(log_a);

    relay.freeze(true);
    {  // a batch to commit, whose statement the freeze holds; vehicles of their own
        ChildProcess fleet(h.fleet_command(50, 200, 0, {"--id-prefix", "late-"}), {},
                           h.dir() + "/fleet2.log");
        ASSERT_EQ(fleet.wait(), 0) << IngestHarness::read_file(h.dir() + "/fleet2.log");
    }
    for (auto& entry : load_manifest(h.manifest_path())) manifest.insert(entry);
    ASSERT_EQ(manifest.size(), 700U);
    ASSERT_GT(relay.wait_holding(1), 0) << "no statement reached the frozen server";
    a->kill(SIGTERM);
    const bool ended = a->wait_for(std::chrono::seconds(60));
    relay.freeze(false);
    ASSERT_TRUE(ended) << "trackd waited for the frozen server\n"
                       << IngestHarness::read_file(log_a);
    EXPECT_EQ(a->exit_code(), 1) << IngestHarness::read_file(log_a);
    EXPECT_NE(IngestHarness::read_file(log_a).find("stop did not finish in time"),
              std::string::npos)
        << IngestHarness::read_file(log_a);

    const std::string log_b = h.dir() + "/b.log";
    auto b = h.start_trackd({}, log_b);
    ASSERT_TRUE(h.wait_drained(700, std::chrono::seconds(120))) << IngestHarness::read_file(log_b);
    b->kill(SIGTERM);
    ASSERT_TRUE(b->wait_for(std::chrono::seconds(30))) << IngestHarness::read_file(log_b);
    EXPECT_EQ(b->exit_code(), 0) << IngestHarness::read_file(log_b);
    h.check_accounting(manifest);
}

// A lock on the history held longer than pg.lock_timeout_ms (shortened to 300 ms), as a
// migration that builds an index on the parent table holds SHARE on every partition for as long
// as the build takes: each batch's COPY waits at most the timeout, fails with 55P03, is rolled
// back and retried with backoff; nothing is stored meanwhile, and once the lock goes every
// message is stored exactly once.
TEST(Delivery, ALockOnTheHistoryHeldPastTheLockTimeoutDelaysBatchesAndLosesNothing) {
    IngestHarness h("lockheld", 2);
    h.produce(20, 300);
    auto manifest = load_manifest(h.manifest_path());  // the next produce writes a new one
    const std::string log = h.dir() + "/trackd.log";
    auto t = h.start_trackd({{"TRACKD_PG_LOCK_TIMEOUT_MS", "300"}}, log);
    ASSERT_TRUE(h.wait_drained(300, std::chrono::seconds(120))) << IngestHarness::read_file(log);

    db::Connection holder(h.trackd_env().at("TRACKD_PG_DSN"), "test lock holder");
    holder.exec_script(
        "BEGIN; LOCK TABLE trackd.vehicle_telemetry_history, trackd.vehicle_current_state IN "
        "SHARE MODE");
    {  // vehicles of their own
        ChildProcess fleet(h.fleet_command(20, 300, 0, {"--id-prefix", "late-"}), {},
                           h.dir() + "/fleet2.log");
        ASSERT_EQ(fleet.wait(), 0) << IngestHarness::read_file(h.dir() + "/fleet2.log");
    }
    for (auto& entry : load_manifest(h.manifest_path())) manifest.insert(entry);
    ASSERT_EQ(manifest.size(), 600U);
    ASSERT_TRUE(wait_for_text(log, "lock timeout", std::chrono::seconds(60)))
        << IngestHarness::read_file(log);
    std::this_thread::sleep_for(std::chrono::seconds(3));  // several retries, all refused
    EXPECT_EQ(h.committed_messages(), 300) << "a batch was stored past the lock";
    holder.exec_script("COMMIT");

    ASSERT_TRUE(h.wait_drained(600, std::chrono::seconds(120))) << IngestHarness::read_file(log);
    t->kill(SIGTERM);
    ASSERT_TRUE(t->wait_for(std::chrono::seconds(30)));
    EXPECT_EQ(t->exit_code(), 0) << IngestHarness::read_file(log);
    const auto out = IngestHarness::read_file(log);
    EXPECT_NE(out.find("database refused, retrying during=\"commit batch\""), std::string::npos)
        << out;
    EXPECT_NE(out.find("database accepts again"), std::string::npos) << out;
    EXPECT_EQ(out.find("database unavailable"), std::string::npos) << "a lock wait is no outage";
    h.check_accounting(manifest);
}

// An exit that does not end after an orderly stop (TRACKD_TEST_HANG_IN_EXIT: an atexit handler
// that never returns, as a library's finaliser that hangs would): trackd logs "trackd stopped",
// and the process ends at its stop bound (shortened to 3 s) with the stop's status, 0, and says
// why. Every message is stored exactly once.
TEST(Delivery, AnExitThatDoesNotEndAfterTheStopIsCutAtItsBound) {
    IngestHarness h("exithang", 2);
    h.produce(20, 200);
    const auto manifest = load_manifest(h.manifest_path());
    const std::string log_a = h.dir() + "/a.log";
    auto a = h.start_trackd({{"TRACKD_TEST_HANG_IN_EXIT", "1"}, {"TRACKD_TEST_STOP_BOUND_S", "3"}},
                            log_a);
    ASSERT_TRUE(h.wait_drained(200, std::chrono::seconds(120))) << IngestHarness::read_file(log_a);
    a->kill(SIGTERM);
    ASSERT_TRUE(a->wait_for(std::chrono::seconds(30))) << "the process did not end after its stop\n"
                                                       << IngestHarness::read_file(log_a);
    EXPECT_EQ(a->exit_code(), 0) << IngestHarness::read_file(log_a);
    const auto log = IngestHarness::read_file(log_a);
    EXPECT_NE(log.find("trackd stopped"), std::string::npos) << log;
    EXPECT_NE(log.find("the process's exit did not finish within 3 s"), std::string::npos) << log;
    h.check_accounting(manifest);
}

}  // namespace
}  // namespace trackd::test
