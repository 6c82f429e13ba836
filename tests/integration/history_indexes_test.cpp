// The history index layout of postgis.defer_indexes against the real PostgreSQL/PostGIS:
// open partitions are created with the hot indexes only, a partition whose range has ended gets
// exactly the closed indexes (valid) and loses the hot ones, a build interrupted by a killed
// backend (an invalid index left behind) is repaired, and the API answers the same from a
// partition in either layout.
#include <atomic>
#include <exception>
#include <functional>
#include <regex>
#include <thread>

#include <gtest/gtest.h>

#include "trackd/core/metrics.hpp"
#include "trackd/db/connection.hpp"
#include "trackd/db/migrations.hpp"
#include "trackd/http/server.hpp"
#include "trackd/sink/postgis/history_indexer.hpp"

#include "support/http_client.hpp"
#include "support/http_fixture.hpp"
#include "support/test_database.hpp"

namespace trackd::test {
namespace {

using sink::postgis::HistoryIndexer;

constexpr const char* kPartition = "vehicle_telemetry_history_p2025060110";

// The partition for 2025-06-01 10:00-11:00 UTC in the layout it has while open (the hot
// indexes instead of the closed ones), as trackd creates the current hour's partition with
// postgis.defer_indexes; its hour is long past, so the indexer finds it due.
const char* kHotPastPartition = R"SQL(
SELECT trackd.create_history_partitions('2025-06-01T10:00:00Z', '2025-06-01T11:00:00Z', 'hour');
DO $hot$ DECLARE i record; BEGIN
  FOR i IN SELECT * FROM trackd.history_closed_indexes() LOOP
    EXECUTE format('DROP INDEX trackd.%I', 'vehicle_telemetry_history_p2025060110' || i.suffix);
  END LOOP;
  FOR i IN SELECT * FROM trackd.history_hot_indexes() LOOP
    EXECUTE format('CREATE INDEX %I ON trackd.vehicle_telemetry_history_p2025060110 %s',
                   'vehicle_telemetry_history_p2025060110' || i.suffix, i.definition);
  END LOOP;
END $hot$;
)SQL";

// 40 vehicles x 60 positions (one a minute) over 13.0..13.4 x 52.0..52.3, written in Morton
// order per "batch" of 10 minutes, as the sink writes them with postgis.defer_indexes.
const char* kRows = R"SQL(
INSERT INTO trackd.vehicle_telemetry_history (vehicle_id, recorded_at, geom, speed_kmh,
  ingest_batch_id, kafka_partition, kafka_offset)
SELECT 'veh-' || lpad(v::text, 2, '0'), '2025-06-01T10:00:00Z'::timestamptz + m * interval '1 min',
       ST_SetSRID(ST_MakePoint(13.0 + (v % 8) * 0.05 + m * 0.0004, 52.0 + (v / 8) * 0.06 + m * 0.0002, 0), 4326),
       30 + v, m / 10 + 1, v % 4, v * 100 + m
  FROM generate_series(0, 39) v, generate_series(0, 59) m
 ORDER BY m / 10, ST_GeoHash(ST_SetSRID(ST_MakePoint(13.0 + (v % 8) * 0.05 + m * 0.0004,
          52.0 + (v / 8) * 0.06 + m * 0.0002), 4326), 12) COLLATE "C";
ANALYZE trackd.vehicle_telemetry_history;
)SQL";

class HistoryIndexesTest : public ::testing::Test {
  protected:
    HistoryIndexesTest() : db_("histidx", Schema::migrated) {
        config_.pg.dsn = db_.dsn();
        config_.pg.lock_timeout_ms = 60000;
        config_.postgis.defer_indexes = true;
        // An hour: today's partition, with the test's rows, stays one being written (summarized,
        // analyzed, not closed) when a test runs across midnight UTC; the past partitions the
        // tests close ended long ago.
        config_.postgis.index_grace_s = 3600;
    }

    db::Result sql(const std::string& text, const db::Params& params = {}) {
        db::Connection conn(db_.dsn(), "test");
        return conn.query(text, params);
    }
    void script(const std::string& text) {
        db::Connection conn(db_.dsn(), "test");
        conn.exec_script(text);
    }

    // The partition's indexes, "name:valid" in name order.
    std::string indexes_of(const std::string& partition) {
        return sql("SELECT string_agg(c.relname || ':' || x.indisvalid, ',' ORDER BY c.relname) "
                   "FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid "
                   "WHERE x.indrelid = ('trackd.' || $1)::regclass",
                   {partition})
            .get(0, 0)
            .value_or("");
    }

    // The partition holding now() (made by the migrations, empty), autovacuum off so that only
    // trackd summarizes its BRINs. insert_now() writes at the moment it was chosen (today_at_),
    // so that the rows land in it even when the test runs across midnight UTC.
    std::string todays_partition() {
        const auto r =
            sql("SELECT partition_name, now() FROM trackd.history_partitions() "
                "WHERE range_from <= now() AND range_to > now()");
        today_at_ = r.at(0, 1);
        script("ALTER TABLE trackd." + r.at(0, 0) + " SET (autovacuum_enabled = false)");
        return r.at(0, 0);
    }
    // `n` rows of batch `batch` in today's partition, on `conn`.
    void insert_now(db::Connection& conn, int batch, int n) {
        ASSERT_FALSE(today_at_.empty()) << "todays_partition() first";
        conn.query(
            "INSERT INTO trackd.vehicle_telemetry_history (vehicle_id, recorded_at, geom, "
            "ingest_batch_id, kafka_partition, kafka_offset) SELECT 'veh-' || (n % 500), "
            "$3::timestamptz, ST_SetSRID(ST_MakePoint(13 + (n % 100) * 0.001, 52, 0), 4326), "
            "$1::int8, 0, n FROM generate_series(1, $2::int) n",
            {std::to_string(batch), std::to_string(n), today_at_});
    }
    void insert_now(int batch, int n) {
        db::Connection conn(db_.dsn(), "test");
        insert_now(conn, batch, n);
    }
    // The partition's complete 128-page block ranges, over its two BRINs: on ingest_batch_id and
    // (V0019) on recorded_at.
    int complete_ranges(const std::string& partition) {
        return 2 *
               std::stoi(sql("SELECT pg_relation_size(('trackd.' || $1)::regclass) / 8192 / 128",
                             {partition})
                             .at(0, 0));
    }

    TestDatabase db_;
    config::Config config_;
    std::string today_at_;  // set by todays_partition()
};

const std::string kHot = std::string(kPartition) + "_geom_spgist:true," + kPartition +
                         "_ingest_batch_id_idx:true," + kPartition + "_time_brin:true," +
                         kPartition + "_vehicle_hash:true";
const std::string kClosed = std::string(kPartition) + "_geom_spgist:true," + kPartition +
                            "_ingest_batch_id_idx:true," + kPartition + "_time_brin:true," +
                            kPartition + "_vehicle_time_idx:true";

TEST_F(HistoryIndexesTest, OpenPartitionsAreHotAndAClosedOneGetsExactlyTodaysIndexes) {
    // A partition trackd creates ahead with p_hot (past the migration's day partitions): the
    // hot indexes only.
    sql("SELECT trackd.create_history_partitions('2099-01-01T00:00:00Z', "
        "'2099-01-01T01:00:00Z', 'hour', true)");
    const std::string open = "vehicle_telemetry_history_p2099010100";
    EXPECT_EQ(indexes_of(open), open + "_geom_spgist:true," + open + "_ingest_batch_id_idx:true," +
                                    open + "_time_brin:true," + open + "_vehicle_hash:true");
    // One wholly past is closed from the start, even with p_hot.
    sql("SELECT trackd.create_history_partitions('2025-06-01T12:00:00Z', "
        "'2025-06-01T13:00:00Z', 'hour', true)");
    const std::string past = "vehicle_telemetry_history_p2025060112";
    EXPECT_EQ(indexes_of(past), past + "_geom_spgist:true," + past + "_ingest_batch_id_idx:true," +
                                    past + "_time_brin:true," + past + "_vehicle_time_idx:true");

    script(kHotPastPartition);
    script(kRows);
    ASSERT_EQ(indexes_of(kPartition), kHot);

    HistoryIndexer indexer(config_);
    const auto pass = indexer.run_once();
    EXPECT_FALSE(pass.skipped);
    EXPECT_EQ(pass.partitions, 1);
    // The SP-GiST (V0013) and the BRIN on recorded_at (V0019) are in both sets: only the btree
    // is built, the hash dropped.
    EXPECT_EQ(pass.indexes_built, 1);
    EXPECT_EQ(pass.invalid_dropped, 0);
    EXPECT_EQ(pass.hot_dropped, 1);
    EXPECT_EQ(indexes_of(kPartition), kClosed);
    // Definitions as the parent's were before V0009.
    EXPECT_EQ(sql("SELECT pg_get_indexdef(($1 || '_vehicle_time_idx')::regclass)",
                  {std::string("trackd.") + kPartition})
                  .at(0, 0),
              std::string("CREATE INDEX ") + kPartition + "_vehicle_time_idx ON trackd." +
                  kPartition + " USING btree (vehicle_id, recorded_at DESC)");
    EXPECT_EQ(sql("SELECT count(*) FROM trackd.vehicle_telemetry_history").at(0, 0), "2400");
    // The open partition is left as it is; a second pass has nothing to do.
    EXPECT_EQ(indexes_of(open), open + "_geom_spgist:true," + open + "_ingest_batch_id_idx:true," +
                                    open + "_time_brin:true," + open + "_vehicle_hash:true");
    const auto again = indexer.run_once();
    EXPECT_EQ(again.partitions, 0);
    EXPECT_EQ(again.indexes_built, 0);
}

TEST_F(HistoryIndexesTest, ABuildWhoseBackendIsKilledLeavesAnInvalidIndexThatIsRebuilt) {
    script(kHotPastPartition);
    script(kRows);
    // An older snapshot that CREATE INDEX CONCURRENTLY must wait for before it can mark the
    // index valid: the build is caught there, with its index made but not yet valid.
    db::Connection holder(db_.dsn(), "test snapshot holder");
    holder.exec_script("BEGIN ISOLATION LEVEL REPEATABLE READ");
    holder.query("SELECT count(*) FROM trackd.vehicle_current_state");

    std::exception_ptr failure;
    std::thread build([&] {
        try {
            HistoryIndexer(config_).run_once();
        } catch (...) {
            failure = std::current_exception();
        }
    });
    std::string pid;
    for (int i = 0; i < 3000 && pid.empty(); ++i) {  // up to a minute
        pid = sql("SELECT pid::text FROM pg_stat_activity WHERE datname = current_database() "
                  "AND application_name = 'trackd history indexer' AND wait_event = "
                  "'virtualxid'")
                  .get(0, 0)
                  .value_or("");
        if (pid.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ASSERT_FALSE(pid.empty()) << "the build never waited for the old snapshot";
    // Ingest goes on meanwhile: a late row for the partition being built is written at once
    // (a plain CREATE INDEX would hold it until the build ends; the guard turns that into an
    // error instead of a hang).
    {
        db::Connection late(db_.dsn(), "test late row");
        late.exec_script("SET statement_timeout = '30s'");
        late.exec_script(
            "INSERT INTO trackd.vehicle_telemetry_history (vehicle_id, recorded_at, geom, "
            "ingest_batch_id, kafka_partition, kafka_offset) VALUES ('late', "
            "'2025-06-01T10:30:00Z', ST_SetSRID(ST_MakePoint(13.1, 52.1, 0), 4326), 99, 0, 9)");
    }
    EXPECT_EQ(sql("SELECT pg_terminate_backend($1::int)", {pid}).at(0, 0), "t");
    build.join();
    ASSERT_TRUE(failure) << "the build was not interrupted";
    holder.exec_script("ROLLBACK");

    // The closed index to build (the btree) is there but invalid; the hot indexes are all
    // still there.
    EXPECT_EQ(indexes_of(kPartition), std::string(kPartition) + "_geom_spgist:true," + kPartition +
                                          "_ingest_batch_id_idx:true," + kPartition +
                                          "_time_brin:true," + kPartition + "_vehicle_hash:true," +
                                          kPartition + "_vehicle_time_idx:false");
    EXPECT_EQ(sql("SELECT closed_invalid::text FROM trackd.history_partition_indexes() "
                  "WHERE partition_name = $1",
                  {kPartition})
                  .at(0, 0),
              std::string("{") + kPartition + "_vehicle_time_idx}");

    const auto pass = HistoryIndexer(config_).run_once();
    EXPECT_EQ(pass.invalid_dropped, 1);
    EXPECT_EQ(pass.indexes_built, 1);
    EXPECT_EQ(pass.partitions, 1);
    EXPECT_EQ(indexes_of(kPartition), kClosed);
    // The late row is in the partition and found through the rebuilt btree.
    EXPECT_EQ(sql("SELECT count(*) FROM trackd.vehicle_telemetry_history_p2025060110 "
                  "WHERE vehicle_id = 'late'")
                  .at(0, 0),
              "1");
}

TEST_F(HistoryIndexesTest, SwitchingOnMakesEmptyOpenPartitionsHotAndSwitchingOffClosesThem) {
    // The migration made today's and the next days' partitions with the closed indexes; one
    // of them gets a row first.
    const auto today =
        "vehicle_telemetry_history_p" + sql("SELECT to_char(now() AT TIME ZONE 'UTC', "
                                            "'YYYYMMDD')")
                                            .at(0, 0);
    const auto later =
        "vehicle_telemetry_history_p" + sql("SELECT to_char((now() + interval '3 days') AT "
                                            "TIME ZONE 'UTC', 'YYYYMMDD')")
                                            .at(0, 0);
    sql("INSERT INTO trackd.vehicle_telemetry_history (vehicle_id, recorded_at, geom, "
        "ingest_batch_id, kafka_partition, kafka_offset) VALUES ('v', now() + interval '3 days', "
        "ST_SetSRID(ST_MakePoint(13.1, 52.1, 0), 4326), 1, 0, 0)");
    const auto open_partitions =
        sql("SELECT count(*) FROM trackd.history_partitions() WHERE NOT is_default AND "
            "range_to > now()")
            .at(0, 0);
    HistoryIndexer indexer(config_);
    EXPECT_EQ(std::to_string(indexer.defer_open_partitions()),
              std::to_string(std::stoi(open_partitions) - 1));
    EXPECT_EQ(indexes_of(today), today + "_geom_spgist:true," + today +
                                     "_ingest_batch_id_idx:true," + today + "_time_brin:true," +
                                     today + "_vehicle_hash:true");
    EXPECT_EQ(indexes_of(later), later + "_geom_spgist:true," + later +
                                     "_ingest_batch_id_idx:true," + later + "_time_brin:true," +
                                     later + "_vehicle_time_idx:true");
    // Open partitions are not due while the setting is on...
    EXPECT_EQ(indexer.run_once().partitions, 0);
    // ...and all are once it is off: their rows get the closed indexes whatever their range.
    config_.postgis.defer_indexes = false;
    const auto pass = HistoryIndexer(config_).run_once();
    EXPECT_EQ(std::to_string(pass.partitions), std::to_string(std::stoi(open_partitions) - 1));
    EXPECT_EQ(indexes_of(today), today + "_geom_spgist:true," + today +
                                     "_ingest_batch_id_idx:true," + today + "_time_brin:true," +
                                     today + "_vehicle_time_idx:true");
    EXPECT_EQ(sql("SELECT count(*) FROM trackd.history_partition_indexes() WHERE "
                  "cardinality(hot_present) > 0 OR cardinality(closed_missing) > 0")
                  .at(0, 0),
              "0");
}

// Each answer with its "timeStamp" (the time of the response) taken out.
std::string without_time_stamp(const std::string& body) {
    static const std::regex stamp(R"re("timeStamp":"[^"]*",?)re");
    return std::regex_replace(body, stamp, "");
}

TEST_F(HistoryIndexesTest, TheApiAnswersTheSameFromAHotPartitionAsFromAClosedOne) {
    script(kHotPastPartition);
    script(kRows);
    auto http_config = http_test_config(db_.dsn());
    http::Server server(http_config);
    server.start();
    HttpClient client(server.port(), kReadToken);
    const std::vector<std::string> targets = {
        // a vehicle's track over the hour, both formats
        "/v1/vehicles/veh-13/track?from=2025-06-01T10:00:00Z&to=2025-06-01T11:00:00Z",
        "/v1/vehicles/veh-13/track?from=2025-06-01T10:00:00Z&to=2025-06-01T11:00:00Z"
        "&format=points&limit=1000",
        // positions in a bbox over the last 10 minutes of the hour
        "/collections/positions/items?bbox=13.1,52.05,13.2,52.15"
        "&datetime=2025-06-01T10:50:00Z/2025-06-01T11:00:00Z&limit=1000",
        // positions by time window, paged
        "/collections/positions/items?datetime=2025-06-01T10:20:00Z/2025-06-01T10:24:59Z"
        "&limit=50",
        "/collections/positions/items?datetime=2025-06-01T10:20:00Z/2025-06-01T10:24:59Z"
        "&limit=50&after=1748773380000000_3_1_1023",
        // full extent
        "/collections/positions/items?bbox=-180,-90,180,90&limit=1000",
        "/collections/positions/items?limit=1000&after=1748772000000000_1_0_0",
    };
    std::vector<std::string> hot;
    for (const auto& t : targets) {
        const auto r = client.get(t);
        ASSERT_EQ(r.status, 200) << t << ": " << r.body;
        hot.push_back(without_time_stamp(r.body));
    }
    // The answers are what the rows are: veh-13 reported 60 times; the bbox and window hold
    // the rows counted from the table without any index.
    EXPECT_NE(hot[0].find("\"points\":60"), std::string::npos) << hot[0];
    db::Connection scan(db_.dsn(), "test");
    scan.exec_script("SET enable_indexscan = off; SET enable_bitmapscan = off");
    const auto in_bbox =
        scan.query(
                "SELECT count(*) FROM trackd.vehicle_telemetry_history WHERE geom && "
                "ST_MakeEnvelope(13.1, 52.05, 13.2, 52.15, 4326) AND recorded_at >= "
                "'2025-06-01T10:50:00Z' AND recorded_at <= '2025-06-01T11:00:00Z'")
            .at(0, 0);
    EXPECT_NE(in_bbox, "0");
    EXPECT_NE(hot[2].find("\"numberMatched\":" + in_bbox), std::string::npos) << hot[2];
    EXPECT_NE(hot[3].find("\"numberMatched\":200"), std::string::npos) << hot[3];
    EXPECT_NE(hot[5].find("\"numberMatched\":2400"), std::string::npos) << hot[5];

    const auto pass = HistoryIndexer(config_).run_once();
    ASSERT_EQ(pass.partitions, 1);
    ASSERT_EQ(indexes_of(kPartition), kClosed);
    sql("ANALYZE trackd.vehicle_telemetry_history");
    for (std::size_t i = 0; i < targets.size(); ++i) {
        const auto r = client.get(targets[i]);
        ASSERT_EQ(r.status, 200) << targets[i] << ": " << r.body;
        EXPECT_EQ(without_time_stamp(r.body), hot[i]) << targets[i];
    }
}

// V0017: the history's BRINs have no autosummarize (PostgreSQL's requests overflow under a heavy
// ingest and are dropped, each with a LOG line); trackd's index maintenance summarizes the new
// block ranges of the partitions being written on every pass, and the summaries answer exactly.
TEST_F(HistoryIndexesTest, ThePartitionsBeingWrittenHaveTheirBrinRangesSummarizedByEachPass) {
    // A partition made after V0017: its share of the parent's BRIN is made before ATTACH,
    // without the option, and is the parent's index on it.
    sql("SELECT trackd.create_history_partitions('2099-02-01T00:00:00Z', "
        "'2099-02-01T01:00:00Z', 'day')");
    EXPECT_EQ(sql("SELECT coalesce(array_to_string(i.reloptions, ','), '') || ':' || "
                  "(SELECT p.relname FROM pg_inherits h JOIN pg_class p ON p.oid = h.inhparent "
                  "WHERE h.inhrelid = i.oid) FROM pg_class i WHERE i.relname = "
                  "'vehicle_telemetry_history_p20990201_ingest_batch_id_idx'")
                  .at(0, 0),
              ":vehicle_telemetry_history_batch_brin");
    // The partition of today, made by the migrations before V0017 and empty then: the option
    // is off on every one of its indexes.
    const auto today = todays_partition();
    EXPECT_EQ(sql("SELECT count(*) FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid "
                  "WHERE x.indrelid = ('trackd.' || $1)::regclass "
                  "AND i.reloptions @> ARRAY['autosummarize=on']",
                  {today})
                  .at(0, 0),
              "0");
    // Rows into it in two batches.
    insert_now(1, 30000);
    const int ranges = complete_ranges(today);
    ASSERT_GE(ranges, 3);
    config_.postgis.defer_indexes = false;
    HistoryIndexer indexer(config_);
    // The BRINs' complete ranges; the last of each, still filling, once it is complete.
    EXPECT_EQ(indexer.run_once().ranges_summarized, ranges);
    EXPECT_EQ(indexer.run_once().ranges_summarized, 0);
    // Rows after the summaries, into the last range and new ones: both batches are found whole
    // through the BRIN, and the next pass summarizes exactly the ranges completed since.
    insert_now(2, 20000);
    for (const auto& [batch, want] : {std::pair{"1", "30000"}, std::pair{"2", "20000"}}) {
        db::Connection conn(db_.dsn(), "test");
        conn.exec_script("SET enable_seqscan = off");
        const std::string from =
            std::string(" FROM trackd.vehicle_telemetry_history WHERE ingest_batch_id = ") + batch;
        EXPECT_EQ(conn.query("SELECT count(*)" + from).at(0, 0), want);
        const auto text = explain(conn, "SELECT count(*)" + from);
        EXPECT_NE(text.find("Bitmap Index Scan on " + today + "_ingest_batch_id_idx"),
                  std::string::npos)
            << text;
    }
    // A time window over every vehicle is read through the BRIN on recorded_at (V0019).
    {
        db::Connection conn(db_.dsn(), "test");
        // (on rows this few the planner would rather read the whole btree)
        conn.exec_script(
            "SET enable_seqscan = off; SET enable_indexscan = off; "
            "SET enable_indexonlyscan = off");
        const std::string from = " FROM trackd.vehicle_telemetry_history WHERE recorded_at >= '" +
                                 today_at_ +
                                 "'::timestamptz - interval '1 hour' AND recorded_at <= '" +
                                 today_at_ + "'::timestamptz + interval '1 hour'";
        EXPECT_EQ(conn.query("SELECT count(*)" + from).at(0, 0), "50000");
        const auto text = explain(conn, "SELECT count(*)" + from);
        EXPECT_NE(text.find("Bitmap Index Scan on " + today + "_time_brin"), std::string::npos)
            << text;
    }
    const int after = complete_ranges(today);
    ASSERT_GT(after, ranges);
    EXPECT_EQ(indexer.run_once().ranges_summarized, after - ranges);
    EXPECT_EQ(indexer.run_once().ranges_summarized, 0);
}

// V0020: a partition being written that holds rows but has no statistics yet (autovacuum has not
// analyzed it: its first minute or so) is analyzed by the next pass, once. Without statistics the
// planner reads a time window over every vehicle through the whole (vehicle_id, recorded_at)
// btree; with them, through the BRIN on recorded_at.
TEST_F(HistoryIndexesTest, APartitionBeingWrittenIsAnalyzedOnceItHoldsRowsAndWindowsUseTheBrin) {
    const auto today = todays_partition();  // autovacuum off: only trackd analyzes it
    config_.postgis.defer_indexes = false;
    HistoryIndexer indexer(config_);
    EXPECT_EQ(indexer.run_once().partitions_analyzed, 0);  // empty: nothing to learn from
    // 200,000 rows of 1,000 vehicles in time order, 10 ms apart, as a live stream writes them.
    sql("INSERT INTO trackd.vehicle_telemetry_history (vehicle_id, recorded_at, geom, "
        "ingest_batch_id, kafka_partition, kafka_offset) SELECT 'veh-' || (n % 1000), "
        "p.range_from + n * interval '10 ms', ST_SetSRID(ST_MakePoint(13 + (n % 100) * 0.001, "
        "52, 0), 4326), n / 1000 + 1, 0, n FROM trackd.history_partitions() p, "
        "generate_series(0, 199999) n WHERE p.partition_name = $1",
        {today});
    const auto stats = [&] {
        return sql("SELECT count(*) FROM pg_stats WHERE schemaname = 'trackd' AND tablename = $1 "
                   "AND attname = 'recorded_at' AND correlation > 0.99",
                   {today})
            .at(0, 0);
    };
    // One second ten minutes into the partition: exactly 100 rows.
    const auto window = [&](const char* expected_index) {
        db::Connection conn(db_.dsn(), "test");
        const auto from =
            conn.query(
                    "SELECT range_from + interval '10 min' FROM trackd.history_partitions() "
                    "WHERE partition_name = $1",
                    {today})
                .at(0, 0);
        const std::string query =
            "SELECT count(*) FROM trackd.vehicle_telemetry_history WHERE recorded_at >= '" + from +
            "'::timestamptz AND recorded_at < '" + from + "'::timestamptz + interval '1 s'";
        EXPECT_EQ(conn.query(query).at(0, 0), "100");
        const auto text = explain(conn, query);
        EXPECT_NE(text.find(today + expected_index + " "), std::string::npos) << text;
    };
    EXPECT_EQ(stats(), "0");
    window("_vehicle_time_idx");

    EXPECT_EQ(indexer.run_once().partitions_analyzed, 1);
    EXPECT_EQ(stats(), "1");
    window("_time_brin");
    EXPECT_EQ(indexer.run_once().partitions_analyzed, 0);  // once: autovacuum keeps them since
}

// run() keeps the partitions being written summarized and analyzed on its own connection and
// thread: a closed partition's build that waits (here for an old snapshot; on a large partition
// a build takes minutes) holds neither up.
TEST_F(HistoryIndexesTest, ABuildThatWaitsHoldsUpNoSummaryOfThePartitionsBeingWritten) {
    script(kHotPastPartition);
    script(kRows);
    const auto today = todays_partition();
    db::Connection holder(db_.dsn(), "test snapshot holder");
    holder.exec_script("BEGIN ISOLATION LEVEL REPEATABLE READ");
    holder.query("SELECT count(*) FROM trackd.vehicle_current_state");

    config_.postgis.index_check_interval_s = 1;
    std::atomic<bool> stop{false};
    HistoryIndexer indexer(config_);
    std::thread loops([&] { indexer.run(stop); });
    struct Join {
        db::Connection& holder;
        std::atomic<bool>& stop;
        std::thread& loops;
        ~Join() {
            try {
                holder.exec_script("ROLLBACK");  // lets the build end, if it still waits
            } catch (const db::DbError&) {
            }
            stop = true;
            loops.join();
        }
    } join{holder, stop, loops};
    const auto build_waits = [&] {
        return sql("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                   "AND application_name = 'trackd history indexer' AND wait_event = "
                   "'virtualxid'")
                   .at(0, 0) == "1";
    };
    const auto eventually = [](const std::function<bool()>& done) {
        for (int i = 0; i < 600; ++i) {  // up to a minute
            if (done()) return true;
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        return false;
    };
    ASSERT_TRUE(eventually(build_waits)) << "the build never waited for the old snapshot";

    // The counter's value in the metrics text, as Prometheus reads it.
    const auto summarized = [] {
        const std::string name = "\ntrackd_history_brin_ranges_summarized_total ";
        const auto text = core::metrics::registry().render();
        const auto at = text.find(name);
        return at == std::string::npos ? 0.0 : std::stod(text.substr(at + name.size()));
    };
    const double before = summarized();
    // Rows into today's partition while the build waits: the other loop summarizes their
    // complete ranges and analyzes the partition (in that order) within a few passes.
    insert_now(1, 30000);
    const int ranges = complete_ranges(today);
    ASSERT_GE(ranges, 3);
    EXPECT_TRUE(eventually([&] {
        return sql("SELECT count(*) FROM pg_stats WHERE schemaname = 'trackd' AND "
                   "tablename = $1 AND attname = 'recorded_at'",
                   {today})
                   .at(0, 0) == "1";
    })) << "today's partition was not analyzed while the build waited";
    EXPECT_EQ(summarized() - before, ranges);
    EXPECT_TRUE(build_waits());

    holder.exec_script("ROLLBACK");
    EXPECT_TRUE(eventually([&] { return indexes_of(kPartition) == kClosed; }))
        << indexes_of(kPartition);
}

// The summaries' lock wait is bounded and ingest never waits for them: with another session
// holding the partition's SHARE UPDATE EXCLUSIVE lock (a VACUUM, an index build, a DBA frozen
// in a transaction), a pass summarizes nothing there and returns (100 ms per index at most),
// a write into the partition goes through meanwhile, and the pass after the lock is gone
// summarizes every complete range.
TEST_F(HistoryIndexesTest, ASummaryGivesWayToAHeldLockAndNoWriteWaitsForIt) {
    const auto today = todays_partition();
    insert_now(1, 30000);

    db::Connection holder(db_.dsn(), "test holder");
    holder.exec_script("BEGIN; LOCK TABLE trackd." + today + " IN SHARE UPDATE EXCLUSIVE MODE");
    config_.postgis.defer_indexes = false;
    HistoryIndexer indexer(config_);
    const auto held = indexer.run_once();
    EXPECT_EQ(held.ranges_summarized, 0);
    EXPECT_EQ(held.partitions_analyzed, 0);  // ANALYZE waits for the same lock (V0020)
    {
        db::Connection writer(db_.dsn(), "test writer");
        writer.exec_script("SET lock_timeout = '5s'");  // a wait fails the test, not hangs it
        insert_now(writer, 2, 100);
    }
    holder.exec_script("COMMIT");

    const int ranges = complete_ranges(today);
    ASSERT_GE(ranges, 3);
    const auto after = indexer.run_once();
    EXPECT_EQ(after.ranges_summarized, ranges);
    EXPECT_EQ(after.partitions_analyzed, 1);
    EXPECT_EQ(sql("SELECT count(*) FROM trackd.vehicle_telemetry_history").at(0, 0), "30100");
}

// A past hour's partition with rows and no statistics, which counts as being written when the
// grace is long enough (kGraceS): a partition both V0020's ANALYZE and retention may take.
constexpr const char* kPastWithRows = R"SQL(
SELECT trackd.create_history_partitions('2025-06-01T10:00:00Z', '2025-06-01T11:00:00Z', 'hour');
ALTER TABLE trackd.vehicle_telemetry_history_p2025060110 SET (autovacuum_enabled = false);
INSERT INTO trackd.vehicle_telemetry_history (vehicle_id, recorded_at, geom, ingest_batch_id,
  kafka_partition, kafka_offset)
SELECT 'veh-' || (n % 50), '2025-06-01T10:00:00Z'::timestamptz + n * interval '100 ms',
       ST_SetSRID(ST_MakePoint(13, 52, 0), 4326), 1, 0, n FROM generate_series(1, 20000) n;
)SQL";
constexpr int kGraceS = 20 * 365 * 86400;
constexpr const char* kHoldPastPartition =
    "BEGIN; LOCK TABLE trackd.vehicle_telemetry_history_p2025060110 IN ACCESS EXCLUSIVE MODE";

// The backend running `sql` on `conn` (application_name `name`) from another thread, once it
// waits for a lock; "" if it never did within a minute.
std::string pid_waiting_for_lock(db::Connection& observer, const std::string& name) {
    for (int i = 0; i < 3000; ++i) {
        const auto pid = observer
                             .query(
                                 "SELECT pid::text FROM pg_stat_activity WHERE datname = "
                                 "current_database() AND application_name = $1 AND "
                                 "wait_event_type = 'Lock'",
                                 {name})
                             .get(0, 0);
        if (pid) return *pid;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return "";
}

// The history partitions with statistics on recorded_at, in name order.
std::string analyzed(db::Connection& conn) {
    return conn
        .query(
            "SELECT string_agg(tablename, ',' ORDER BY tablename) FROM pg_stats WHERE "
            "schemaname = 'trackd' AND tablename LIKE 'vehicle\\_telemetry\\_history\\_p%' "
            "AND attname = 'recorded_at'")
        .get(0, 0)
        .value_or("");
}

// trackd.analyze_new_history_partitions() with kGraceS and a minute's lock wait, on a session
// ("test analyze") and thread of its own; join() before reading what it returned or threw.
struct BackgroundAnalyze {
    explicit BackgroundAnalyze(const std::string& dsn)
        : thread([this, dsn] {
              try {
                  db::Connection conn(dsn, "test analyze");
                  returned = conn.query("SELECT trackd.analyze_new_history_partitions($1, 60000)",
                                        {std::to_string(kGraceS)})
                                 .at(0, 0);
              } catch (...) {
                  failure = std::current_exception();
              }
          }) {}
    void join() { thread.join(); }

    std::string returned;
    std::exception_ptr failure;
    std::thread thread;  // last: it starts once the members it writes exist
};

// Retention drops a partition while V0020's ANALYZE waits for it: the ANALYZE passes over it,
// and the call analyzes the others and returns. Retention's DROP holds the history table's
// ACCESS EXCLUSIVE lock (trackd.drop_history_partitions_before); the call waits for it as long
// as its lock timeout lets it (a minute here, so that the DROP commits first).
TEST_F(HistoryIndexesTest, AnAnalyzeRacingRetentionsDropOfItsPartitionPassesOverIt) {
    script(kPastWithRows);
    const auto today = todays_partition();
    insert_now(1, 20000);
    db::Connection retention(db_.dsn(), "test retention");
    retention.exec_script(kHoldPastPartition);

    BackgroundAnalyze analyze(db_.dsn());
    db::Connection observer(db_.dsn(), "test observer");
    const bool waited = !pid_waiting_for_lock(observer, "test analyze").empty();
    EXPECT_EQ(
        retention.query("SELECT trackd.drop_history_partitions_before('2025-06-02')").at(0, 0),
        "1");
    retention.exec_script("COMMIT");
    analyze.join();
    ASSERT_TRUE(waited) << "the ANALYZE never waited for retention's lock";
    if (analyze.failure) {
        try {
            std::rethrow_exception(analyze.failure);
        } catch (const std::exception& e) {
            FAIL() << "the call failed: " << e.what();
        }
    }
    EXPECT_EQ(analyze.returned, "1");  // today's partition
    EXPECT_EQ(analyzed(observer), today);
}

// trackd killed while V0020's ANALYZE runs: the call's one transaction ends with its session,
// so a partition it had analyzed already loses those statistics too, and the next pass (here
// a new indexer, as a restarted trackd) analyzes every partition again. The call is caught
// after analyzing the past partition, waiting for today's, whose lock a holder keeps.
TEST_F(HistoryIndexesTest, AnAnalyzeWhoseSessionIsKilledLeavesNoStatisticsAndTheNextPassAnalyzes) {
    script(kPastWithRows);
    const auto today = todays_partition();
    insert_now(1, 20000);
    db::Connection holder(db_.dsn(), "test holder");
    holder.exec_script("BEGIN; LOCK TABLE trackd." + today + " IN SHARE UPDATE EXCLUSIVE MODE");

    BackgroundAnalyze analyze(db_.dsn());
    db::Connection observer(db_.dsn(), "test observer");
    const auto pid = pid_waiting_for_lock(observer, "test analyze");
    if (!pid.empty()) {
        EXPECT_EQ(observer.query("SELECT pg_terminate_backend($1::int)", {pid}).at(0, 0), "t");
    }
    analyze.join();
    ASSERT_FALSE(pid.empty()) << "the ANALYZE never waited for today's partition";
    EXPECT_TRUE(analyze.failure) << "the call was not cut off";
    holder.exec_script("COMMIT");
    EXPECT_EQ(analyzed(observer), "") << "statistics of a transaction that did not commit";

    config_.postgis.defer_indexes = false;
    config_.postgis.index_grace_s = kGraceS;
    EXPECT_EQ(HistoryIndexer(config_).run_once().partitions_analyzed, 2);
    EXPECT_EQ(analyzed(observer), std::string(kPartition) + "," + today);
}

// A DBA's VACUUM FULL, CLUSTER or ALTER TABLE on an old partition holds its ACCESS EXCLUSIVE
// lock for as long as it runs. Listing the partitions (trackd.history_partitions(), V0021)
// takes no lock on any of them, so the partitions being written still get their summaries
// and statistics meanwhile: only the partition that is held waits.
TEST_F(HistoryIndexesTest, AnOldPartitionHeldByADbaHoldsUpNoMaintenanceOfTheOthers) {
    script(kPastWithRows);
    const auto today = todays_partition();
    insert_now(1, 30000);
    db::Connection dba(db_.dsn(), "test dba");
    dba.exec_script(kHoldPastPartition);
    config_.postgis.defer_indexes = false;
    const auto pass = HistoryIndexer(config_).run_once();  // the past one is closed too
    EXPECT_EQ(pass.ranges_summarized, complete_ranges(today));
    EXPECT_EQ(pass.partitions_analyzed, 1);
    db::Connection observer(db_.dsn(), "test observer");
    EXPECT_EQ(analyzed(observer), today);
    dba.exec_script("ROLLBACK");
}

}  // namespace
}  // namespace trackd::test
