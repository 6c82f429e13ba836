// sink::postgis::PostgisSink against the real PostgreSQL/PostGIS, batch by batch: the contract
// of include/trackd/sink/sink.hpp (the conditional offsets update, a replayed batch found in, the
// fence, an offset moved underneath, idempotent dead letters, the total order of the current
// state, the group check, partition DDL giving way to a long reader, rows straight into their
// partitions as far as the ingest role's grants allow) and the session limits every connection
// sets.
#include "trackd/sink/postgis/postgis_sink.hpp"

#include <thread>
#include <tuple>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "trackd/core/metrics.hpp"
#include "trackd/db/connection.hpp"
#include "trackd/db/migrations.hpp"

#include "support/test_database.hpp"

namespace trackd::test {
namespace {

using sink::Fence;
using sink::postgis::PostgisSink;

constexpr std::int64_t kHourUs = 3600LL * 1000000;

std::int64_t now_us() {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

class PostgisSinkTest : public ::testing::Test {
  protected:
    PostgisSinkTest() : db_("sink", Schema::migrated) {
        config_.pg.dsn = db_.dsn();
        config_.kafka.topic = "positions";
        config_.kafka.group = "trackd";
    }

    std::string value(const std::string& sql) {
        db::Connection conn(db_.dsn(), "test");
        return conn.query(sql).get(0, 0).value_or("NULL");
    }

    // A batch of partition 0: rows at `offsets`, dead letters at `dead`, ending after the last.
    static batch::Batch make_batch(const std::vector<std::int64_t>& offsets,
                                   const std::vector<std::int64_t>& dead = {},
                                   std::int64_t time_us = 0, const std::string& vehicle = "v1") {
        batch::Batch b;
        std::int64_t end = 0;
        for (const auto o : offsets) {
            batch::Row r;
            r.position.vehicle_id = vehicle;
            r.position.recorded_at_us = time_us != 0 ? time_us : now_us() - 60000000 + o * 1000;
            r.position.longitude = 13.4 + 0.0001 * static_cast<double>(o);
            r.position.latitude = 52.5;
            r.partition = 0;
            r.offset = o;
            b.rows.push_back(r);
            end = std::max(end, o + 1);
        }
        for (const auto o : dead) {
            b.dead_letters.push_back(
                batch::DeadLetter{0, o, core::Reason::malformed_json, "bad", "{"});
            end = std::max(end, o + 1);
        }
        b.next_offsets[0] = end;
        return b;
    }

    // (vehicle, seconds after t, first seen) of each row of a partition-0 batch whose offsets
    // start at first_offset, in this order; longitude 13.4 + 0.001 * seconds.
    using Staged = std::tuple<std::string, int, bool>;
    static batch::Batch staged_batch(std::int64_t t, std::int64_t first_offset,
                                     const std::vector<Staged>& rows) {
        batch::Batch b;
        std::int64_t o = first_offset;
        for (const auto& [vehicle, seconds, first] : rows) {
            batch::Row r;
            r.position.vehicle_id = vehicle;
            r.position.recorded_at_us = t + seconds * 1000000LL;
            r.position.longitude = 13.4 + 0.001 * seconds;
            r.position.latitude = 52.5;
            r.partition = 0;
            r.offset = o++;
            r.first_seen = first;
            b.rows.push_back(r);
        }
        b.next_offsets[0] = o;
        return b;
    }

    // The current state as "vehicle:offset:longitude,..." in id order.
    std::string current_state() {
        return value(
            "SELECT string_agg(vehicle_id || ':' || kafka_offset || ':' || "
            "round(ST_X(geom)::numeric, 3), ',' ORDER BY vehicle_id) "
            "FROM trackd.vehicle_current_state");
    }

    TestDatabase db_;
    config::Config config_;
};

TEST_F(PostgisSinkTest, AReplayedBatchIsFoundInAndStoresNothingTwice) {
    PostgisSink sink(config_, "trackd ingest test");
    const auto claims = sink.claim({0});
    ASSERT_EQ(claims.at(0).epoch, 1);
    EXPECT_FALSE(claims.at(0).next_offset.has_value());

    const auto b1 = make_batch({0, 1, 2}, {3});
    const std::map<std::int32_t, Fence> f1 = {{0, Fence{1, -1}}};
    auto r = sink.commit(b1, f1);
    EXPECT_TRUE(r.fenced.empty());
    EXPECT_FALSE(r.already_committed);
    EXPECT_EQ(value("SELECT next_offset FROM trackd.kafka_offsets"), "4");

    // The same batch again, as after a COMMIT whose reply was lost.
    r = sink.commit(b1, f1);
    EXPECT_TRUE(r.fenced.empty());
    EXPECT_TRUE(r.already_committed);
    EXPECT_EQ(value("SELECT count(*) FROM trackd.vehicle_telemetry_history"), "3");
    EXPECT_EQ(value("SELECT count(*) FROM trackd.dead_letters"), "1");
    // The replay's own ledger row went with its rollback: the archive sees the batch once.
    EXPECT_EQ(value("SELECT count(*) || ':' || sum(history_rows) FROM trackd.ingest_batches"),
              "1:3");

    // The next batch starts where the first ended.
    r = sink.commit(make_batch({4, 5}), {{0, Fence{1, 4}}});
    EXPECT_FALSE(r.already_committed);
    EXPECT_EQ(value("SELECT count(*) FROM trackd.vehicle_telemetry_history"), "5");
    EXPECT_EQ(value("SELECT next_offset FROM trackd.kafka_offsets"), "6");
}

TEST_F(PostgisSinkTest, AnotherClaimFencesAndAnOffsetMovedUnderneathStops) {
    PostgisSink a(config_, "trackd ingest a");
    PostgisSink b(config_, "trackd ingest b");
    a.claim({0});
    ASSERT_FALSE(a.commit(make_batch({0, 1}), {{0, Fence{1, -1}}}).already_committed);
    EXPECT_EQ(b.claim({0}).at(0).epoch, 2);
    EXPECT_EQ(b.claim({0}).at(0).next_offset, 2);  // (epoch 3 now)
    const auto r = a.commit(make_batch({2, 3}), {{0, Fence{1, 2}}});
    EXPECT_EQ(r.fenced, (std::set<std::int32_t>{0}));
    EXPECT_EQ(value("SELECT count(*) FROM trackd.vehicle_telemetry_history"), "2");

    // Someone rewinds the stored offset while b owns the partition: b stops, storing nothing.
    {
        db::Connection conn(db_.dsn(), "test");
        conn.exec_script("UPDATE trackd.kafka_offsets SET next_offset = 1");
    }
    EXPECT_THROW(b.commit(make_batch({2, 3}), {{0, Fence{3, 2}}}), sink::OffsetConflict);
    EXPECT_EQ(value("SELECT count(*) FROM trackd.vehicle_telemetry_history"), "2");
}

TEST_F(PostgisSinkTest, AReplayedDeadLetterIsANoOp) {
    PostgisSink sink(config_, "trackd ingest test");
    sink.claim({0});
    sink.commit(make_batch({0}, {1, 2}), {{0, Fence{1, -1}}});
    // Offsets rewound by an operator while trackd was stopped: the refused messages come again.
    {
        db::Connection conn(db_.dsn(), "test");
        conn.exec_script("UPDATE trackd.kafka_offsets SET next_offset = 1");
    }
    // With one refused for the first time beside them: offsets 1 and 2 keep their first rows,
    // offset 3 is stored with this batch.
    const auto first_batch = value("SELECT min(ingest_batch_id) FROM trackd.dead_letters");
    const auto r = sink.commit(make_batch({}, {1, 2, 3}), {{0, Fence{1, 1}}});
    EXPECT_TRUE(r.fenced.empty());
    EXPECT_EQ(value("SELECT count(*) FROM trackd.dead_letters"), "3");
    EXPECT_EQ(value("SELECT string_agg(kafka_offset::text, ',' ORDER BY kafka_offset) FROM "
                    "trackd.dead_letters WHERE ingest_batch_id = " +
                    first_batch),
              "1,2");
    EXPECT_EQ(value("SELECT count(*) FROM trackd.dead_letters WHERE kafka_offset = 3 AND "
                    "ingest_batch_id = " +
                    std::to_string(r.ingest_batch_id)),
              "1");
    EXPECT_EQ(value("SELECT next_offset FROM trackd.kafka_offsets"), "4");
}

// An oversized message's payload is stored whole, byte for byte, compressed with lz4 (the
// staging table's method, which the INSERT keeps) where the server has it, as the CI's does.
TEST_F(PostgisSinkTest, AnOversizedPayloadIsStoredWholeAndCompressedWithLz4) {
    PostgisSink sink(config_, "trackd ingest test");
    sink.claim({0});
    auto b = make_batch({0}, {});
    std::string payload = R"({"vehicle_id":"v1","padding":")" + std::string(70000, 'x') + R"("})";
    b.dead_letters.push_back(
        batch::DeadLetter{0, 1, core::Reason::payload_too_large, "too large", payload});
    b.next_offsets[0] = 2;
    ASSERT_TRUE(sink.commit(b, {{0, Fence{1, -1}}}).fenced.empty());
    EXPECT_EQ(value("SELECT length(raw_payload) FROM trackd.dead_letters"),
              std::to_string(payload.size()));
    EXPECT_EQ(value("SELECT md5(raw_payload) FROM trackd.dead_letters"),
              value("SELECT md5(convert_to('" + payload + "', 'UTF8'))"));
    EXPECT_EQ(value("SELECT pg_column_compression(raw_payload) FROM trackd.dead_letters"), "lz4");
    EXPECT_EQ(value("SELECT reason_code FROM trackd.dead_letters"), "payload_too_large");
}

TEST_F(PostgisSinkTest, EqualTimesInTheCurrentStateGoToTheLaterOffset) {
    PostgisSink sink(config_, "trackd ingest test");
    sink.claim({0});
    const auto t = now_us() - 60000000;
    sink.commit(make_batch({10}, {}, t), {{0, Fence{1, -1}}});
    sink.commit(make_batch({11}, {}, t), {{0, Fence{1, 11}}});
    EXPECT_EQ(value("SELECT kafka_offset FROM trackd.vehicle_current_state"), "11");
    // An older time never replaces a newer one, whatever its offset.
    sink.commit(make_batch({12}, {}, t - 1), {{0, Fence{1, 12}}});
    EXPECT_EQ(value("SELECT kafka_offset FROM trackd.vehicle_current_state"), "11");
}

// A batch whose vehicles trackd had not seen is inserted without the upsert; when one of them is
// in the current state after all (here a row written by hand, as another instance would), the
// batch's current state goes through the upsert instead, with its forward-only rule, and the
// fallback is counted. A batch with any known vehicle goes through the upsert at once.
TEST_F(PostgisSinkTest, FirstSeenVehiclesAreInsertedAndOnesAlreadyStoredGoThroughTheUpsert) {
    PostgisSink sink(config_, "trackd ingest test");
    sink.claim({0});
    const auto fallbacks = [] {
        const auto text = core::metrics::registry().render();
        const std::string name = "\ntrackd_current_state_insert_fallbacks_total ";
        const auto at = text.find(name);
        return at == std::string::npos
                   ? std::string("absent")
                   : text.substr(at + name.size(), text.find('\n', at + 1) - at - name.size());
    };
    const auto before = fallbacks();
    const auto t = now_us() - 60000000;
    const auto batch_of = [&](std::int64_t first_offset, const std::vector<Staged>& rows) {
        return staged_batch(t, first_offset, rows);
    };

    // v1 twice (first seen on its first row only: the staged, latest row is still new), v2 once.
    sink.commit(batch_of(0, {{"v1", 1, true}, {"v2", 2, true}, {"v1", 3, false}}),
                {{0, Fence{1, -1}}});
    EXPECT_EQ(current_state(), "v1:2:13.403,v2:1:13.402");
    EXPECT_EQ(fallbacks(), before);

    // v3 and v4 written by someone else: v3 newer than the batch's row, v4 older.
    {
        db::Connection conn(db_.dsn(), "test");
        conn.query(
            "INSERT INTO trackd.vehicle_current_state (vehicle_id, last_updated, geom, "
            "ingest_batch_id, kafka_partition, kafka_offset) "
            "SELECT v, to_timestamp($1::bigint / 1e6) + s * interval '1 s', "
            "ST_SetSRID(ST_MakePoint(1, 1, 0), 4326), 0, 5, 77 "
            "FROM (VALUES ('v3', 100), ('v4', -100)) AS x(v, s)",
            {std::to_string(t)});
    }
    // v3 and v4 seen for the first time by this writer, v5 too (not stored).
    sink.commit(batch_of(3, {{"v3", 10, true}, {"v4", 11, true}, {"v5", 12, true}}),
                {{0, Fence{1, 3}}});
    EXPECT_EQ(current_state(), "v1:2:13.403,v2:1:13.402,v3:77:1.000,v4:4:13.411,v5:5:13.412");
    const auto after_fallback = fallbacks();
    EXPECT_EQ(std::stod(after_fallback), std::stod(before == "absent" ? "0" : before) + 1);

    // v6 new, v1 known: the upsert.
    sink.commit(batch_of(6, {{"v6", 14, true}, {"v1", 15, false}}), {{0, Fence{1, 6}}});
    EXPECT_EQ(current_state(),
              "v1:7:13.415,v2:1:13.402,v3:77:1.000,v4:4:13.411,v5:5:13.412,v6:6:13.414");
    EXPECT_EQ(fallbacks(), after_fallback);
    EXPECT_EQ(value("SELECT count(*) FROM trackd.vehicle_telemetry_history"), "8");
}

// Vehicles already stored are UPDATEd and the rest go through the upsert, in one statement:
// a stored vehicle moves forward, a newer stored position stays, a new vehicle is inserted, and
// a vehicle trackd knows but whose row was deleted by hand (the UPDATE finds nothing) comes back.
TEST_F(PostgisSinkTest, StoredVehiclesAreUpdatedAndTheRestUpserted) {
    PostgisSink sink(config_, "trackd ingest test");
    sink.claim({0});
    const auto t = now_us() - 60000000;
    sink.commit(staged_batch(t, 0, {{"v1", 1, true}, {"v2", 2, true}, {"v3", 3, true}}),
                {{0, Fence{1, -1}}});
    EXPECT_EQ(current_state(), "v1:0:13.401,v2:1:13.402,v3:2:13.403");
    {
        db::Connection conn(db_.dsn(), "test");
        conn.query("DELETE FROM trackd.vehicle_current_state WHERE vehicle_id = 'v2'");
        // v3 moved on meanwhile (another writer): newer than the batch below.
        conn.query(
            "UPDATE trackd.vehicle_current_state SET last_updated = last_updated + "
            "interval '1 hour', kafka_offset = 99 WHERE vehicle_id = 'v3'");
    }
    sink.commit(staged_batch(t, 3,
                             {{"v1", 10, false},
                              {"v2", 11, false},
                              {"v3", 12, false},
                              {"v4", 13, true},
                              {"v1", 14, false}}),
                {{0, Fence{1, 3}}});
    EXPECT_EQ(current_state(), "v1:7:13.414,v2:4:13.411,v3:99:13.403,v4:6:13.413");
    EXPECT_EQ(value("SELECT count(*) FROM trackd.vehicle_telemetry_history"), "8");
}

// Two writers whose batches share every vehicle (messages not keyed by vehicle), committing at
// the same time: both write the current state in one lock order (byte order of the id: the
// COPY, the UPDATE over the sorted staging table, the upsert), so one waits for the other and
// neither fails with a deadlock; the newest position of each vehicle wins. Each writer is
// newer for half of the vehicles and older for the other half, so every staged batch has
// stored positions on both sides of its own (the UPDATE leaves some, and the upsert writes).
TEST_F(PostgisSinkTest, TwoWritersSharingVehiclesWaitForEachOtherWithoutDeadlock) {
    constexpr int kVehicles = 3000;
    constexpr int kBatches = 25;
    const auto t = now_us() - 3600LL * 1000000;
    // Writer p's batch k holds vehicle v at second 2k + p for even v, 2k + 1 - p for odd v.
    const auto second = [](std::int32_t p, int k, int v) {
        return 2 * k + (v % 2 == 0 ? p : 1 - p);
    };
    const auto run = [&](std::int32_t p, std::vector<std::string>& errors) {
        try {
            PostgisSink sink(config_, "trackd ingest " + std::to_string(p));
            sink.claim({p});
            std::int64_t offset = 0;
            for (int k = 0; k < kBatches; ++k) {
                batch::Batch b;
                for (int v = 0; v < kVehicles; ++v) {
                    batch::Row r;
                    r.position.vehicle_id = fmt::format("v{:05}", v);
                    r.position.recorded_at_us = t + second(p, k, v) * 1000000LL;
                    r.position.longitude = 13.0 + 0.0001 * v;
                    r.position.latitude = 52.0 + 0.001 * second(p, k, v);
                    r.partition = p;
                    r.offset = offset++;
                    r.first_seen = k == 0;
                    b.rows.push_back(r);
                }
                b.next_offsets[p] = offset;
                const auto r = sink.commit(b, {{p, Fence{1, k == 0 ? -1 : offset - kVehicles}}});
                if (!r.fenced.empty()) errors.push_back("fenced");
            }
        } catch (const std::exception& e) {
            errors.push_back(e.what());
        }
    };
    std::vector<std::string> errors0;
    std::vector<std::string> errors1;
    std::thread w0(run, 0, std::ref(errors0));
    std::thread w1(run, 1, std::ref(errors1));
    w0.join();
    w1.join();
    EXPECT_EQ(errors0, std::vector<std::string>{});
    EXPECT_EQ(errors1, std::vector<std::string>{});
    EXPECT_EQ(value("SELECT count(*) FROM trackd.vehicle_telemetry_history"),
              std::to_string(2 * kBatches * kVehicles));
    // Every vehicle at the last batch of the writer that was newer for it: writer 1 for even
    // vehicles, writer 0 for odd ones, both at second 2 * kBatches - 1.
    EXPECT_EQ(value(fmt::format(
                  "SELECT count(*) FILTER (WHERE kafka_partition = 1 - substr(vehicle_id, 2)::int "
                  "% 2 AND kafka_offset >= {} AND last_updated = (SELECT max(recorded_at) FROM "
                  "trackd.vehicle_telemetry_history) AND round(ST_Y(geom)::numeric, 3) = {:.3f}) "
                  "|| '/' || count(*) FROM trackd.vehicle_current_state",
                  (kBatches - 1) * kVehicles, 52.0 + 0.001 * (2 * kBatches - 1))),
              fmt::format("{}/{}", kVehicles, kVehicles));
}

// The history rows of a batch are written in (vehicle, time) order, whatever order they were
// read in (bench/RESULTS.md: ~12% less PostgreSQL CPU per row than time order).
TEST_F(PostgisSinkTest, HistoryRowsAreWrittenInVehicleThenTimeOrder) {
    PostgisSink sink(config_, "trackd ingest test");
    sink.claim({0});
    // The middle of the previous hour: every row in one partition.
    const auto base = (now_us() / kHourUs - 1) * kHourUs + kHourUs / 2;
    batch::Batch b;
    const std::vector<std::pair<std::string, std::int64_t>> read = {
        {"v2", 10}, {"v1", 20}, {"v2", 30}, {"v1", 5}, {"v10", 1}};  // vehicle, seconds
    for (std::size_t i = 0; i < read.size(); ++i) {
        batch::Row r;
        r.position.vehicle_id = read[i].first;
        r.position.recorded_at_us = base + read[i].second * 1000000;
        r.position.longitude = 13.4;
        r.position.latitude = 52.5;
        r.partition = 0;
        r.offset = static_cast<std::int64_t>(i);
        b.rows.push_back(r);
    }
    b.next_offsets[0] = static_cast<std::int64_t>(read.size());
    sink.commit(b, {{0, Fence{1, -1}}});
    EXPECT_EQ(value("SELECT string_agg(vehicle_id || ':' || kafka_offset, ',' ORDER BY tableoid, "
                    "ctid) FROM trackd.vehicle_telemetry_history"),
              "v1:3,v1:1,v10:4,v2:0,v2:2");
}

TEST_F(PostgisSinkTest, WithDeferredIndexesHistoryRowsAreWrittenInMortonOrder) {
    config_.postgis.defer_indexes = true;
    PostgisSink sink(config_, "trackd ingest test");
    sink.claim({0});
    const auto base = (now_us() / kHourUs - 1) * kHourUs + kHourUs / 2;
    batch::Batch b;
    // vehicle, longitude, latitude; ST_GeoHash orders them v2, v3, v4, v1.
    const std::vector<std::tuple<std::string, double, double>> read = {
        {"v1", 13.9, 52.9}, {"v2", 13.1, 52.1}, {"v3", 13.9, 52.1}, {"v4", 13.1, 52.9}};
    for (std::size_t i = 0; i < read.size(); ++i) {
        batch::Row r;
        r.position.vehicle_id = std::get<0>(read[i]);
        r.position.recorded_at_us = base + static_cast<std::int64_t>(i) * 1000000;
        r.position.longitude = std::get<1>(read[i]);
        r.position.latitude = std::get<2>(read[i]);
        r.partition = 0;
        r.offset = static_cast<std::int64_t>(i);
        b.rows.push_back(r);
    }
    b.next_offsets[0] = static_cast<std::int64_t>(read.size());
    sink.commit(b, {{0, Fence{1, -1}}});
    EXPECT_EQ(value("SELECT string_agg(vehicle_id, ',' ORDER BY tableoid, ctid) FROM "
                    "trackd.vehicle_telemetry_history"),
              "v2,v3,v4,v1");
    EXPECT_EQ(value("SELECT string_agg(vehicle_id, ',' ORDER BY ST_GeoHash(geom, 12) COLLATE "
                    "\"C\") FROM trackd.vehicle_telemetry_history"),
              "v2,v3,v4,v1");
}

// Bounds are [from, to): a time at a partition's upper bound belongs to the next one, or, in a
// gap or outside every partition, to none (-1: the parent routes it to DEFAULT).
TEST(RouteToPartitions, EachTimeToThePartitionWhoseRangeHoldsIt) {
    using sink::postgis::HistoryPartition;
    const std::vector<HistoryPartition> parts = {
        {"trackd.a", 1, 100, 200}, {"trackd.b", 2, 200, 300}, {"trackd.c", 3, 400, 500}};
    EXPECT_EQ(sink::postgis::route_to_partitions(
                  parts, {99, 100, 199, 200, 299, 300, 399, 400, 499, 500, -5}),
              (std::vector<int>{-1, 0, 0, 1, 1, -1, -1, 2, 2, -1, -1}));
    EXPECT_EQ(sink::postgis::route_to_partitions({}, {100}), (std::vector<int>{-1}));
}

// History rows go straight into their time partition, not through the partitioned table (whose
// statement triggers then never fire), and the sink writes the batch's ledger row itself; a
// row outside every partition still goes through the parent, whose trigger adds it to the
// ledger row. A partition detached or dropped after the sink read them is noticed inside the
// batch's transaction: its rows go through the parent (to the DEFAULT partition), none into
// the detached table.
TEST_F(PostgisSinkTest, HistoryRowsGoStraightIntoTheirPartitionsAndTheLedgerCountsThemOnce) {
    config_.postgis.ddl_lock_timeout_ms = 100;
    db::Connection conn(db_.dsn(), "test");
    // Counts the statements that insert through the parent.
    conn.exec_script(
        "CREATE TABLE parent_inserts (n int NOT NULL); INSERT INTO parent_inserts VALUES (0); "
        "CREATE FUNCTION count_parent_insert() RETURNS trigger LANGUAGE plpgsql AS "
        "$$BEGIN UPDATE parent_inserts SET n = n + 1; RETURN NULL; END$$; "
        "CREATE TRIGGER parent_insert_probe AFTER INSERT ON trackd.vehicle_telemetry_history "
        "FOR EACH STATEMENT EXECUTE FUNCTION count_parent_insert()");
    PostgisSink sink(config_, "trackd ingest test");
    sink.claim({0});
    const auto base = (now_us() / kHourUs - 1) * kHourUs + kHourUs / 2;  // an hour ago
    auto batch = [&](std::int64_t first, const std::vector<std::int64_t>& times) {
        batch::Batch b;
        for (std::size_t i = 0; i < times.size(); ++i) {
            batch::Row r;
            r.position.vehicle_id = "v" + std::to_string(i);
            r.position.recorded_at_us = times[i];
            r.position.longitude = 13.4;
            r.position.latitude = 52.5;
            r.partition = 0;
            r.offset = first + static_cast<std::int64_t>(i);
            b.rows.push_back(r);
        }
        b.next_offsets[0] = first + static_cast<std::int64_t>(times.size());
        return b;
    };
    const auto ledger = [&] {
        return value(
            "SELECT string_agg(history_rows::text, ',' ORDER BY ingest_batch_id) FROM "
            "trackd.ingest_batches");
    };
    const auto where = [&](const std::string& offsets) {
        return value(
            "SELECT string_agg(DISTINCT tableoid::regclass::text, ',') FROM "
            "trackd.vehicle_telemetry_history WHERE kafka_offset IN (" +
            offsets + ")");
    };
    auto r = sink.commit(batch(0, {base, base + 1000000, base + 2000000}), {{0, Fence{1, -1}}});
    ASSERT_TRUE(r.fenced.empty());
    const auto partition = where("0, 1, 2");
    EXPECT_NE(partition.find("trackd.vehicle_telemetry_history_p"), std::string::npos) << partition;
    EXPECT_EQ(value("SELECT n FROM parent_inserts"), "0") << "the rows went through the parent";
    EXPECT_EQ(ledger(), "3");

    // Partition DDL put off by a long reader: the row 20 days back has no partition and goes
    // through the parent (its trigger counts it into the same ledger row), the others do not.
    {
        db::Connection reader(db_.dsn(), "qgis");
        reader.exec_script("BEGIN; SELECT count(*) FROM trackd.vehicle_telemetry_history");
        const auto old = (now_us() / kHourUs - 24 * 20) * kHourUs;
        r = sink.commit(batch(3, {base + 3000000, old, base + 4000000}), {{0, Fence{1, 3}}});
        ASSERT_TRUE(r.fenced.empty());
        reader.exec_script("ROLLBACK");
    }
    EXPECT_EQ(where("4"), "trackd.vehicle_telemetry_history_default");
    EXPECT_EQ(where("3, 5"), partition);
    EXPECT_EQ(value("SELECT n FROM parent_inserts"), "1");
    EXPECT_EQ(ledger(), "3,3");

    // Detached behind the sink's back: the batch finds out in its transaction and writes
    // through the parent; the rows go to the DEFAULT partition, the detached table keeps its 5.
    conn.exec_script("ALTER TABLE trackd.vehicle_telemetry_history DETACH PARTITION " + partition);
    r = sink.commit(batch(6, {base + 5000000, base + 6000000}), {{0, Fence{1, 6}}});
    ASSERT_TRUE(r.fenced.empty());
    EXPECT_EQ(where("6, 7"), "trackd.vehicle_telemetry_history_default");
    EXPECT_EQ(value("SELECT count(*) FROM " + partition), "5");
    EXPECT_EQ(ledger(), "3,3,2");
    EXPECT_EQ(value("SELECT count(*) FROM trackd.vehicle_telemetry_history"), "3");

    // Dropped: the partition made again for the same day (its rows 6 and 7 move in from the
    // DEFAULT partition), read by a new sink that writes into it, then dropped.
    conn.exec_script("DROP TABLE " + partition);
    conn.query(
        "SELECT trackd.create_history_partitions(to_timestamp($1::float8 / 1e6), "
        "to_timestamp($1::float8 / 1e6) + interval '1 second', 'day')",
        {std::to_string(base)});
    PostgisSink again(config_, "trackd ingest test 2");
    ASSERT_EQ(again.claim({0}).at(0).epoch, 2);
    r = again.commit(batch(8, {base + 7000000}), {{0, Fence{2, 8}}});
    ASSERT_TRUE(r.fenced.empty());
    EXPECT_EQ(where("6, 7, 8"), partition);
    EXPECT_EQ(value("SELECT n FROM parent_inserts"), "2") << "batch 8 went straight in";
    conn.exec_script("DROP TABLE " + partition);
    r = again.commit(batch(9, {base + 8000000}), {{0, Fence{2, 9}}});
    ASSERT_TRUE(r.fenced.empty());
    EXPECT_EQ(where("9"), "trackd.vehicle_telemetry_history_default");
    EXPECT_EQ(ledger(), "3,3,2,1,1");
    EXPECT_EQ(value("SELECT next_offset FROM trackd.kafka_offsets"), "10");
}

// The sink with only the trackd_ingest role's privileges (the session's role set at connect):
// it makes the day's partitions itself and writes straight into them; a partition without its
// INSERT grant (made by hand, or revoked) gets its rows through the parent, which routes them
// there anyway. A grant revoked under a running sink fails that batch's COPY; the batch rolls
// back whole and is written again at once through the parent.
TEST_F(PostgisSinkTest, AsTheIngestRoleItWritesOnlyWhereGrantedAndTheRestGoesThroughTheParent) {
    db::Connection conn(db_.dsn(), "test");
    conn.exec_script(
        "CREATE TABLE parent_inserts (n int NOT NULL); INSERT INTO parent_inserts VALUES (0); "
        "GRANT SELECT, UPDATE ON parent_inserts TO trackd_ingest; "
        "CREATE FUNCTION count_parent_insert() RETURNS trigger LANGUAGE plpgsql AS "
        "$$BEGIN UPDATE parent_inserts SET n = n + 1; RETURN NULL; END$$; "
        "CREATE TRIGGER parent_insert_probe AFTER INSERT ON trackd.vehicle_telemetry_history "
        "FOR EACH STATEMENT EXECUTE FUNCTION count_parent_insert()");
    const auto dsn = db_.dsn();
    config_.pg.dsn =
        dsn + (dsn.find('?') == std::string::npos ? "?" : "&") + "options=-crole%3Dtrackd_ingest";
    EXPECT_EQ(db::Connection(config_.pg.dsn, "test").query("SELECT current_user").at(0, 0),
              "trackd_ingest");
    PostgisSink sink(config_, "trackd ingest test");
    ASSERT_EQ(sink.claim({0}).at(0).epoch, 1);
    const auto base = (now_us() / kHourUs - 1) * kHourUs + kHourUs / 2;  // an hour ago
    auto batch = [&](std::int64_t first, int n) {
        batch::Batch b;
        for (int i = 0; i < n; ++i) {
            batch::Row r;
            r.position.vehicle_id = "v" + std::to_string(i);
            r.position.recorded_at_us = base + (first + i) * 1000000;
            r.position.longitude = 13.4;
            r.position.latitude = 52.5;
            r.partition = 0;
            r.offset = first + i;
            b.rows.push_back(r);
        }
        b.next_offsets[0] = first + n;
        return b;
    };
    const auto where = [&](const std::string& offsets) {
        return value(
            "SELECT string_agg(DISTINCT tableoid::regclass::text, ',') FROM "
            "trackd.vehicle_telemetry_history WHERE kafka_offset IN (" +
            offsets + ")");
    };
    auto r = sink.commit(batch(0, 2), {{0, Fence{1, -1}}});
    ASSERT_TRUE(r.fenced.empty());
    const auto partition = where("0, 1");
    EXPECT_NE(partition.find("trackd.vehicle_telemetry_history_p"), std::string::npos) << partition;
    EXPECT_EQ(value("SELECT n FROM parent_inserts"), "0") << "the rows went through the parent";
    EXPECT_EQ(value("SELECT has_table_privilege('trackd_ingest', '" + partition + "', 'INSERT')"),
              "t");

    conn.exec_script("REVOKE INSERT ON " + partition + " FROM trackd_ingest");
    r = sink.commit(batch(2, 3), {{0, Fence{1, 2}}});
    ASSERT_TRUE(r.fenced.empty());
    EXPECT_EQ(where("2, 3, 4"), partition) << "the parent routes them into the same partition";
    EXPECT_EQ(value("SELECT n FROM parent_inserts"), "1");
    EXPECT_EQ(value("SELECT count(*) FROM trackd.vehicle_telemetry_history"), "5");
    // The batch after it reads the partitions again and leaves that one out.
    r = sink.commit(batch(5, 1), {{0, Fence{1, 5}}});
    ASSERT_TRUE(r.fenced.empty());
    EXPECT_EQ(value("SELECT n FROM parent_inserts"), "2");

    // A sink started after the revoke never tries the partition.
    PostgisSink again(config_, "trackd ingest test 2");
    ASSERT_EQ(again.claim({0}).at(0).epoch, 2);
    r = again.commit(batch(6, 1), {{0, Fence{2, 6}}});
    ASSERT_TRUE(r.fenced.empty());
    EXPECT_EQ(where("5, 6"), partition);
    EXPECT_EQ(value("SELECT n FROM parent_inserts"), "3");
    // The failed try's ledger row went with its rollback: one row per committed batch.
    EXPECT_EQ(value("SELECT string_agg(history_rows::text, ',' ORDER BY ingest_batch_id) FROM "
                    "trackd.ingest_batches"),
              "2,3,1,1");
    EXPECT_EQ(value("SELECT count(*) FROM trackd.vehicle_telemetry_history"), "7");
    EXPECT_EQ(value("SELECT next_offset FROM trackd.kafka_offsets"), "7");
}

TEST_F(PostgisSinkTest, ASecondGroupOnTheTopicIsRefusedByName) {
    {
        db::Connection conn(db_.dsn(), "test");
        conn.exec_script(
            "INSERT INTO trackd.kafka_offsets (consumer_group, topic, "
            "kafka_partition, next_offset, owner_epoch) VALUES "
            "('trackd-old', 'positions', 0, 42, 3)");
    }
    PostgisSink sink(config_, "trackd ingest test");
    try {
        sink.check_group();
        FAIL() << "no GroupConflict";
    } catch (const sink::GroupConflict& e) {
        EXPECT_NE(std::string(e.what()).find("consumer group 'trackd-old'"), std::string::npos)
            << e.what();
    }
    EXPECT_THROW(sink.claim({0}), sink::GroupConflict);
}

TEST_F(PostgisSinkTest, PartitionDdlGivesWayToALongReaderAndRowsGoToTheDefaultPartition) {
    config_.postgis.ddl_lock_timeout_ms = 100;
    config_.postgis.partition_interval = "hour";
    PostgisSink sink(config_, "trackd ingest test");
    sink.claim({0});
    // A reader idle in a transaction that touched the history table (a QGIS session).
    db::Connection reader(db_.dsn(), "qgis");
    reader.exec_script("BEGIN; SELECT count(*) FROM trackd.vehicle_telemetry_history");
    // A time whose partition does not exist: creating it needs the lock the reader blocks.
    const auto t = (now_us() / kHourUs - 24 * 20) * kHourUs + 60000000;
    const auto started = std::chrono::steady_clock::now();
    const auto r = sink.commit(make_batch({0}, {}, t), {{0, Fence{1, -1}}});
    const auto waited = std::chrono::steady_clock::now() - started;
    EXPECT_TRUE(r.fenced.empty());
    EXPECT_EQ(value("SELECT tableoid::regclass::text FROM trackd.vehicle_telemetry_history"),
              "trackd.vehicle_telemetry_history_default");
    reader.exec_script("ROLLBACK");
    std::printf("[ measured ] commit with partition DDL deferred took %.2f s\n",
                std::chrono::duration<double>(waited).count());
}

TEST_F(PostgisSinkTest, EverySessionHasTheConfiguredLimits) {
    config_.pg.lock_timeout_ms = 2500;
    config_.pg.idle_in_transaction_timeout_ms = 7000;
    config_.pg.keepalives_idle_s = 4;
    db::Connection conn(config_.pg, "trackd ingest test");
    EXPECT_EQ(conn.query("SHOW lock_timeout").at(0, 0), "2500ms");
    EXPECT_EQ(conn.query("SHOW idle_in_transaction_session_timeout").at(0, 0), "7s");
    EXPECT_EQ(conn.query("SHOW tcp_keepalives_idle").at(0, 0), "4");
    EXPECT_EQ(conn.query("SHOW tcp_user_timeout").at(0, 0), "19000");  // ms: 4 + 5 * 3 s
    // trackd's side of the connection too.
    EXPECT_EQ(conn.option("keepalives_idle"), "4");
    EXPECT_EQ(conn.option("tcp_user_timeout"), "19000");
}

TEST_F(PostgisSinkTest, ACommandsSessionIsBoundedOnTheNetworkOnly) {
    // `trackd migrate` and `trackd audit`: a cut-off network ends them within the keepalive
    // bound, while their lock waits stay theirs (the server's defaults here).
    config_.pg.lock_timeout_ms = 2500;
    config_.pg.keepalives_idle_s = 4;
    db::Connection conn(config_.pg, "trackd migrate test", db::Connection::Limits::network);
    EXPECT_EQ(conn.option("keepalives"), "1");
    EXPECT_EQ(conn.option("keepalives_idle"), "4");
    EXPECT_EQ(conn.option("tcp_user_timeout"), "19000");
    EXPECT_EQ(conn.option("application_name"), "trackd migrate test");
    EXPECT_EQ(conn.query("SHOW lock_timeout").at(0, 0), "0");
    EXPECT_EQ(conn.query("SHOW tcp_user_timeout").at(0, 0), "0");
}

TEST_F(PostgisSinkTest, AWaitOnALockEndsAtTheLockTimeoutWithARetryableError) {
    config_.pg.lock_timeout_ms = 200;
    PostgisSink holder(config_, "trackd ingest holder");
    holder.claim({0});
    // Another session holds the offsets row (an owner frozen inside its batch transaction).
    db::Connection frozen(db_.dsn(), "trackd ingest frozen");
    frozen.exec_script("BEGIN; UPDATE trackd.kafka_offsets SET updated_at = now()");
    PostgisSink claimer(config_, "trackd ingest claimer");
    try {
        claimer.claim({0});
        FAIL() << "the claim did not time out";
    } catch (const db::DbError& e) {
        EXPECT_EQ(e.sqlstate(), "55P03") << e.what();
        EXPECT_TRUE(e.sqlstate() == "55P03" && !e.connection_lost());
    }
    frozen.exec_script("ROLLBACK");
    EXPECT_EQ(claimer.claim({0}).at(0).epoch, 2);
}

}  // namespace
}  // namespace trackd::test
