// The Iceberg archive end to end: history ingested by trackd from the real broker into the real
// PostGIS, archived by `trackd run` / `trackd archive`, then read back by independent readers
// (PyIceberg's SqlCatalog on the same PostgreSQL or its RestCatalog, DuckDB's iceberg_scan,
// fastavro) through tests/integration/archive_check.py, in the project's .venv
// (scripts/python-env.sh). The exactness, crash and conflicting-writer cases run over a setup
// (catalog x storage): the JDBC catalog with a local warehouse (Archive.*), Apache Iceberg's REST
// catalog server (ArchiveRest.*, scripts/iceberg-rest.sh), the JDBC catalog with an s3://
// warehouse on a real S3 server (ArchiveS3.*, moto, scripts/s3.sh), and REST with S3
// (ArchiveRestS3.*). Object-storage maintenance (orphans, expiry) is ArchiveS3.* too.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "support/archive_fixture.hpp"
#include "support/free_port.hpp"
#include "support/http_front.hpp"
#include "support/ingest_harness.hpp"
#include "support/own_services.hpp"
#include "support/pg_fault_proxy.hpp"
#include "support/tcp_relay.hpp"
#include "support/test_ca.hpp"

namespace trackd::test {
namespace {

std::int64_t query_int(const std::string& dsn, const std::string& sql) {
    db::Connection conn(dsn, "test");
    const auto v = conn.query(sql).get(0, 0);
    return v ? std::stoll(*v) : -1;
}

// Polls `sql` (one integer) until it returns `want`; false after `timeout`.
bool wait_for_value(const std::string& dsn, const std::string& sql, std::int64_t want,
                    std::chrono::seconds timeout) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < until) {
        if (query_int(dsn, sql) == want) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
}

// The instant a test's rows are written back from, the same for every call in the process (each
// test is a process of its own): the test's first `now()`, or the last second before midnight
// UTC when that falls in the first 20 minutes of a day. So rows up to 20 minutes before it lie on
// one UTC day, and a test's Iceberg day partitions do not depend on the hour it runs at.
const std::string& rows_time_base(db::Connection& conn) {
    static const std::string base =
        conn.query(
                "SELECT CASE WHEN (now() AT TIME ZONE 'UTC')::time < '00:20' THEN "
                "date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' - "
                "interval '1 second' ELSE now() END")
            .get(0, 0)
            .value();
    return base;
}

// Seven history rows of batch `batch` (3 vehicles, offsets batch * 100 + 1..7), written `batch`
// minutes and a few seconds before rows_time_base(), as a DBA's INSERT through the partitioned
// table would: a commit of one is one data file of one day partition.
void insert_small_batch(db::Connection& conn, int batch) {
    conn.query(
        "INSERT INTO trackd.vehicle_telemetry_history SELECT 'veh-' || (g % 3), $2::timestamptz "
        "- g * interval '1 second' - $1::int * interval '1 minute', ST_SetSRID(ST_MakePoint(13 + "
        "g * 0.01, 52, 0), 4326), 10, NULL, NULL, NULL, $1::bigint, 0, $1::bigint * 100 + g FROM "
        "generate_series(1, 7) g",
        {std::to_string(batch), rows_time_base(conn)});
}

// Batches not yet in the archive (0: all of them are).
constexpr const char* kAllArchived =
    "SELECT count(*) FROM trackd.ingest_batches WHERE archive_seq IS NULL OR archive_seq > "
    "coalesce((SELECT archived_seq FROM trackd.archive_progress), -1)";

std::size_t count_of(const std::string& text, const std::string& what) {
    std::size_t n = 0;
    for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
}

// The last line of a command's output (a failure's message).
std::string last_line(const std::string& output) {
    return output.substr(output.rfind('\n', output.size() - 2) + 1);
}

// One `archive --once` through a front of the S3 server (rest_proxy.py --s3 with `faults`), with
// `env`: its result, the front's log and how long the archive took.
struct ThroughFront {
    CommandResult run;
    std::string front;
    double seconds = 0;
};
ThroughFront archive_once_through_s3_front(const ArchiveFixture& a, const std::string& tag,
                                           std::vector<std::string> faults,
                                           std::map<std::string, std::string> env) {
    faults.insert(faults.begin(), "--s3");
    const HttpFront front(tag, s3_endpoint(), faults);
    env["TRACKD_ARCHIVE_S3_ENDPOINT"] = front.uri;
    const auto t0 = std::chrono::steady_clock::now();
    auto run = a.archive("--once", env);
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - t0;
    return {std::move(run), front.text(), took.count()};
}

bool wait_for_log(const std::string& path, const std::string& text, std::chrono::seconds timeout) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < until) {
        if (IngestHarness::read_file(path).find(text) != std::string::npos) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
}

// "arch" + "rest" for the REST catalog + "s3" for an s3:// warehouse: the names of the test's
// database, bucket and logs.
std::string tag_of(const char* base, ArchiveSetup s) {
    return std::string(base) + (s.catalog == CatalogKind::rest ? "rest" : "") +
           (s.storage == StorageKind::s3 ? "s3" : "");
}

void ingested_history_read_back(ArchiveSetup setup, int messages) {
    const std::string tag = tag_of("arch", setup);
    IngestHarness h(tag, 4);
    ArchiveFixture a(h.db().dsn(), tag, setup);
    const int kMessages = messages;
    h.produce(300, kMessages);
    // trackd run archives as it ingests (archive.enabled); the test waits for an exact state.
    auto env = a.env({{"TRACKD_ARCHIVE_ENABLED", "true"}});
    env.erase("TRACKD_PG_DSN");
    auto trackd = h.start_trackd(env);
    ASSERT_TRUE(h.wait_drained(kMessages, std::chrono::seconds(300)))
        << IngestHarness::read_file(h.log_path());
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (query_int(h.db().dsn(),
                     "SELECT coalesce(max(archived_seq), 0) FROM "
                     "trackd.archive_progress") <= 0 &&
           std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    trackd->kill(SIGTERM);
    ASSERT_TRUE(trackd->wait_for(std::chrono::seconds(20)));
    EXPECT_EQ(trackd->exit_code(), 0) << IngestHarness::read_file(h.log_path());
    EXPECT_NE(IngestHarness::read_file(h.log_path()).find("archive committed"), std::string::npos)
        << "trackd run should have archived while ingesting";

    // Whatever the running archiver had not committed yet.
    auto once = a.archive("--once");
    ASSERT_EQ(once.exit_code, 0) << once.output;
    h.check_accounting(load_manifest(h.manifest_path()));
    expect_exact(a.check("compare"));
    expect_avro_ok(a.check("avro"));
    if (setup.storage == StorageKind::s3) {
        // Every file in the bucket, metadata.json included (written by the REST server, or by
        // trackd with JDBC), and none missing.
        const auto f = a.check("files");
        EXPECT_EQ(f.at("metadata_location").rfind(a.table_dir() + "/metadata/", 0), 0U)
            << f.at("metadata_location");
        EXPECT_EQ(f.at("missing_files"), "0");
    }

    // The database's mirror of the progress agrees with the table (with a REST catalog it is
    // written after each commit, not in the same transaction).
    const auto info = a.check("table");
    EXPECT_EQ(info.at("current_operation"), "append");
    EXPECT_EQ(query_int(h.db().dsn(),
                        "SELECT count(*) FROM trackd.ingest_batches WHERE "
                        "archive_seq IS NULL OR archive_seq > (SELECT archived_seq "
                        "FROM trackd.archive_progress)"),
              0);

    // Nothing new: a second run commits nothing.
    once = a.archive("--once");
    ASSERT_EQ(once.exit_code, 0) << once.output;
    EXPECT_NE(once.output.find("archived 0 rows in 0 commits"), std::string::npos) << once.output;

    // One archiver at a time: with the lock held elsewhere, --once refuses and says so.
    db::Connection holder(h.db().dsn(), "test lock holder");
    const std::string lock_name =
        "trackd.archive trackd." + a.namespace_name() + ".vehicle_positions";
    // The archiver that just exited holds the session lock until its backend has ended.
    bool locked = false;
    for (int i = 0; i < 50 && !locked; ++i) {
        locked = holder.query("SELECT pg_try_advisory_lock(hashtextextended($1, 0))", {lock_name})
                     .at(0, 0) == "t";
        if (!locked) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ASSERT_TRUE(locked);
    once = a.archive("--once");
    EXPECT_EQ(once.exit_code, 3) << once.output;
    EXPECT_NE(once.output.find("another archiver holds the lock"), std::string::npos)
        << once.output;
}

constexpr ArchiveSetup kJdbcLocal{CatalogKind::jdbc, StorageKind::local};
constexpr ArchiveSetup kRestLocal{CatalogKind::rest, StorageKind::local};
constexpr ArchiveSetup kJdbcS3{CatalogKind::jdbc, StorageKind::s3};
constexpr ArchiveSetup kRestS3{CatalogKind::rest, StorageKind::s3};

TEST(Archive, IngestedHistoryReadBackByPyIcebergDuckDbAndFastavro) {
    ingested_history_read_back(kJdbcLocal, 30000);
}

TEST(ArchiveRest, IngestedHistoryReadBackByPyIcebergDuckDbAndFastavro) {
    ingested_history_read_back(kRestLocal, 30000);
}

TEST(ArchiveS3, IngestedHistoryReadBackByPyIcebergDuckDbAndFastavro) {
    ingested_history_read_back(kJdbcS3, 20000);
}

// trackd writes data files, manifests and manifest lists to the bucket, the REST catalog server
// writes metadata.json there (ResolvingFileIO -> S3FileIO), the readers read both.
TEST(ArchiveRestS3, IngestedHistoryReadBackByPyIcebergDuckDbAndFastavro) {
    ingested_history_read_back(kRestS3, 20000);
}

// The reason the progress marker is not "the highest archived batch id": batch ids come from a
// sequence but writers commit in parallel, so a lower id can commit after a higher one.
void batch_committing_later_archived_once(ArchiveSetup setup) {
    const std::string tag = tag_of("archorder", setup);
    TestDatabase db(tag, Schema::migrated);
    ArchiveFixture a(db.dsn(), tag, setup);
    auto insert = [](db::Connection& c, std::int64_t batch, int partition) {
        c.query(
            "INSERT INTO trackd.vehicle_telemetry_history SELECT 'veh-' || g, now() - g * "
            "interval '1 minute', ST_SetSRID(ST_MakePoint(13 + g * 0.001, 52, 0), 4326), NULL, "
            "NULL, NULL, NULL, $1::bigint, $2::int, $3::bigint * 1000 + g FROM "
            "generate_series(1, 10) g",
            {std::to_string(batch), std::to_string(partition), std::to_string(batch)});
    };
    db::Connection slow(db.dsn(), "test slow writer");
    db::Connection fast(db.dsn(), "test fast writer");
    slow.exec_script("BEGIN");
    const auto low =
        std::stoll(slow.query("SELECT nextval('trackd.ingest_batch_id_seq')").at(0, 0));
    insert(slow, low, 0);
    fast.exec_script("BEGIN");
    const auto high =
        std::stoll(fast.query("SELECT nextval('trackd.ingest_batch_id_seq')").at(0, 0));
    ASSERT_LT(low, high);
    insert(fast, high, 1);
    fast.exec_script("COMMIT");

    auto once = a.archive("--once");
    ASSERT_EQ(once.exit_code, 0) << once.output;
    EXPECT_NE(once.output.find("archived 10 rows"), std::string::npos) << once.output;

    slow.exec_script("COMMIT");  // the lower id commits after the higher one was archived
    // Another writer (PyIceberg; through a REST catalog, a snapshot of its own) commits while
    // this archiver has built its new version but not committed it: the compare-and-swap (the
    // REST server's assert-ref-snapshot-id) fails, the archiver reloads and commits on top.
    const std::string log = ::testing::TempDir() + tag + "-" + std::to_string(getpid()) + ".log";
    const std::string release = log + ".go";
    fs::remove(log);
    fs::remove(release);
    ChildProcess archiver({trackd_binary(), "archive", "--once"},
                          a.env({{"TRACKD_TEST_ARCHIVE_PAUSE_AT", "metadata-written@" + release}}),
                          log);
    ASSERT_TRUE(wait_for_log(log, "archive paused at metadata-written", std::chrono::seconds(60)))
        << IngestHarness::read_file(log);
    EXPECT_NE(a.check("touch").count("metadata_location"), 0U);
    std::ofstream(release) << "go";
    EXPECT_EQ(archiver.wait(), 0) << IngestHarness::read_file(log);
    EXPECT_NE(IngestHarness::read_file(log).find("archive commit conflict, retrying"),
              std::string::npos)
        << IngestHarness::read_file(log);
    const auto c = a.check("compare");
    expect_exact(c);
    EXPECT_EQ(c.at("iceberg_rows"), "20");
    EXPECT_EQ(a.check("table").at("analyst_note"), "kept");
}

TEST(Archive, BatchCommittingLaterWithALowerIdIsArchivedOnce) {
    batch_committing_later_archived_once(kJdbcLocal);
}

TEST(ArchiveRest, BatchCommittingLaterWithALowerIdIsArchivedOnceBesideAnotherWriter) {
    batch_committing_later_archived_once(kRestLocal);
}

// The other writer (PyIceberg) writes its metadata.json to the bucket too.
TEST(ArchiveS3, BatchCommittingLaterWithALowerIdIsArchivedOnceBesideAnotherWriter) {
    batch_committing_later_archived_once(kJdbcS3);
}

void survives_sigkill(ArchiveSetup setup, int messages) {
    const std::string tag = tag_of("archcrash", setup);
    IngestHarness h(tag, 4);
    ArchiveFixture a(h.db().dsn(), tag, setup);
    const int kMessages = messages;
    // Ingest goes on (trackd run, archive disabled) while archivers are killed.
    ChildProcess fleet(h.fleet_command(500, kMessages, 4000), {},
                       ::testing::TempDir() + tag + "-fleet.log");
    auto trackd = h.start_trackd();
    const std::string log =
        ::testing::TempDir() + tag + "-archiver-" + std::to_string(getpid()) + ".log";
    // Small files so that a commit writes several, and kills land between them too.
    const std::map<std::string, std::string> small = {
        {"TRACKD_ARCHIVE_TARGET_FILE_BYTES", "65536"}};

    // Exactly at each step of a commit: after the data files, after the new metadata file,
    // inside the catalog transaction before COMMIT, and right after COMMIT.
    int kills = 0;
    for (const char* point :
         {"data-files-written", "metadata-written", "catalog-transaction", "committed"}) {
        auto env = small;
        env["TRACKD_TEST_ARCHIVE_PAUSE_AT"] = point;
        fs::remove(log);
        auto archiver = a.start_archiver(log, env);
        ASSERT_TRUE(
            wait_for_log(log, std::string("archive paused at ") + point, std::chrono::seconds(120)))
            << IngestHarness::read_file(log);
        archiver->kill(SIGKILL);
        archiver->wait();
        ++kills;
    }
    // And at random moments while ingest goes on.
    std::mt19937 rng(4242);
    std::uniform_int_distribution<int> run_ms(200, 2500);
    int random_kills = 0;
    while (random_kills < 6 || fleet.running()) {
        auto archiver = a.start_archiver(log, small);
        std::this_thread::sleep_for(std::chrono::milliseconds(run_ms(rng)));
        ASSERT_TRUE(archiver->running()) << IngestHarness::read_file(log);
        archiver->kill(SIGKILL);
        archiver->wait();
        ++random_kills;
        ASSERT_LT(random_kills, 200);
    }
    ASSERT_EQ(fleet.wait(), 0);
    ASSERT_TRUE(h.wait_drained(kMessages, std::chrono::seconds(300)))
        << IngestHarness::read_file(h.log_path());
    trackd->kill(SIGTERM);
    ASSERT_TRUE(trackd->wait_for(std::chrono::seconds(30))) << "trackd did not stop on SIGTERM";

    const auto once = a.archive("--once", small);
    ASSERT_EQ(once.exit_code, 0) << once.output;
    std::printf("[ measured ] archiver killed %d times at commit steps, %d at random moments\n",
                kills, random_kills);
    h.check_accounting(load_manifest(h.manifest_path()));
    expect_exact(a.check("compare"));
    expect_avro_ok(a.check("avro"));
}

TEST(Archive, SurvivesSigkillAtRandomMomentsAndDuringCommits) {
    survives_sigkill(kJdbcLocal, 60000);
}

// "catalog-transaction" is, with a REST catalog, the moment before the commit request leaves.
TEST(ArchiveRest, SurvivesSigkillAtRandomMomentsAndDuringCommits) {
    survives_sigkill(kRestLocal, 30000);
}

// Killed between the uploads and the commit, the objects are orphans in the bucket; the next
// archiver commits the same rows again, once.
TEST(ArchiveS3, SurvivesSigkillAtRandomMomentsAndDuringCommits) {
    survives_sigkill(kJdbcS3, 20000);
}

// archive.partition = "hour": a new table is partitioned by hour(recorded_at), files in
// recorded_at_hour=YYYY-MM-DD-HH folders that PyIceberg and DuckDB read; a later run configured
// for day partitions is refused, naming the key, since a table's spec is fixed at creation.
TEST(Archive, HourPartitionsFixedAtCreation) {
    TestDatabase db("archhour", Schema::migrated);
    ArchiveFixture a(db.dsn(), "archhour");
    db::Connection conn(db.dsn(), "test");
    // 30 rows, one every 5 minutes from 10:00 UTC yesterday: hours 10, 11 and 12.
    conn.query(
        "INSERT INTO trackd.vehicle_telemetry_history SELECT 'veh-' || (g % 4), "
        "date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' - interval '14 hours' + "
        "g * interval '5 minutes', ST_SetSRID(ST_MakePoint(13 + g * 0.001, 52, 0), 4326), 10, "
        "NULL, NULL, NULL, 1, 0, g FROM generate_series(0, 29) g");
    auto once = a.archive("--once", {{"TRACKD_ARCHIVE_PARTITION", "hour"}});
    ASSERT_EQ(once.exit_code, 0) << once.output;
    auto info = a.check("table");
    EXPECT_EQ(info.at("partition_fields"), "recorded_at_hour:hour");
    EXPECT_EQ(info.at("partitions"), "3");
    EXPECT_EQ(info.at("data_files"), "3");
    const auto y = query_int(db.dsn(),
                             "SELECT extract(epoch FROM date_trunc('day', now() AT "
                             "TIME ZONE 'UTC') - interval '1 day')::bigint");
    const auto day =
        std::chrono::year_month_day{std::chrono::sys_days{std::chrono::days{y / 86400}}};
    const auto prefix =
        fmt::format("recorded_at_hour={:04d}-{:02d}-{:02d}-", static_cast<int>(day.year()),
                    static_cast<unsigned>(day.month()), static_cast<unsigned>(day.day()));
    EXPECT_EQ(info.at("partition_folders"), prefix + "10," + prefix + "11," + prefix + "12");
    expect_exact(a.check("compare"));

    conn.query(
        "INSERT INTO trackd.vehicle_telemetry_history SELECT 'veh-1', now() - g * interval '1 "
        "minute', ST_SetSRID(ST_MakePoint(13, 52, 0), 4326), 10, NULL, NULL, NULL, 2, 0, 100 + g "
        "FROM generate_series(1, 5) g");
    once = a.archive("--once");  // archive.partition defaults to day
    EXPECT_NE(once.exit_code, 0) << once.output;
    EXPECT_NE(once.output.find("is partitioned by hour(2)"), std::string::npos) << once.output;
    EXPECT_NE(once.output.find("archive.partition = \"day\""), std::string::npos) << once.output;
    once = a.archive("--once", {{"TRACKD_ARCHIVE_PARTITION", "hour"}});
    ASSERT_EQ(once.exit_code, 0) << once.output;
    EXPECT_NE(once.output.find("archived 5 rows"), std::string::npos) << once.output;
    expect_exact(a.check("compare"));
}

TEST(Archive, RetentionKeepsPartitionsUntilTheirRowsAreArchived) {
    TestDatabase db("archret", Schema::migrated);
    ArchiveFixture a(db.dsn(), "archret");
    db::Connection conn(db.dsn(), "test");
    conn.query(
        "SELECT trackd.create_history_partitions(now() - interval '12 days', "
        "now() - interval '9 days', 'day')");
    const auto old_partitions = [&] {
        return std::stoi(conn.query("SELECT count(*) FROM trackd.history_partitions() WHERE NOT "
                                    "is_default AND range_to <= now() - interval '8 days'")
                             .at(0, 0));
    };
    const int old_before = old_partitions();  // 3 or 4, depending on the time of day
    ASSERT_GE(old_before, 3);
    // Midday of one day: five rows that never straddle two daily partitions, whatever the time
    // of the run (from 'now() - 10 days 12 hours' they did when run just before noon UTC).
    auto insert_old = [&](int batch) {
        conn.query(
            "INSERT INTO trackd.vehicle_telemetry_history SELECT 'veh-' || g, (date_trunc('day', "
            "now() AT TIME ZONE 'UTC') - interval '10 days' + interval '12 hours') AT TIME ZONE "
            "'UTC' + g * interval '1 minute', ST_SetSRID(ST_MakePoint(13, 52, 0), 4326), NULL, "
            "NULL, NULL, NULL, $1::bigint, 0, "
            "$1::bigint * 1000 + g FROM generate_series(1, 5) g",
            {std::to_string(batch)});
    };
    insert_old(1);
    auto once = a.archive("--once");
    ASSERT_EQ(once.exit_code, 0) << once.output;
    insert_old(2);  // not archived yet

    // The guard: the partition holding batch 2 stays, the empty ones go.
    EXPECT_EQ(conn.query("SELECT trackd.drop_history_partitions_before(now() - interval "
                         "'8 days')")
                  .at(0, 0),
              std::to_string(old_before - 1));
    EXPECT_EQ(old_partitions(), 1);
    EXPECT_EQ(query_int(db.dsn(), "SELECT count(*) FROM trackd.vehicle_telemetry_history"), 10);

    // Archiving with postgis.retention set commits batch 2, then drops the partition.
    once = a.archive("--once", {{"TRACKD_POSTGIS_RETENTION", "8 days"}});
    ASSERT_EQ(once.exit_code, 0) << once.output;
    EXPECT_EQ(old_partitions(), 0);
    EXPECT_EQ(query_int(db.dsn(), "SELECT count(*) FROM trackd.vehicle_telemetry_history"), 0);
    const auto info = a.check("table");
    EXPECT_EQ(info.at("rows"), "10") << "the dropped rows are in the archive";
}

TEST(Archive, MaintenanceAfter200CommitsExpiresMergesAndDeletesOrphans) {
    TestDatabase db("archmaint", Schema::migrated);
    ArchiveFixture a(db.dsn(), "archmaint");
    db::Connection conn(db.dsn(), "test");
    auto insert = [&](int batch) { insert_small_batch(conn, batch); };
    for (int i = 1; i <= 200; ++i) insert(i);
    {
        // One snapshot per batch, in one run.
        const auto once = a.archive("--once", {{"TRACKD_TEST_ARCHIVE_CHUNK_ROWS", "1"}});
        ASSERT_EQ(once.exit_code, 0) << once.output;
        ASSERT_NE(once.output.find("in 200 commits"), std::string::npos) << once.output;
    }
    // Orphans: a commit killed after its files were written, and a stray file.
    insert(201);
    std::set<std::string> before;
    for (const auto& e : fs::recursive_directory_iterator(a.table_dir())) {
        before.insert(e.path().string());
    }
    const std::string log = ::testing::TempDir() + "archmaint-" + std::to_string(getpid()) + ".log";
    {
        auto archiver =
            a.start_archiver(log, {{"TRACKD_TEST_ARCHIVE_PAUSE_AT", "metadata-written"}});
        ASSERT_TRUE(
            wait_for_log(log, "archive paused at metadata-written", std::chrono::seconds(60)))
            << IngestHarness::read_file(log);
        archiver->kill(SIGKILL);
        archiver->wait();
    }
    std::vector<std::string> orphans;
    for (const auto& e : fs::recursive_directory_iterator(a.table_dir())) {
        if (e.is_regular_file() && before.count(e.path().string()) == 0) {
            orphans.push_back(e.path().string());
        }
    }
    orphans.push_back(a.table_dir() + "/data/stray.parquet");
    std::ofstream(orphans.back()) << "not referenced by anything";
    ASSERT_GE(orphans.size(), 4U) << "data file, manifest, metadata file, stray file";
    auto once = a.archive("--once");  // commits batch 201 properly
    ASSERT_EQ(once.exit_code, 0) << once.output;
    EXPECT_EQ(a.check("table").at("snapshots"), "201");

    const auto r = a.archive("maintain", {{"TRACKD_ARCHIVE_SNAPSHOT_MAX_AGE_S", "0"},
                                          {"TRACKD_ARCHIVE_MIN_SNAPSHOTS_TO_KEEP", "5"},
                                          {"TRACKD_ARCHIVE_MAX_MANIFESTS", "4"},
                                          {"TRACKD_ARCHIVE_ORPHAN_MIN_AGE_S", "0"}});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("201 manifests merged, 197 snapshots expired"), std::string::npos)
        << r.output;
    const auto info = a.check("table");
    EXPECT_EQ(info.at("snapshots"), "5");
    EXPECT_EQ(info.at("snapshot_log"), "5");
    EXPECT_EQ(info.at("current_manifests"), "1");
    EXPECT_EQ(info.at("current_operation"), "replace");
    EXPECT_EQ(info.at("rows"), "1407");
    EXPECT_EQ(info.at("duckdb_rows"), "1407");
    for (const auto& o : orphans) EXPECT_FALSE(fs::exists(o)) << o;
    // Only what the five kept snapshots reference is left: 5 manifest lists, the merged
    // manifest and the 201 small ones the four kept appends still use.
    const auto avro = a.check("avro");
    expect_avro_ok(avro);
    EXPECT_EQ(avro.at("manifest_lists"), "5");
    EXPECT_EQ(avro.at("manifests"), "202");

    // The merged manifest carries its entries' sequence numbers: appends on top still read right.
    insert(202);
    once = a.archive("--once");
    ASSERT_EQ(once.exit_code, 0) << once.output;
    expect_exact(a.check("compare"));
}

// The batch ledger (trackd.ingest_batches) loses the rows of batches every archive table holds
// when maintenance runs and keeps what they said in its watermark; a table behind holds the
// pruning back; archiving goes on from where it was (every history row in the table exactly
// once). The audit's reading of the watermark: Audit.CleanIngestThenPlantedViolations.
TEST(Archive, MaintenancePrunesTheLedgerOfArchivedBatches) {
    TestDatabase db("archledger", Schema::migrated);
    ArchiveFixture a(db.dsn(), "archledger");
    db::Connection conn(db.dsn(), "test");
    auto insert = [&](int batch) { insert_small_batch(conn, batch); };
    const auto value = [&](const std::string& sql) { return query_int(db.dsn(), sql); };
    const auto watermark = [&] {
        auto r = conn.query(
            "SELECT pruned_seq, max_ingest_batch_id, batches, history_rows FROM "
            "trackd.ingest_batches_pruned");
        EXPECT_EQ(r.rows(), 1);
        return r.rows() == 1
                   ? fmt::format("{} {} {} {}", r.at(0, 0), r.at(0, 1), r.at(0, 2), r.at(0, 3))
                   : std::string();
    };
    for (int i = 1; i <= 5; ++i) insert(i);
    auto once = a.archive("--once");
    ASSERT_EQ(once.exit_code, 0) << once.output;
    insert(6);  // committed, not archived (not even stamped)

    auto r = a.archive("maintain");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find(", 5 ledger batches pruned"), std::string::npos) << r.output;
    EXPECT_EQ(value("SELECT count(*) FROM trackd.ingest_batches"), 1);
    EXPECT_EQ(value("SELECT ingest_batch_id FROM trackd.ingest_batches"), 6);
    EXPECT_EQ(watermark(), "5 5 5 35") << "pruned_seq, max batch id, batches, history rows";

    // Archiving goes on past the pruned batches; the next maintenance prunes batch 6 too.
    once = a.archive("--once");
    ASSERT_EQ(once.exit_code, 0) << once.output;
    EXPECT_NE(once.output.find("archived 7 rows in 1 commits"), std::string::npos) << once.output;
    expect_exact(a.check("compare"));
    r = a.archive("maintain");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find(", 1 ledger batches pruned"), std::string::npos) << r.output;
    EXPECT_EQ(value("SELECT count(*) FROM trackd.ingest_batches"), 0);
    EXPECT_EQ(watermark(), "6 6 6 42");

    // A second archive table at archive_seq 6: batch 7, stamped and archived into the first
    // table only, keeps its ledger row.
    conn.query(
        "INSERT INTO trackd.archive_progress (catalog_name, table_namespace, table_name, "
        "archived_seq, max_ingest_batch_id, metadata_location) "
        "VALUES ('trackd', 'trackd', 'behind', 6, 6, 'file:///nowhere')");
    insert(7);
    once = a.archive("--once");
    ASSERT_EQ(once.exit_code, 0) << once.output;
    EXPECT_NE(once.output.find("archived 7 rows in 1 commits"), std::string::npos) << once.output;
    r = a.archive("maintain");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find(", 0 ledger batches pruned"), std::string::npos) << r.output;
    EXPECT_EQ(value("SELECT ingest_batch_id FROM trackd.ingest_batches WHERE archive_seq = 7"), 7);
    EXPECT_EQ(watermark(), "6 6 6 42");
    expect_exact(a.check("compare"));
}

// A prune racing a registration: a table registering (its progress row written under the
// prune lock, not committed yet, as Archiver::register_table does) holds a prune that starts
// meanwhile at the lock; once the registration commits, the prune sees the new table at
// archive_seq 0 and removes nothing the new table still needs. Without the new table the same
// prune removes the three archived batches.
TEST(Archive, APruneWaitsForARegistrationInFlightAndKeepsWhatTheNewTableNeeds) {
    TestDatabase db("archprunerace", Schema::migrated);
    ArchiveFixture a(db.dsn(), "archprunerace");
    db::Connection conn(db.dsn(), "test");
    for (int i = 1; i <= 3; ++i) insert_small_batch(conn, i);
    const auto once = a.archive("--once");
    ASSERT_EQ(once.exit_code, 0) << once.output;
    const auto ledger = [&] {
        return query_int(db.dsn(), "SELECT count(*) FROM trackd.ingest_batches");
    };
    ASSERT_EQ(ledger(), 3);

    db::Connection registering(db.dsn(), "test registration");
    registering.exec_script("BEGIN");
    registering.query(
        "SELECT pg_advisory_xact_lock(hashtextextended('trackd.ingest_batches prune', 0))");
    registering.query(
        "INSERT INTO trackd.archive_progress (catalog_name, table_namespace, table_name, "
        "archived_seq, metadata_location) VALUES ('trackd', 'trackd', 'late', 0, "
        "'file:///nowhere')");
    std::string pruned;
    std::thread pruning([&] {
        db::Connection p(db.dsn(), "test prune");
        pruned = p.query("SELECT trackd.prune_ingest_batches()").at(0, 0);
    });
    const bool waiting = wait_for_value(
        db.dsn(),
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND "
        "application_name = 'test prune' "
        "AND wait_event_type = 'Lock' AND wait_event = 'advisory'",
        1, std::chrono::seconds(30));
    EXPECT_TRUE(waiting) << "the prune did not wait for the registration's lock";
    EXPECT_EQ(ledger(), 3);
    registering.exec_script("COMMIT");
    pruning.join();
    EXPECT_EQ(pruned, "0");
    EXPECT_EQ(ledger(), 3);

    conn.query("DELETE FROM trackd.archive_progress WHERE table_name = 'late'");
    EXPECT_EQ(conn.query("SELECT trackd.prune_ingest_batches()").at(0, 0), "3");
    EXPECT_EQ(ledger(), 0);
}

// A prune cut off between its DELETE of the ledger rows and its update of the watermark (another
// session holds the watermark row, so the prune waits there with the rows deleted in its
// transaction): (1) the database ends the prune's backend: the ledger rows and the watermark are
// as they were, and the next prune takes the rows; (2) `trackd archive maintain` is SIGKILLed
// while its prune waits: the statement had reached the server whole, which finishes it once the
// row is free, rows and watermark together; (3) the holder outlasts pg.lock_timeout_ms:
// maintenance fails naming the lock timeout instead of waiting, and nothing has moved.
TEST(Archive, APruneCutOffAfterItsDeleteMovesTheLedgerAndItsWatermarkTogetherOrNotAtAll) {
    TestDatabase db("archprunecut", Schema::migrated);
    ArchiveFixture a(db.dsn(), "archprunecut");
    db::Connection conn(db.dsn(), "test");
    const auto value = [&](const std::string& sql) { return query_int(db.dsn(), sql); };
    const auto ledger = [&] { return value("SELECT count(*) FROM trackd.ingest_batches"); };
    const auto watermark = [&] {
        auto r = conn.query(
            "SELECT pruned_seq, max_ingest_batch_id, batches, history_rows FROM "
            "trackd.ingest_batches_pruned");
        return r.rows() == 1
                   ? fmt::format("{} {} {} {}", r.at(0, 0), r.at(0, 1), r.at(0, 2), r.at(0, 3))
                   : std::string("no watermark");
    };
    for (int i = 1; i <= 2; ++i) insert_small_batch(conn, i);
    auto once = a.archive("--once");
    ASSERT_EQ(once.exit_code, 0) << once.output;
    ASSERT_EQ(conn.query("SELECT trackd.prune_ingest_batches()").at(0, 0), "2");
    for (int i = 3; i <= 5; ++i) insert_small_batch(conn, i);
    once = a.archive("--once");
    ASSERT_EQ(once.exit_code, 0) << once.output;
    ASSERT_EQ(ledger(), 3);
    ASSERT_EQ(watermark(), "2 2 2 14");

    db::Connection holder(db.dsn(), "test holder");
    const auto hold_watermark = [&] {
        holder.exec_script("BEGIN");
        holder.query("SELECT * FROM trackd.ingest_batches_pruned FOR UPDATE");
    };
    // The prune waits on the held row, its DELETE done: every ledger row is locked by it.
    const auto prune_waits_after_its_delete = [&] {
        const bool waiting = wait_for_value(
            db.dsn(),
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND query LIKE "
            "'%trackd.prune_ingest_batches()%' AND wait_event_type = 'Lock' "
            "AND pid <> pg_backend_pid()",
            1, std::chrono::seconds(60));
        const auto unlocked = value(
            "SELECT count(*) FROM (SELECT 1 FROM trackd.ingest_batches "
            "FOR UPDATE SKIP LOCKED) l");
        return waiting && unlocked == 0;
    };

    // (1) The backend ended mid-prune.
    hold_watermark();
    std::string prune_error;
    std::thread pruning([&] {
        try {
            db::Connection p(db.dsn(), "test prune");
            p.query("SELECT trackd.prune_ingest_batches()");
        } catch (const db::DbError& e) {
            prune_error = e.what();
        }
    });
    const bool cut1 = prune_waits_after_its_delete();
    conn.query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE datname = current_database() AND application_name = 'test prune'");
    pruning.join();
    holder.exec_script("COMMIT");
    ASSERT_TRUE(cut1) << "the prune did not wait after its DELETE";
    EXPECT_FALSE(prune_error.empty()) << "the prune was not cut off";
    EXPECT_EQ(ledger(), 3);
    EXPECT_EQ(watermark(), "2 2 2 14");

    // (3) A holder that outlasts the lock timeout: maintenance gives up, nothing moved.
    hold_watermark();
    const auto timed_out = a.archive("maintain", {{"TRACKD_PG_LOCK_TIMEOUT_MS", "300"}});
    holder.exec_script("COMMIT");
    EXPECT_NE(timed_out.exit_code, 0) << timed_out.output;
    EXPECT_NE(timed_out.output.find("lock timeout"), std::string::npos) << timed_out.output;
    EXPECT_EQ(ledger(), 3);
    EXPECT_EQ(watermark(), "2 2 2 14");

    // (2) trackd killed while its prune waits: the server completes the statement it received.
    hold_watermark();
    const std::string log =
        ::testing::TempDir() + "archprunecut-" + std::to_string(getpid()) + ".log";
    {
        ChildProcess maintain({trackd_binary(), "archive", "maintain"},
                              a.env({{"TRACKD_PG_LOCK_TIMEOUT_MS", "60000"}}), log);
        const bool cut2 = prune_waits_after_its_delete();
        maintain.kill(SIGKILL);
        maintain.wait();
        EXPECT_TRUE(cut2) << IngestHarness::read_file(log);
    }
    EXPECT_EQ(ledger(), 3) << "nothing is visible while the prune's transaction is open";
    holder.exec_script("COMMIT");
    EXPECT_TRUE(wait_for_value(db.dsn(), "SELECT count(*) FROM trackd.ingest_batches", 0,
                               std::chrono::seconds(30)));
    EXPECT_EQ(watermark(), "5 5 5 35");
    EXPECT_EQ(conn.query("SELECT trackd.prune_ingest_batches()").at(0, 0), "0");
    EXPECT_EQ(watermark(), "5 5 5 35");
}

// A second archive table registered after the ledger was pruned: its archiver says so, naming
// the watermark, and archives the batches still in the ledger and every later one; the pruned
// batches stay in the first table only. Both tables then go on; the next prune waits for the
// slower one.
TEST(Archive, ATableRegisteredAfterAPruneStartsAtTheWatermarkAndSaysSo) {
    TestDatabase db("archlate", Schema::migrated);
    ArchiveFixture a(db.dsn(), "archlate");
    db::Connection conn(db.dsn(), "test");
    const std::map<std::string, std::string> late = {{"TRACKD_ARCHIVE_TABLE", "late_positions"}};
    const auto late_rows = [&] {
        return a
            .check("compare", "--pg " + shell_quote(db.dsn()) + " --table trackd.late_positions")
            .at("iceberg_rows");
    };
    for (int i = 1; i <= 2; ++i) insert_small_batch(conn, i);
    auto r = a.archive("--once");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    r = a.archive("maintain");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    ASSERT_NE(r.output.find(", 2 ledger batches pruned"), std::string::npos) << r.output;

    insert_small_batch(conn, 3);
    r = a.archive("--once", late);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("the batch ledger was pruned before this archive table was "
                            "registered: the batches up to archive_seq 2 are not archived into it"),
              std::string::npos)
        << r.output;
    EXPECT_NE(r.output.find("archived 7 rows in 1 commits"), std::string::npos) << r.output;
    EXPECT_EQ(late_rows(), "7") << "batch 3 only";

    // The first table archives batch 3 too; batch 3's ledger row is pruned only once both hold it.
    insert_small_batch(conn, 4);
    r = a.archive("--once", late);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(r.output.find("the batch ledger was pruned"), std::string::npos)
        << "said once, at registration: " << r.output;
    EXPECT_EQ(late_rows(), "14");
    r = a.archive("maintain", late);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find(", 0 ledger batches pruned"), std::string::npos)
        << "the first table has not archived batches 3 and 4: " << r.output;
    r = a.archive("--once");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    expect_exact(a.check("compare"));
    EXPECT_EQ(a.check("compare").at("iceberg_rows"), "28");
    r = a.archive("maintain");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find(", 2 ledger batches pruned"), std::string::npos) << r.output;
    EXPECT_EQ(query_int(db.dsn(), "SELECT count(*) FROM trackd.ingest_batches"), 0);
}

// Orphan clean-up and snapshot expiry on a bucket, by listing and deleting objects: an archiver
// killed between its uploads and its commit leaves objects nothing references (a data file, a
// manifest, a metadata file), and a stray object is put beside them. With the age margin they
// stay; without it they go, and every object the table references is kept. Compaction then
// replaces the data files, and expiry of all but the newest snapshot deletes the replaced data
// files, their manifests and the old manifest lists from the bucket.
TEST(ArchiveS3, OrphansAndExpiredSnapshotsAreDeletedFromTheBucket) {
    TestDatabase db("archs3maint", Schema::migrated);
    ArchiveFixture a(db.dsn(), "archs3maint", kJdbcS3);
    db::Connection conn(db.dsn(), "test");
    auto insert = [&](int batch) { insert_small_batch(conn, batch); };
    // Six commits, each one data file of one day partition.
    for (int i = 1; i <= 6; ++i) {
        insert(i);
        const auto once = a.archive("--once");
        ASSERT_EQ(once.exit_code, 0) << once.output;
        ASSERT_NE(once.output.find("in 1 commits"), std::string::npos) << once.output;
    }
    insert(7);
    const auto before = a.stored_files();
    const std::string log =
        ::testing::TempDir() + "archs3maint-" + std::to_string(getpid()) + ".log";
    {
        auto archiver =
            a.start_archiver(log, {{"TRACKD_TEST_ARCHIVE_PAUSE_AT", "metadata-written"}});
        ASSERT_TRUE(
            wait_for_log(log, "archive paused at metadata-written", std::chrono::seconds(60)))
            << IngestHarness::read_file(log);
        archiver->kill(SIGKILL);
        archiver->wait();
    }
    std::vector<std::string> orphans;
    for (const auto& f : a.stored_files()) {
        if (before.count(f) == 0) orphans.push_back(f);
    }
    const std::string stray = a.table_dir() + "/data/stray.parquet";
    ASSERT_EQ(a.check("put", "--uri " + shell_quote(stray)).at("put"), stray);
    orphans.push_back(stray);
    // data file(s), manifest, manifest list, metadata file (JDBC: trackd writes it), stray
    ASSERT_GE(orphans.size(), 5U) << "the killed commit's uploads";
    auto once = a.archive("--once");  // commits batch 7 properly, with new files
    ASSERT_EQ(once.exit_code, 0) << once.output;

    // An hour's margin: the orphans are too young to be told from a commit in progress.
    auto r = a.archive("maintain", {{"TRACKD_ARCHIVE_SNAPSHOT_MAX_AGE_S", "3600"},
                                    {"TRACKD_ARCHIVE_ORPHAN_MIN_AGE_S", "3600"}});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("0 snapshots expired, 0 files deleted, 0 orphans deleted"),
              std::string::npos)
        << r.output;
    auto now = a.stored_files();
    for (const auto& o : orphans) EXPECT_EQ(now.count(o), 1U) << o;

    r = a.archive("maintain", {{"TRACKD_ARCHIVE_SNAPSHOT_MAX_AGE_S", "3600"},
                               {"TRACKD_ARCHIVE_ORPHAN_MIN_AGE_S", "0"}});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find(fmt::format("{} orphans deleted", orphans.size())), std::string::npos)
        << r.output;
    now = a.stored_files();
    for (const auto& o : orphans) EXPECT_EQ(now.count(o), 0U) << o;
    auto files = a.check("files");
    EXPECT_EQ(files.at("missing_files"), "0") << "a referenced object was deleted";
    EXPECT_EQ(files.at("snapshots"), "7");
    expect_exact(a.check("compare"));

    // Compaction replaces the seven small data files with one (per partition)...
    const auto c = a.archive("compact", {{"TRACKD_ARCHIVE_COMPACT_MIN_FILES", "2"}});
    ASSERT_EQ(c.exit_code, 0) << c.output;
    EXPECT_NE(c.output.find("(49 rows)"), std::string::npos) << c.output;
    const auto parquet_before =
        std::stoi(a.check("ls", "--dir " + shell_quote(a.table_dir())).at("parquet"));
    // ...and expiry of every snapshot but the current one deletes what only they referenced.
    r = a.archive("maintain", {{"TRACKD_ARCHIVE_SNAPSHOT_MAX_AGE_S", "0"},
                               {"TRACKD_ARCHIVE_MIN_SNAPSHOTS_TO_KEEP", "1"},
                               {"TRACKD_ARCHIVE_ORPHAN_MIN_AGE_S", "3600"}});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("7 snapshots expired"), std::string::npos) << r.output;
    const auto v = a.check("values");
    EXPECT_EQ(v.at("values_match"), "1");
    EXPECT_EQ(v.at("iceberg_rows"), "49");
    const auto listing = a.check("ls", "--dir " + shell_quote(a.table_dir()));
    EXPECT_EQ(listing.at("parquet"), v.at("data_files"))
        << "replaced data files left in the bucket";
    EXPECT_LT(std::stoi(listing.at("parquet")), parquet_before);
    files = a.check("files");
    EXPECT_EQ(files.at("snapshots"), "1");
    EXPECT_EQ(files.at("missing_files"), "0");
    const auto avro = a.check("avro");
    expect_avro_ok(avro);
    EXPECT_EQ(avro.at("manifest_lists"), "1") << "expired manifest lists left in the bucket";
    expect_exact(a.check("compare"));
    // Reading the storage's clock leaves nothing behind, not even an empty folder marker.
    EXPECT_EQ(a.check("keys", "--dir " + shell_quote(a.table_dir())).at("clock_keys"), "0");
}

// The orphan clean-up's margin is measured on the storage's clock. An S3 server whose clock is
// two hours behind trackd's (tests/integration/rest_proxy.py --s3-clock-offset-s) stamps a file
// uploaded now two hours old by trackd's clock, so a commit in progress beside the clean-up (a
// compaction, which runs beside the archiver, or another engine's writer) looked older than an
// hour's margin. A compaction paused after its uploads keeps its files through a clean-up with
// an hour's margin and commits them afterwards; what is old on the server's clock still goes.
TEST(ArchiveS3, AServerClockBehindTrackdsDoesNotAgeACommitInProgress) {
    TestDatabase db("archs3clock", Schema::migrated);
    ArchiveFixture a(db.dsn(), "archs3clock", kJdbcS3);
    db::Connection conn(db.dsn(), "test");
    HttpFront front("archs3clock", s3_endpoint(), {"--s3", "--s3-clock-offset-s", "-7200"});
    const std::map<std::string, std::string> behind = {{"TRACKD_ARCHIVE_S3_ENDPOINT", front.uri},
                                                       {"TRACKD_ARCHIVE_COMPACT_MIN_FILES", "2"}};
    for (int batch = 1; batch <= 2; ++batch) {  // a small file each
        insert_small_batch(conn, batch);
        const auto once = a.archive("--once", behind);
        ASSERT_EQ(once.exit_code, 0) << once.output;
    }
    const auto before = a.stored_files();

    const std::string log =
        ::testing::TempDir() + "archs3clock-" + std::to_string(getpid()) + ".log";
    const std::string release = log + ".go";
    fs::remove(log);
    fs::remove(release);
    auto env = behind;
    env["TRACKD_TEST_ARCHIVE_PAUSE_AT"] = "metadata-written@" + release;
    ChildProcess compactor({trackd_binary(), "archive", "compact"}, a.env(env), log);
    ASSERT_TRUE(wait_for_log(log, "archive paused at metadata-written", std::chrono::seconds(60)))
        << IngestHarness::read_file(log);
    std::vector<std::string> in_progress;
    for (const auto& f : a.stored_files()) {
        if (before.count(f) == 0) in_progress.push_back(f);
    }
    // data file, manifest, manifest list, metadata file: uploaded, not yet in the table
    ASSERT_GE(in_progress.size(), 4U);

    auto maintain = behind;
    maintain["TRACKD_ARCHIVE_SNAPSHOT_MAX_AGE_S"] = "3600";
    maintain["TRACKD_ARCHIVE_ORPHAN_MIN_AGE_S"] = "3600";
    auto r = a.archive("maintain", maintain);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("0 orphans deleted"), std::string::npos) << r.output;
    // 7200 s, or 7201: the server stamps whole seconds
    EXPECT_NE(r.output.find("archive storage's clock is 720"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(" s behind this host's"), std::string::npos) << r.output;
    const auto kept = a.stored_files();
    for (const auto& f : in_progress) EXPECT_EQ(kept.count(f), 1U) << "deleted in flight: " << f;

    std::ofstream(release) << "go";
    EXPECT_EQ(compactor.wait(), 0) << IngestHarness::read_file(log);
    EXPECT_NE(IngestHarness::read_file(log).find("(14 rows)"), std::string::npos)
        << IngestHarness::read_file(log);
    EXPECT_EQ(a.check("files").at("missing_files"), "0") << "the commit references a deleted file";
    expect_exact(a.check("compare"));
    EXPECT_EQ(a.check("compare").at("iceberg_rows"), "14");

    // Old on the server's clock: a stray object goes once the margin is under its age there.
    const std::string stray = a.table_dir() + "/data/stray.parquet";
    ASSERT_EQ(a.check("put", "--uri " + shell_quote(stray)).at("put"), stray);
    r = a.archive("maintain", maintain);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("0 orphans deleted"), std::string::npos) << r.output;
    maintain["TRACKD_ARCHIVE_ORPHAN_MIN_AGE_S"] = "0";
    r = a.archive("maintain", maintain);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("1 orphans deleted"), std::string::npos) << r.output;
    EXPECT_EQ(a.stored_files().count(stray), 0U);
    EXPECT_EQ(a.check("files").at("missing_files"), "0");
    expect_exact(a.check("compare"));
}

// A warehouse that cannot work stops `trackd archive` and `trackd run` at start-up, naming the
// key: a bucket that does not exist, an endpoint where nothing answers (after the configured
// retries), and a warehouse URI of an unknown scheme (the config check).
TEST(ArchiveS3, UnusableWarehouseStopsStartUpNamingTheKey) {
    TestDatabase db("archs3bad", Schema::migrated);
    ArchiveFixture a(db.dsn(), "archs3bad", kJdbcS3);
    auto r = a.archive("--once", {{"TRACKD_ARCHIVE_WAREHOUSE", "s3://no-such-bucket-here/wh"}});
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find("configuration error: archive.warehouse: bucket 'no-such-bucket-here' "
                            "does not exist at " +
                            s3_endpoint()),
              std::string::npos)
        << r.output;
    r = run_command(env_prefix(a.env({{"TRACKD_ARCHIVE_ENABLED", "true"},
                                      {"TRACKD_ARCHIVE_WAREHOUSE", "s3://no-such-bucket-here/wh"},
                                      {"TRACKD_KAFKA_BROKERS", kafka_brokers()}})) +
                    trackd_binary() + " run");
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find("archive.warehouse: bucket 'no-such-bucket-here' does not exist"),
              std::string::npos)
        << r.output;
    const auto port = free_port();
    r = a.archive("--once",
                  {{"TRACKD_ARCHIVE_S3_ENDPOINT", fmt::format("http://127.0.0.1:{}", port)},
                   {"TRACKD_ARCHIVE_S3_RETRY_ATTEMPTS", "3"},
                   {"TRACKD_ARCHIVE_S3_RETRY_BASE_DELAY_MS", "10"}});
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find("archive.warehouse: cannot reach bucket '" + a.bucket() + "' at " +
                            fmt::format("http://127.0.0.1:{}", port)),
              std::string::npos)
        << r.output;
    EXPECT_EQ(count_of(r.output, "archive storage request failed, retrying"), 2U) << r.output;
    r = a.archive("--once", {{"TRACKD_ARCHIVE_WAREHOUSE", "gs://bucket/wh"}});
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find("archive.warehouse: 'gs://bucket/wh' is not a local path"),
              std::string::npos)
        << r.output;
}

// The S3 server goes away while `trackd archive` runs (tests/support/tcp_relay.hpp between
// trackd and moto: every connection closed, new ones refused) and comes back. Requests are
// retried with backoff (logged), rounds whose retries run out fail and are started over from the
// table; once the server answers again everything committed meanwhile is archived, exactly once.
TEST(ArchiveS3, OutageWhileArchivingIsRetriedAndLosesNothing) {
    TestDatabase db("archs3outage", Schema::migrated);
    ArchiveFixture a(db.dsn(), "archs3outage", kJdbcS3);
    const auto endpoint = s3_endpoint();
    const auto colon = endpoint.rfind(':');
    TcpRelay relay("127.0.0.1", static_cast<unsigned short>(std::stoi(endpoint.substr(colon + 1))));
    db::Connection conn(db.dsn(), "test");
    auto insert = [&](int batch) {
        conn.query(
            "INSERT INTO trackd.vehicle_telemetry_history SELECT 'veh-' || (g % 5), now() - g * "
            "interval '1 second', ST_SetSRID(ST_MakePoint(13 + g * 0.001, 52, 0), 4326), 10, "
            "NULL, NULL, NULL, $1::bigint, 0, $1::bigint * 1000 + g FROM generate_series(1, 50) g",
            {std::to_string(batch)});
    };
    // Batches committed but not (yet) in the archive.
    const std::string pending =
        "SELECT count(*) FROM trackd.ingest_batches WHERE archive_seq IS NULL OR archive_seq > "
        "(SELECT coalesce(max(archived_seq), 0) FROM trackd.archive_progress)";
    const std::string log =
        ::testing::TempDir() + "archs3outage-" + std::to_string(getpid()) + ".log";
    fs::remove(log);
    insert(1);
    auto archiver = a.start_archiver(
        log, {{"TRACKD_ARCHIVE_S3_ENDPOINT", fmt::format("http://127.0.0.1:{}", relay.port())},
              {"TRACKD_ARCHIVE_S3_RETRY_ATTEMPTS", "3"},
              {"TRACKD_ARCHIVE_S3_RETRY_BASE_DELAY_MS", "50"},
              {"TRACKD_ARCHIVE_S3_TIMEOUT_MS", "2000"},
              {"TRACKD_ARCHIVE_MAINTENANCE_INTERVAL_S", "0"},
              {"TRACKD_ARCHIVE_COMPACTION_INTERVAL_S", "0"}});
    ASSERT_TRUE(wait_for_value(db.dsn(), pending, 0, std::chrono::seconds(60)))
        << IngestHarness::read_file(log);
    relay.cut(true);
    insert(2);
    insert(3);
    ASSERT_TRUE(wait_for_log(log, "archive failed, retrying", std::chrono::seconds(60)))
        << IngestHarness::read_file(log);
    EXPECT_EQ(query_int(db.dsn(), pending), 2) << "nothing is committed while the bucket is away";
    relay.cut(false);
    insert(4);
    ASSERT_TRUE(wait_for_value(db.dsn(), pending, 0, std::chrono::seconds(60)))
        << IngestHarness::read_file(log);
    archiver->kill(SIGTERM);
    EXPECT_EQ(archiver->wait(), 0) << IngestHarness::read_file(log);
    const auto out = IngestHarness::read_file(log);
    EXPECT_NE(out.find("archive storage request failed, retrying"), std::string::npos) << out;
    EXPECT_GT(relay.refused(), 0);
    std::printf(
        "[ measured ] %zu S3 request retries, %zu failed rounds logged, %d connections "
        "refused\n",
        count_of(out, "archive storage request failed, retrying"),
        count_of(out, "archive failed, retrying"), relay.refused());
    expect_exact(a.check("compare"));
    EXPECT_EQ(a.check("compare").at("iceberg_rows"), "200");
    EXPECT_EQ(a.check("files").at("missing_files"), "0");
}

// S3 answering 503 SlowDown (throttling), 500 InternalError and a request left unanswered on an
// open connection, on uploads and on reads (tests/integration/rest_proxy.py --s3 between trackd
// and moto): each is retried with backoff,
// the silent one once it has sent less than a byte a second for archive.s3_timeout_ms (curl's
// low-speed limit, over its few-second average: docs/archive.md), and the archive holds exactly
// PostGIS's rows with no file missing.
TEST(ArchiveS3, ThrottledFailedAndUnansweredRequestsAreRetriedAndLoseNothing) {
    TestDatabase db("archs3faults", Schema::migrated);
    ArchiveFixture a(db.dsn(), "archs3faults", kJdbcS3);
    db::Connection conn(db.dsn(), "test");
    const std::map<std::string, std::string> retries = {
        {"TRACKD_ARCHIVE_S3_RETRY_ATTEMPTS", "4"},
        {"TRACKD_ARCHIVE_S3_RETRY_BASE_DELAY_MS", "50"},
        {"TRACKD_ARCHIVE_S3_TIMEOUT_MS", "1500"}};
    // One `archive --once` of a new batch through a front with `fault`; `event` is what the front
    // logs for each fault, `faults` how many it must have logged.
    const auto archive_through = [&](int batch, const std::string& fault, const char* event,
                                     std::size_t faults, const char* method = "PUT") {
        insert_small_batch(conn, batch);
        const auto t = archive_once_through_s3_front(
            a, "archs3faults" + std::to_string(batch),
            {fault, std::to_string(faults), "--s3-faults-on", method}, retries);
        std::printf("[ measured ] archive --once with %s %zu on %s: %.1f s\n", fault.c_str(),
                    faults, method, t.seconds);
        EXPECT_EQ(t.run.exit_code, 0) << t.run.output << t.front;
        EXPECT_EQ(count_of(t.front, event), faults) << t.front;
        EXPECT_NE(t.run.output.find("archived 7 rows in 1 commits"), std::string::npos)
            << t.run.output;
        return t.run.output;
    };
    const auto throttled = archive_through(1, "--s3-throttle", "upload throttled 503", 2);
    EXPECT_NE(throttled.find("SlowDown"), std::string::npos) << throttled;
    EXPECT_EQ(count_of(throttled, "archive storage request failed, retrying"), 2U) << throttled;
    const auto silent = archive_through(2, "--s3-hang", "upload left unanswered", 1);
    EXPECT_GE(count_of(silent, "archive storage request failed, retrying"), 1U) << silent;
    // The same on the reads (the table's metadata file, read at start).
    const auto reads = archive_through(3, "--s3-throttle", "read throttled 503", 2, "GET");
    EXPECT_EQ(count_of(reads, "archive storage request failed, retrying"), 2U) << reads;
    const auto silent_read = archive_through(4, "--s3-hang", "read left unanswered", 1, "GET");
    EXPECT_GE(count_of(silent_read, "archive storage request failed, retrying"), 1U) << silent_read;
    // S3 failing on its side (500 InternalError), on uploads.
    const auto failed = archive_through(5, "--s3-error", "upload failed 500", 2);
    EXPECT_NE(failed.find("InternalError"), std::string::npos) << failed;
    EXPECT_EQ(count_of(failed, "archive storage request failed, retrying"), 2U) << failed;

    // Throttling that outlasts archive.s3_retry_attempts (4): the round gives up after 3
    // retries, says why and commits nothing; the next round, with S3 answering again, archives
    // the batch once.
    insert_small_batch(conn, 6);
    {
        const auto t =
            archive_once_through_s3_front(a, "archs3faults6", {"--s3-throttle", "100"}, retries);
        const auto& r = t.run;
        EXPECT_NE(r.exit_code, 0) << r.output;
        std::printf("[ measured ] throttled past its retries: exit %d, %s", r.exit_code,
                    last_line(r.output).c_str());
        EXPECT_EQ(count_of(r.output, "archive storage request failed, retrying"), 3U) << r.output;
        EXPECT_NE(r.output.find("SlowDown"), std::string::npos) << r.output;
        EXPECT_EQ(count_of(t.front, "upload throttled 503"), 4U) << t.front;
    }
    EXPECT_EQ(query_int(db.dsn(), kAllArchived), 1) << "a batch was marked archived";
    const auto again = a.archive("--once", retries);
    ASSERT_EQ(again.exit_code, 0) << again.output;
    EXPECT_NE(again.output.find("archived 7 rows in 1 commits"), std::string::npos) << again.output;
    expect_exact(a.check("compare"));
    EXPECT_EQ(a.check("compare").at("iceberg_rows"), "42");
    EXPECT_EQ(a.check("files").at("missing_files"), "0");
}

// A multipart upload failing half way. A large batch's data file goes to S3 in parts (Arrow's
// S3 output stream uploads a part whenever its buffer is full, the rest at close), and the front
// (rest_proxy.py --s3-faults-on PART) fails part uploads only, from the second on. Two 500s are
// retried and the upload completes; throttling past archive.s3_retry_attempts fails the round,
// which aborts the upload, its first part already stored (no multipart upload is left begun in
// the bucket, where no listing would show it), and commits nothing; the next round archives the
// batch once.
TEST(ArchiveS3, AMultipartUploadFailingHalfWayIsRetriedOrAbortedAndLosesNothing) {
    TestDatabase db("archs3parts", Schema::migrated);
    ArchiveFixture a(db.dsn(), "archs3parts", kJdbcS3);
    db::Connection conn(db.dsn(), "test");
    // Random positions and speeds, so that the file does not compress below a part.
    const auto insert = [&](int batch, int rows) {
        conn.query(
            "INSERT INTO trackd.vehicle_telemetry_history SELECT 'veh-' || (g % 997), now() - g * "
            "interval '100 microseconds', ST_SetSRID(ST_MakePoint(13 + random(), 52 + random(), "
            "random() * 100), 4326), random() * 120, random() * 360, NULL, NULL, $1::bigint, 0, "
            "$1::bigint * 10000000 + g FROM generate_series(1, $2::int) g",
            {std::to_string(batch), std::to_string(rows)});
    };
    const std::map<std::string, std::string> retries = {
        {"TRACKD_ARCHIVE_S3_RETRY_ATTEMPTS", "4"}, {"TRACKD_ARCHIVE_S3_RETRY_BASE_DELAY_MS", "50"}};
    const std::string dir = a.table_dir();
    constexpr int kRows = 250000;  // a data file of three parts
    // One `archive --once` of a new batch through a front that lets the first part upload
    // through and then answers part uploads with `fault`.
    const auto archive_through = [&](int batch, const char* fault, const char* faults) {
        insert(batch, kRows);
        return archive_once_through_s3_front(
            a, "archs3parts" + std::to_string(batch),
            {fault, faults, "--s3-faults-on", "PART", "--s3-faults-after", "1"}, retries);
    };

    const auto retried = archive_through(1, "--s3-error", "2");
    ASSERT_EQ(retried.run.exit_code, 0) << retried.run.output << retried.front;
    EXPECT_EQ(count_of(retried.front, "part upload failed 500"), 2U) << retried.front;
    EXPECT_EQ(count_of(retried.run.output, "archive storage request failed, retrying"), 2U)
        << retried.run.output;
    std::printf("[ measured ] %zu parts uploaded, %zu multipart requests\n",
                count_of(retried.front, "forwarded part PUT"),
                count_of(retried.front, "forwarded multipart"));
    EXPECT_EQ(a.check("uploads", "--dir " + shell_quote(dir)).at("uploads"), "0");

    const auto failed = archive_through(2, "--s3-throttle", "100");
    EXPECT_NE(failed.run.exit_code, 0) << failed.run.output;
    EXPECT_NE(failed.run.output.find("SlowDown"), std::string::npos) << failed.run.output;
    EXPECT_EQ(count_of(failed.front, "part upload throttled 503"), 4U) << failed.front;
    EXPECT_EQ(count_of(failed.front, "forwarded part PUT"), 1U) << "the first part\n"
                                                                << failed.front;
    EXPECT_GE(count_of(failed.front, "forwarded multipart DELETE"), 1U)
        << "the upload was not aborted\n"
        << failed.front;
    std::printf("[ measured ] throttled past its retries: exit %d, %s", failed.run.exit_code,
                last_line(failed.run.output).c_str());
    EXPECT_EQ(a.check("uploads", "--dir " + shell_quote(dir)).at("uploads"), "0")
        << "an upload left begun";
    EXPECT_EQ(query_int(db.dsn(), kAllArchived), 1) << "a batch was marked archived";
    const auto again = a.archive("--once", retries);
    ASSERT_EQ(again.exit_code, 0) << again.output;
    const auto c = a.check("compare");
    expect_exact(c);
    EXPECT_EQ(c.at("iceberg_rows"), std::to_string(2 * kRows));
    EXPECT_EQ(a.check("files").at("missing_files"), "0");
}

// An archiver killed while a data file goes up in parts leaves its multipart upload begun:
// unseen by listings and readers, its first part stored. Maintenance aborts it once it is older
// than archive.orphan_min_age_s on the storage's clock (ListMultipartUploads and
// AbortMultipartUpload, requests trackd signs itself), keeps it while it is younger, goes on
// when the key may not list uploads (403) and when the listing is left unanswered (sent again
// after archive.s3_timeout_ms), and the batch is then archived once.
TEST(ArchiveS3, AnUploadLeftBegunByAKilledArchiverIsAbortedByMaintenance) {
    TestDatabase db("archs3killed", Schema::migrated);
    ArchiveFixture a(db.dsn(), "archs3killed", kJdbcS3);
    db::Connection conn(db.dsn(), "test");
    // Random positions, so that the file does not compress below a part (three parts).
    constexpr int kRows = 250000;
    conn.query(
        "INSERT INTO trackd.vehicle_telemetry_history SELECT 'veh-' || (g % 997), now() - g * "
        "interval '100 microseconds', ST_SetSRID(ST_MakePoint(13 + random(), 52 + random(), "
        "random() * 100), 4326), random() * 120, random() * 360, NULL, NULL, 1, 0, g "
        "FROM generate_series(1, $1::int) g",
        {std::to_string(kRows)});
    const std::string dir = a.table_dir();
    const auto uploads = [&] {
        return a.check("uploads", "--dir " + shell_quote(dir)).at("uploads");
    };
    // Every request goes through a front: moto lists each upload as begun at a fixed time of
    // 2010, and the front gives each the time it saw it begun instead. The first part goes
    // through, the second is read and never answered: the archiver is killed while it waits.
    const HttpFront front("archs3killed", s3_endpoint(),
                          {"--s3", "--s3-initiated-as-seen", "--s3-hang", "1", "--s3-faults-on",
                           "PART", "--s3-faults-after", "1"});
    const std::map<std::string, std::string> through = {{"TRACKD_ARCHIVE_S3_ENDPOINT", front.uri}};
    {
        const std::string log =
            ::testing::TempDir() + "archs3killed-" + std::to_string(getpid()) + ".log";
        fs::remove(log);
        ChildProcess archiver({trackd_binary(), "archive", "--once"}, a.env(through), log);
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(120);
        while (front.text().find("part upload left unanswered") == std::string::npos &&
               std::chrono::steady_clock::now() < until) {
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        ASSERT_NE(front.text().find("part upload left unanswered"), std::string::npos)
            << front.text() << IngestHarness::read_file(log);
        archiver.kill(SIGKILL);
        archiver.wait();
        EXPECT_EQ(count_of(front.text(), "forwarded part PUT"), 1U) << front.text();
    }
    ASSERT_EQ(uploads(), "1") << "the killed archiver's upload";
    EXPECT_EQ(query_int(db.dsn(), kAllArchived), 1) << "a batch was marked archived";

    // Younger than the margin (the default, three days): kept, as a file going up now would be.
    auto r = a.archive("maintain", through);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("0 uploads aborted"), std::string::npos) << r.output;
    EXPECT_EQ(uploads(), "1");

    auto aged = through;
    aged["TRACKD_ARCHIVE_ORPHAN_MIN_AGE_S"] = "0";
    {
        // A key whose policy does not allow listing uploads: the rest of maintenance runs.
        const HttpFront denying("archs3killeddeny", s3_endpoint(), {"--s3", "--s3-deny-uploads"});
        auto env = aged;
        env["TRACKD_ARCHIVE_S3_ENDPOINT"] = denying.uri;
        r = a.archive("maintain", env);
        ASSERT_EQ(r.exit_code, 0) << r.output;
        EXPECT_NE(r.output.find("0 uploads aborted"), std::string::npos) << r.output;
        EXPECT_NE(r.output.find("s3:ListBucketMultipartUploads"), std::string::npos) << r.output;
        EXPECT_EQ(count_of(denying.text(), "uploads listing denied 403"), 1U) << denying.text();
        EXPECT_EQ(uploads(), "1");
    }
    {
        // A server that leaves the listing of uploads unanswered on an open connection: trackd's
        // own request gives up after archive.s3_timeout_ms and is sent again.
        const HttpFront silent("archs3killedsilent", s3_endpoint(),
                               {"--s3", "--s3-hang", "1", "--s3-faults-on", "UPLOADS"});
        auto env = aged;
        env["TRACKD_ARCHIVE_S3_ENDPOINT"] = silent.uri;
        env["TRACKD_ARCHIVE_S3_TIMEOUT_MS"] = "1500";
        r = a.archive("maintain", env);
        ASSERT_EQ(r.exit_code, 0) << r.output;
        EXPECT_EQ(count_of(silent.text(), "uploads listing left unanswered"), 1U) << silent.text();
        EXPECT_NE(r.output.find("archive storage request failed, retrying"), std::string::npos)
            << r.output;
    }
    EXPECT_NE(r.output.find("1 uploads aborted"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("aborted an incomplete multipart upload"), std::string::npos)
        << r.output;
    EXPECT_EQ(uploads(), "0") << "the upload and its stored part are gone";

    const auto again = a.archive("--once", through);
    ASSERT_EQ(again.exit_code, 0) << again.output;
    const auto c = a.check("compare");
    expect_exact(c);
    EXPECT_EQ(c.at("iceberg_rows"), std::to_string(kRows));
    EXPECT_EQ(a.check("files").at("missing_files"), "0");
    r = a.archive("maintain", aged);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("0 uploads aborted"), std::string::npos) << r.output;
}

// A maintenance step that fails does not keep the others from running: a front of the S3 server
// answers every listing of multipart uploads 500 (rest_proxy.py --s3-error … --s3-faults-on
// UPLOADS), so abort_stale_uploads fails, once (archive.s3_retry_attempts 1). `trackd archive
// maintain` still expires the snapshots, deletes the orphan, applies retention and prunes the
// ledger (the steps after it), logs the failure naming the step, and exits non-zero naming it.
// Before, the failure ended maintenance there: the ledger was not pruned.
TEST(ArchiveS3, AFailingMaintenanceStepLeavesTheOthersToRunAndFailsTheCommand) {
    TestDatabase db("archs3stepfail", Schema::migrated);
    ArchiveFixture a(db.dsn(), "archs3stepfail", kJdbcS3);
    db::Connection conn(db.dsn(), "test");
    for (int i = 1; i <= 3; ++i) insert_small_batch(conn, i);
    const auto once = a.archive("--once", {{"TRACKD_TEST_ARCHIVE_CHUNK_ROWS", "1"}});
    ASSERT_EQ(once.exit_code, 0) << once.output;
    ASSERT_NE(once.output.find("in 3 commits"), std::string::npos) << once.output;
    const std::string stray = a.table_dir() + "/data/stray.parquet";
    ASSERT_EQ(a.check("put", "--uri " + shell_quote(stray)).at("put"), stray);

    const HttpFront front("archs3stepfail", s3_endpoint(),
                          {"--s3", "--s3-error", "1000", "--s3-faults-on", "UPLOADS"});
    const auto r = a.archive("maintain", {{"TRACKD_ARCHIVE_S3_ENDPOINT", front.uri},
                                          {"TRACKD_ARCHIVE_S3_RETRY_ATTEMPTS", "1"},
                                          {"TRACKD_ARCHIVE_SNAPSHOT_MAX_AGE_S", "0"},
                                          {"TRACKD_ARCHIVE_MIN_SNAPSHOTS_TO_KEEP", "1"},
                                          {"TRACKD_ARCHIVE_ORPHAN_MIN_AGE_S", "0"}});
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_EQ(front.count("uploads listing failed 500"), 1U) << front.text();
    EXPECT_EQ(count_of(r.output, "archive maintenance step failed"), 1U) << r.output;
    EXPECT_NE(r.output.find("step=abort_stale_uploads"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("trackd: archive maintenance step abort_stale_uploads failed: "),
              std::string::npos)
        << r.output;
    // The report of what the steps did is printed all the same.
    EXPECT_NE(r.output.find("2 snapshots expired"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("0 uploads aborted, 0 partitions dropped, 3 ledger batches pruned"),
              std::string::npos)
        << r.output;
    EXPECT_EQ(query_int(db.dsn(), "SELECT count(*) FROM trackd.ingest_batches"), 0)
        << "the ledger was not pruned";
    EXPECT_EQ(a.stored_files().count(stray), 0U) << "the orphan was not deleted";
    const auto files = a.check("files");
    EXPECT_EQ(files.at("snapshots"), "1");
    EXPECT_EQ(files.at("missing_files"), "0");
    expect_exact(a.check("compare"));
}

// The same failing step in the loop (maintenance and compaction every 4 s): it waits for the next
// interval, and compaction, which comes after maintenance in a round, still runs. In 11 s the
// listing of uploads is tried at most once per interval, the round never fails (no "archive
// failed, retrying"), the ledger is pruned and the small files are compacted. Before, the
// failure failed the round, which was tried again after its backoff (100 ms, doubling) with
// maintenance first, so compaction never ran.
TEST(ArchiveS3, AFailingMaintenanceStepWaitsForTheNextIntervalAndCompactionStillRuns) {
    TestDatabase db("archs3steploop", Schema::migrated);
    ArchiveFixture a(db.dsn(), "archs3steploop", kJdbcS3);
    db::Connection conn(db.dsn(), "test");
    for (int i = 1; i <= 3; ++i) insert_small_batch(conn, i);
    const auto once = a.archive("--once", {{"TRACKD_TEST_ARCHIVE_CHUNK_ROWS", "1"}});
    ASSERT_EQ(once.exit_code, 0) << once.output;
    ASSERT_NE(once.output.find("in 3 commits"), std::string::npos) << once.output;

    const HttpFront front("archs3steploop", s3_endpoint(),
                          {"--s3", "--s3-error", "1000", "--s3-faults-on", "UPLOADS"});
    const std::string log =
        ::testing::TempDir() + "archs3steploop-" + std::to_string(getpid()) + ".log";
    fs::remove(log);
    const auto started = std::chrono::steady_clock::now();
    auto archiver = a.start_archiver(log, {{"TRACKD_ARCHIVE_S3_ENDPOINT", front.uri},
                                           {"TRACKD_ARCHIVE_S3_RETRY_ATTEMPTS", "1"},
                                           {"TRACKD_ARCHIVE_MAINTENANCE_INTERVAL_S", "4"},
                                           {"TRACKD_ARCHIVE_COMPACTION_INTERVAL_S", "4"},
                                           {"TRACKD_ARCHIVE_COMPACT_MIN_FILES", "2"}});
    const bool compacted =
        wait_for_log(log, "archive compaction committed", std::chrono::seconds(30));
    std::this_thread::sleep_until(started + std::chrono::seconds(11));
    archiver->kill(SIGTERM);
    const int code = archiver->wait();
    const std::chrono::duration<double> ran = std::chrono::steady_clock::now() - started;
    const auto out = IngestHarness::read_file(log);
    EXPECT_EQ(code, 0) << out;
    EXPECT_TRUE(compacted) << out;
    const auto listings = front.count("uploads listing failed 500");
    EXPECT_GE(listings, 1U) << front.text();
    EXPECT_LE(listings, static_cast<std::size_t>(ran.count() / 4))
        << "tried more often than once per interval in " << ran.count() << " s: " << front.text();
    EXPECT_EQ(count_of(out, "archive maintenance step failed"), listings) << out;
    EXPECT_EQ(out.find("archive failed, retrying"), std::string::npos) << out;
    std::printf("[ measured ] %zu failed listings of uploads in %.1f s (maintenance every 4 s)\n",
                listings, ran.count());
    EXPECT_EQ(query_int(db.dsn(), "SELECT count(*) FROM trackd.ingest_batches"), 0)
        << "the ledger was not pruned";
    expect_exact(a.check("compare"));
    EXPECT_EQ(a.check("files").at("missing_files"), "0");
}

// Compaction after 200 small commits over two day partitions (400 files): the small files of
// each partition are rewritten into one, in sort order, as a "replace" snapshot carrying the
// progress; every value of every row is still PostGIS's (multiset, Kafka coordinates included).
// The compaction commits beside an archiver: paused after building its version, an archive
// snapshot is committed first, so its swap fails and it rebuilds on top. Snapshot expiry then
// deletes the replaced files.
TEST(Archive, CompactionAfter200SmallCommitsKeepsEveryRow) {
    TestDatabase db("archcompact", Schema::migrated);
    ArchiveFixture a(db.dsn(), "archcompact");
    db::Connection conn(db.dsn(), "test");
    auto insert = [&](int batch) {
        conn.query(
            "INSERT INTO trackd.vehicle_telemetry_history SELECT 'veh-' || (g % 3), "
            "$2::timestamptz - (g % 2) * interval '1 day' - $1::int * interval '1 second', "
            "ST_SetSRID(ST_MakePoint(13 + g * 0.01, 52 - $1::int * 0.0001, g), 4326), "
            "CASE WHEN g % 3 = 0 THEN NULL ELSE 10 + g END, 90, NULL, "
            "CASE WHEN g = 1 THEN jsonb_build_object('batch', $1::int) END, $1::bigint, "
            "$1::int % 2, $1::bigint * 100 + g FROM generate_series(1, 6) g",
            {std::to_string(batch), rows_time_base(conn)});
    };
    // Two days: rows_time_base() and a day earlier, minus up to 200 s.
    for (int i = 1; i <= 200; ++i) insert(i);
    {
        // One snapshot per batch, in one run.
        const auto once = a.archive("--once", {{"TRACKD_TEST_ARCHIVE_CHUNK_ROWS", "1"}});
        ASSERT_EQ(once.exit_code, 0) << once.output;
        ASSERT_NE(once.output.find("in 200 commits"), std::string::npos) << once.output;
    }
    auto v = a.check("values");
    EXPECT_EQ(v.at("values_match"), "1");
    const int partitions = std::stoi(v.at("partitions"));
    ASSERT_GE(partitions, 2);
    ASSERT_GE(std::stoi(v.at("max_files_per_partition")), 100);

    const std::string log =
        ::testing::TempDir() + "archcompact-" + std::to_string(getpid()) + ".log";
    const std::string release = log + ".go";
    fs::remove(log);
    fs::remove(release);
    ChildProcess compactor({trackd_binary(), "archive", "compact"},
                           a.env({{"TRACKD_TEST_ARCHIVE_PAUSE_AT", "metadata-written@" + release}}),
                           log);
    ASSERT_TRUE(wait_for_log(log, "archive paused at metadata-written", std::chrono::seconds(120)))
        << IngestHarness::read_file(log);
    insert(201);  // the archiver commits first
    const auto once = a.archive("--once");
    ASSERT_EQ(once.exit_code, 0) << once.output;
    std::ofstream(release) << "go";
    ASSERT_EQ(compactor.wait(), 0) << IngestHarness::read_file(log);
    const auto out = IngestHarness::read_file(log);
    EXPECT_NE(out.find("archive commit conflict, retrying"), std::string::npos) << out;
    EXPECT_NE(out.find("compaction: " + std::to_string(partitions) +
                       " partitions, 400 files "
                       "rewritten into " +
                       std::to_string(partitions) + " (1200 rows)"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("at most 0 small files in a partition"), std::string::npos) << out;

    v = a.check("values");
    EXPECT_EQ(v.at("values_match"), "1")
        << "missing " << v.at("values_missing") << ", extra " << v.at("values_extra");
    EXPECT_EQ(v.at("iceberg_rows"), "1206");
    EXPECT_EQ(v.at("bad_wkb"), "0");
    // One compacted file per partition, plus the batch committed meanwhile (one file per day).
    EXPECT_LE(std::stoi(v.at("max_files_per_partition")), 2);
    EXPECT_LT(std::stoi(v.at("max_files_per_partition")), 8) << "archive.compact_min_files";
    expect_exact(a.check("compare"));
    auto info = a.check("table");
    // The archiver's append won the swap; the compaction's replace went on top of it.
    EXPECT_EQ(info.at("current_operation"), "replace");

    // Expiry: the replaced files go with the snapshots that referenced them.
    const auto r = a.archive("maintain", {{"TRACKD_ARCHIVE_SNAPSHOT_MAX_AGE_S", "0"},
                                          {"TRACKD_ARCHIVE_MIN_SNAPSHOTS_TO_KEEP", "1"},
                                          {"TRACKD_ARCHIVE_ORPHAN_MIN_AGE_S", "0"}});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    int parquet = 0;
    for (const auto& e : fs::recursive_directory_iterator(a.table_dir() + "/data")) {
        if (e.is_regular_file() && e.path().extension() == ".parquet") ++parquet;
    }
    v = a.check("values");
    EXPECT_EQ(parquet, std::stoi(v.at("data_files"))) << "replaced files left behind";
    EXPECT_EQ(v.at("values_match"), "1");
    expect_avro_ok(a.check("avro"));
}

// The answer to the catalog's COMMIT is lost on the wire (tests/support/pg_fault_proxy.hpp: the
// server commits, the proxy closes both sockets instead of forwarding "COMMIT"). The archiver
// must learn the outcome from the catalog on a new connection, not guess it: before, it read the
// catalog back on the broken connection, failed, and deleted the data files of a snapshot that
// had committed. Only the catalog's own session ("trackd archive catalog") is cut; the
// archiver's lock and history sessions go through the proxy untouched.
TEST(Archive, LostCatalogCommitRepliesLoseNothing) {
    TestDatabase db("archlost", Schema::migrated);
    ArchiveFixture a(db.dsn(), "archlost");
    const auto [host, port] = pg_endpoint(db.dsn());
    PgFaultProxy proxy(host, port);
    const std::map<std::string, std::string> through = {
        {"TRACKD_PG_DSN", proxy.through(db.dsn())}, {"TRACKD_ARCHIVE_MAINTENANCE_INTERVAL_S", "0"}};

    db::Connection conn(db.dsn(), "test writer");
    auto insert_batch = [&](int partition) {
        const auto batch =
            std::stoll(conn.query("SELECT nextval('trackd.ingest_batch_id_seq')").at(0, 0));
        conn.query(
            "INSERT INTO trackd.vehicle_telemetry_history SELECT 'veh-' || g, now() - g * "
            "interval '1 minute', ST_SetSRID(ST_MakePoint(13 + g * 0.001, 52, 0), 4326), NULL, "
            "NULL, NULL, NULL, $1::bigint, $2::int, $1::bigint * 1000 + g FROM "
            "generate_series(1, 25) g",
            {std::to_string(batch), std::to_string(partition)});
    };

    // The archiver loop; the replies to its first three catalog COMMITs are lost. One batch at a
    // time, each archived before the next is written: one snapshot per batch, four in all.
    constexpr int kCommits = 4;
    constexpr int kLost = 3;
    proxy.cut_commit_replies(kLost, "trackd archive catalog");
    const std::string log = ::testing::TempDir() + "archlost-" + std::to_string(getpid()) + ".log";
    fs::remove(log);
    auto archiver = a.start_archiver(log, through);
    for (int i = 0; i < kCommits; ++i) {
        insert_batch(i % 2);
        ASSERT_TRUE(wait_for_value(db.dsn(), kAllArchived, 0, std::chrono::seconds(120)))
            << "batch " << i << "\n"
            << IngestHarness::read_file(log);
    }
    EXPECT_EQ(proxy.cuts(), kLost);
    ASSERT_TRUE(archiver->running()) << IngestHarness::read_file(log);
    archiver->kill(SIGTERM);
    EXPECT_EQ(archiver->wait(), 0);
    const auto out = IngestHarness::read_file(log);
    // Each lost reply was settled by reading the catalog back, and found committed: nothing was
    // redone or thrown away, and the loop never had to start over.
    EXPECT_EQ(count_of(out, "archive commit outcome unknown, reading the catalog back"), kLost)
        << out;
    EXPECT_EQ(count_of(out, "archive commit found committed after its reply was lost"), kLost)
        << out;
    EXPECT_EQ(count_of(out, "archive commit found not committed"), 0U) << out;
    EXPECT_EQ(count_of(out, "archive failed, retrying"), 0U) << out;
    EXPECT_EQ(count_of(out, "archive committed"), static_cast<std::size_t>(kCommits)) << out;

    // `after_append`: the last commit was an archive snapshot (maintenance commits leave the
    // mirror's metadata_location and snapshot_id at the last archive snapshot's).
    auto expect_consistent = [&](const std::string& snapshots, bool after_append) {
        const auto f = a.check("files");
        ASSERT_TRUE(f.count("missing_files")) << "archive_check.py files failed";
        EXPECT_EQ(f.at("missing_files"), "0") << "a file the table references was deleted";
        EXPECT_GT(std::stoi(f.at("referenced_files")), 0);
        EXPECT_EQ(f.at("snapshots"), snapshots) << "a snapshot of the same rows twice";
        // The mirror the retention guard trusts says what the table says.
        db::Connection c(db.dsn(), "test");
        const auto p = c.query(
            "SELECT archived_seq::text, metadata_location, snapshot_id::text FROM "
            "trackd.archive_progress");
        ASSERT_EQ(p.rows(), 1);
        EXPECT_EQ(p.at(0, 0), f.at("property_archive_seq"));
        // Maintenance prunes the ledger (V0012): the highest stamp may be in its watermark.
        EXPECT_EQ(p.at(0, 0),
                  std::to_string(query_int(
                      db.dsn(),
                      "SELECT greatest((SELECT max(archive_seq) FROM trackd.ingest_batches), "
                      "(SELECT max(pruned_seq) FROM trackd.ingest_batches_pruned))")));
        if (after_append) {
            EXPECT_EQ(p.at(0, 1), f.at("metadata_location"));
            EXPECT_EQ(p.at(0, 2), f.at("current_snapshot_id"));
        }
        expect_exact(a.check("compare"));
    };
    expect_consistent(std::to_string(kCommits), true);

    // Maintenance through the proxy, the replies to both its commits (merge manifests, expire
    // snapshots) lost: both found committed, the expired snapshots' manifest lists deleted after
    // that, nothing the table references.
    proxy.cut_commit_replies(2, "trackd archive catalog");
    const auto r = a.archive("maintain", {{"TRACKD_PG_DSN", proxy.through(db.dsn())},
                                          {"TRACKD_ARCHIVE_SNAPSHOT_MAX_AGE_S", "0"},
                                          {"TRACKD_ARCHIVE_MIN_SNAPSHOTS_TO_KEEP", "2"},
                                          {"TRACKD_ARCHIVE_MAX_MANIFESTS", "2"},
                                          {"TRACKD_ARCHIVE_ORPHAN_MIN_AGE_S", "0"}});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(proxy.cuts(), kLost + 2);
    EXPECT_EQ(count_of(r.output, "archive commit found committed after its reply was lost"), 2U)
        << r.output;
    EXPECT_NE(r.output.find("maintenance: 4 manifests merged, 3 snapshots expired, 3 files "
                            "deleted, 0 orphans deleted"),
              std::string::npos)
        << r.output;
    EXPECT_EQ(a.check("table").at("current_operation"), "replace");
    expect_consistent("2", false);

    // And archiving goes on on top, one more reply lost, with --once.
    insert_batch(1);
    proxy.cut_commit_replies(1, "trackd archive catalog");
    const auto once = a.archive("--once", {{"TRACKD_PG_DSN", proxy.through(db.dsn())}});
    ASSERT_EQ(once.exit_code, 0) << once.output;
    EXPECT_EQ(proxy.cuts(), kLost + 3);
    EXPECT_NE(once.output.find("archived 25 rows in 1 commits"), std::string::npos) << once.output;
    expect_consistent("3", true);
    expect_avro_ok(a.check("avro"));
}

// A stop while the catalog's PostgreSQL is frozen (a relay that relays nothing: connections stay
// open, no keepalive ends the wait) and the archiver's catalog COMMIT is in flight: the loop
// cannot see the stop, so `trackd archive` exits at its stop bound (5 s here) with status 1 and
// says why. The held COMMIT then reaches the server after the process is gone (the relay thaws:
// applied, its answer lost with the process) or never does (the relay cuts the connection: not
// applied). Either way the next archiver learns the outcome from the catalog: each batch is in
// the table once, one snapshot per batch.
TEST(Archive, AStopWhileThePostgresqlServerIsFrozenEndsAtItsBound) {
    TestDatabase db("archfrozen", Schema::migrated);
    ArchiveFixture a(db.dsn(), "archfrozen");
    const auto [host, port] = pg_endpoint(db.dsn());
    db::Connection conn(db.dsn(), "test writer");
    insert_small_batch(conn, 1);
    const auto first = a.archive("--once");  // creates the table; its first snapshot
    ASSERT_EQ(first.exit_code, 0) << first.output;

    int batch = 1;
    for (const bool applied : {true, false}) {
        SCOPED_TRACE(applied ? "the held COMMIT reaches the server" : "the held COMMIT is lost");
        insert_small_batch(conn, ++batch);
        TcpRelay relay(host, port);
        const std::string base = ::testing::TempDir() + "archfrozen-" + std::to_string(getpid()) +
                                 "-" + std::to_string(batch);
        const std::string log = base + ".log";
        const std::string release = base + ".release";
        fs::remove(log);
        fs::remove(release);
        auto archiver = a.start_archiver(
            log, {{"TRACKD_PG_DSN", relay.through(db.dsn())},
                  {"TRACKD_ARCHIVE_MAINTENANCE_INTERVAL_S", "0"},
                  {"TRACKD_TEST_ARCHIVE_PAUSE_AT", "catalog-transaction@" + release},
                  {"TRACKD_TEST_STOP_BOUND_S", "5"}});
        ASSERT_TRUE(
            wait_for_log(log, "archive paused at catalog-transaction", std::chrono::seconds(120)))
            << IngestHarness::read_file(log);
        relay.freeze(true);
        std::ofstream(release).close();
        ASSERT_GT(relay.wait_holding(1), 0) << "the COMMIT did not reach the frozen relay\n"
                                            << IngestHarness::read_file(log);
        archiver->kill(SIGTERM);
        const bool ended = archiver->wait_for(std::chrono::seconds(60));
        if (applied) {
            relay.freeze(false);
        } else {
            relay.cut(true);
        }
        ASSERT_TRUE(ended) << "trackd archive waited for the frozen server\n"
                           << IngestHarness::read_file(log);
        EXPECT_EQ(archiver->exit_code(), 1) << IngestHarness::read_file(log);
        EXPECT_NE(IngestHarness::read_file(log).find("stop did not finish in time"),
                  std::string::npos)
            << IngestHarness::read_file(log);
        // The archiver's sessions end once the server sees their connections close.
        ASSERT_TRUE(wait_for_value(db.dsn(),
                                   "SELECT count(*) FROM pg_stat_activity WHERE datname = "
                                   "current_database() AND application_name LIKE 'trackd archive%'",
                                   0, std::chrono::seconds(30)));
        EXPECT_EQ(query_int(db.dsn(), kAllArchived), applied ? 0 : 1);

        const auto once = a.archive("--once");
        ASSERT_EQ(once.exit_code, 0) << once.output;
        EXPECT_NE(once.output.find(applied ? "archived 0 rows in 0 commits"
                                           : "archived 7 rows in 1 commits"),
                  std::string::npos)
            << once.output;
        EXPECT_EQ(query_int(db.dsn(), kAllArchived), 0);
        EXPECT_EQ(a.check("files").at("snapshots"), std::to_string(batch))
            << "one snapshot per batch";
        expect_exact(a.check("compare"));
    }
}

void insert_rows(db::Connection& c, int batch, int rows) {
    c.query(
        "INSERT INTO trackd.vehicle_telemetry_history SELECT 'veh-' || (g % 5), now() - g * "
        "interval '1 second' - $1::int * interval '1 minute', ST_SetSRID(ST_MakePoint(13 + g * "
        "0.001, 52, 0), 4326), 10, NULL, NULL, NULL, $1::bigint, 0, $1::bigint * 1000 + g FROM "
        "generate_series(1, $2::int) g",
        {std::to_string(batch), std::to_string(rows)});
}

// OAuth2 client credentials (archive.rest_credential) against the proxy's token check: tokens
// refused after three uses are renewed; a wrong secret stops with a message naming the key; a
// static bearer token (archive.rest_token) works too.
TEST(ArchiveRest, OAuth2ClientCredentialsAndStaticBearerToken) {
    TestDatabase db("archrestauth", Schema::migrated);
    ArchiveFixture a(db.dsn(), "archrestauth", CatalogKind::rest);
    HttpFront proxy("archrestauth", iceberg_rest_uri(),
                    {"--client-id", "trackd-archiver", "--client-secret", "s3cret&=value",
                     "--token", "static-bearer", "--token-uses", "3"});
    db::Connection conn(db.dsn(), "test writer");
    insert_rows(conn, 1, 40);

    auto once = a.archive("--once", {{"TRACKD_ARCHIVE_REST_URI", proxy.uri}});
    EXPECT_NE(once.exit_code, 0) << "no credentials: the proxy refuses every request";
    EXPECT_NE(once.output.find("401"), std::string::npos) << once.output;

    once = a.archive("--once", {{"TRACKD_ARCHIVE_REST_URI", proxy.uri},
                                {"TRACKD_ARCHIVE_REST_CREDENTIAL", "trackd-archiver:wrong"}});
    EXPECT_NE(once.exit_code, 0);
    EXPECT_NE(once.output.find("check archive.rest_credential"), std::string::npos) << once.output;
    EXPECT_EQ(proxy.count("credential refused"), 1U);

    once =
        a.archive("--once", {{"TRACKD_ARCHIVE_REST_URI", proxy.uri},
                             {"TRACKD_ARCHIVE_REST_CREDENTIAL", "trackd-archiver:s3cret&=value"}});
    ASSERT_EQ(once.exit_code, 0) << once.output << IngestHarness::read_file(proxy.log);
    EXPECT_NE(once.output.find("archived 40 rows in 1 commits"), std::string::npos) << once.output;
    EXPECT_EQ(once.output.find("s3cret"), std::string::npos) << "a secret in the output";
    // More than three requests per archive round: the first token was refused and renewed.
    EXPECT_GE(proxy.count("token issued"), 2U) << IngestHarness::read_file(proxy.log);
    EXPECT_GE(proxy.count("token refused"), 2U) << IngestHarness::read_file(proxy.log);

    insert_rows(conn, 2, 30);
    once = a.archive("--once", {{"TRACKD_ARCHIVE_REST_URI", proxy.uri},
                                {"TRACKD_ARCHIVE_REST_TOKEN", "static-bearer"}});
    ASSERT_EQ(once.exit_code, 0) << once.output;
    EXPECT_NE(once.output.find("archived 30 rows in 1 commits"), std::string::npos) << once.output;

    const auto shown = run_command(
        env_prefix(a.env({{"TRACKD_ARCHIVE_REST_CREDENTIAL", "trackd-archiver:s3cret&=value"}})) +
        trackd_binary() + " check-config");
    EXPECT_EQ(shown.exit_code, 0) << shown.output;
    EXPECT_NE(shown.output.find("rest_credential = \"trackd-archiver:****\""), std::string::npos)
        << shown.output;
    EXPECT_EQ(shown.output.find("s3cret"), std::string::npos) << shown.output;
    const auto c = a.check("compare");
    expect_exact(c);
    EXPECT_EQ(c.at("iceberg_rows"), "70");
}

// Vended credentials (archive.rest_access_delegation): the catalog's front hands out a key pair
// and session token with each table it loads, in `storage-credentials` (and another key pair in
// `config`, which the spec says to look at second), and the bucket's front refuses every
// request signed otherwise, as a bucket whose policy admits only the catalog's credentials.
// trackd's own key (archive.s3_*) is refused; asking for vended credentials, archiving, reading
// and maintenance (its own signed upload listing included) all go through.
TEST(ArchiveRestS3, VendedCredentialsReachABucketThatRefusesTrackdsOwnKey) {
    TestDatabase db("archrests3vend", Schema::migrated);
    ArchiveFixture a(db.dsn(), "archrests3vend", kRestS3);
    // moto takes any key; against MinIO by hand, TEST_S3_VENDED_CREDENTIALS holds real temporary
    // credentials (KEY:SECRET:TOKEN from its STS), which it checks (docs/archive.md).
    const char* given = std::getenv("TEST_S3_VENDED_CREDENTIALS");
    const std::string vended = given != nullptr ? given : "vended-key:vended-secret:vended-token";
    const auto key = vended.substr(0, vended.find(':'));
    const auto token = vended.substr(vended.rfind(':') + 1);
    const HttpFront catalog("archrests3vendcat", iceberg_rest_uri(), {"--vend-s3", vended});
    const HttpFront bucket("archrests3vends3", s3_endpoint(),
                           {"--s3", "--s3-require-credential", key + ":" + token});
    db::Connection conn(db.dsn(), "test");
    insert_small_batch(conn, 1);
    std::map<std::string, std::string> env = {
        {"TRACKD_ARCHIVE_REST_URI", catalog.uri},
        {"TRACKD_ARCHIVE_S3_ENDPOINT", bucket.uri},
        {"TRACKD_ARCHIVE_S3_ACCESS_KEY_ID", "own-key"},
        {"TRACKD_ARCHIVE_S3_SECRET_ACCESS_KEY", "own-secret"}};

    auto r = a.archive("--once", env);
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("archive.warehouse"), std::string::npos) << r.output;
    EXPECT_GE(bucket.count("S3 request refused 403 key=own-key"), 1U) << bucket.text();
    EXPECT_EQ(catalog.count("credentials vended"), 0U) << "vended without being asked";
    const auto refused = bucket.count("S3 request refused");

    env["TRACKD_ARCHIVE_REST_ACCESS_DELEGATION"] = "vended-credentials";
    r = a.archive("--once", env);
    ASSERT_EQ(r.exit_code, 0) << r.output << bucket.text();
    EXPECT_NE(r.output.find("archived 7 rows in 1 commits"), std::string::npos) << r.output;
    EXPECT_GE(catalog.count("credentials vended"), 1U) << catalog.text();
    EXPECT_EQ(bucket.count("S3 request refused"), refused) << bucket.text();
    EXPECT_GE(bucket.count("forwarded PUT"), 1U) << "the data file went through the front\n"
                                                 << bucket.text();
    expect_exact(a.check("compare"));

    env["TRACKD_ARCHIVE_ORPHAN_MIN_AGE_S"] = "0";
    r = a.archive("maintain", env);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("0 uploads aborted"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("not aborted"), std::string::npos) << r.output;
    EXPECT_GE(bucket.count("forwarded multipart GET"), 1U) << "the listing of uploads\n"
                                                           << bucket.text();
    EXPECT_EQ(bucket.count("S3 request refused"), refused) << bucket.text();
    EXPECT_EQ(a.check("files").at("missing_files"), "0");
}

// Vended credentials that expire while `trackd archive` runs: from one moment on the bucket's
// front refuses the pair it admitted (as S3 refuses an expired session token), and rounds fail
// and commit nothing; once the catalog's front vends a new pair, the next round's load of the
// table picks it up and archives what waited, once. The fronts read the pairs from files
// (rest_proxy.py's @FILE), which the test rewrites.
TEST(ArchiveRestS3, ExpiredVendedCredentialsAreRenewedByTheNextLoadOfTheTable) {
    TestDatabase db("archrests3renew", Schema::migrated);
    ArchiveFixture a(db.dsn(), "archrests3renew", kRestS3);
    const std::string dir = ::testing::TempDir() + "archrests3renew-" + std::to_string(getpid());
    fs::create_directories(dir);
    const std::string vended = dir + "/vended";
    const std::string admitted = dir + "/admitted";
    const auto write = [](const std::string& path, const std::string& text) {
        std::ofstream(path + ".new") << text;
        fs::rename(path + ".new", path);  // a front never reads half a file
    };
    write(vended, "key-1:secret-1:token-1");
    write(admitted, "key-1:token-1");
    const HttpFront catalog("archrests3renewcat", iceberg_rest_uri(), {"--vend-s3", "@" + vended});
    const HttpFront bucket("archrests3renews3", s3_endpoint(),
                           {"--s3", "--s3-require-credential", "@" + admitted});
    db::Connection conn(db.dsn(), "test");
    insert_small_batch(conn, 1);
    const std::string log =
        ::testing::TempDir() + "archrests3renew-" + std::to_string(getpid()) + ".log";
    fs::remove(log);
    auto archiver =
        a.start_archiver(log, {{"TRACKD_ARCHIVE_REST_URI", catalog.uri},
                               {"TRACKD_ARCHIVE_S3_ENDPOINT", bucket.uri},
                               {"TRACKD_ARCHIVE_S3_ACCESS_KEY_ID", "own-key"},
                               {"TRACKD_ARCHIVE_S3_SECRET_ACCESS_KEY", "own-secret"},
                               {"TRACKD_ARCHIVE_REST_ACCESS_DELEGATION", "vended-credentials"},
                               {"TRACKD_ARCHIVE_MAINTENANCE_INTERVAL_S", "0"},
                               {"TRACKD_ARCHIVE_COMPACTION_INTERVAL_S", "0"}});
    ASSERT_TRUE(wait_for_value(db.dsn(), kAllArchived, 0, std::chrono::seconds(60)))
        << IngestHarness::read_file(log) << bucket.text();

    write(admitted, "key-2:token-2");  // key-1 has expired
    insert_small_batch(conn, 2);
    ASSERT_TRUE(wait_for_log(log, "archive failed, retrying", std::chrono::seconds(60)))
        << IngestHarness::read_file(log);
    EXPECT_GE(bucket.count("S3 request refused 403 key=key-1"), 1U) << bucket.text();
    EXPECT_EQ(query_int(db.dsn(), kAllArchived), 1) << "nothing committed with refused uploads";

    write(vended, "key-2:secret-2:token-2");  // the catalog hands out the new pair
    ASSERT_TRUE(wait_for_value(db.dsn(), kAllArchived, 0, std::chrono::seconds(60)))
        << IngestHarness::read_file(log) << bucket.text();
    archiver->kill(SIGTERM);
    EXPECT_EQ(archiver->wait(), 0) << IngestHarness::read_file(log);
    EXPECT_EQ(bucket.count("S3 request refused 403 key=own-key"), 0U) << bucket.text();
    EXPECT_EQ(bucket.count("S3 request refused 403 key=key-2"), 0U) << bucket.text();
    const auto c = a.check("compare");
    expect_exact(c);
    EXPECT_EQ(c.at("iceberg_rows"), "14");
    EXPECT_EQ(a.check("files").at("missing_files"), "0");
}

// Commits whose answer never comes back (the proxy forwards the commit, the server applies it,
// the proxy closes the connection instead of answering), or that fail with a 503 before reaching
// the server: each outcome is learnt from the catalog (the table, or the same request sent again,
// which asserts main at the base and so applies at most once), never guessed. Then maintenance
// (merge manifests: a new snapshot; expiry: snapshots removed) with both its replies lost.
TEST(ArchiveRest, LostAndFailedCommitRepliesLoseNothing) {
    TestDatabase db("archrestlost", Schema::migrated);
    ArchiveFixture a(db.dsn(), "archrestlost", CatalogKind::rest);
    db::Connection conn(db.dsn(), "test writer");

    {
        HttpFront proxy("archrestlost", iceberg_rest_uri(), {"--lose-commit-replies", "1"});
        insert_rows(conn, 1, 25);
        const auto once = a.archive("--once", {{"TRACKD_ARCHIVE_REST_URI", proxy.uri}});
        ASSERT_EQ(once.exit_code, 0) << once.output;
        EXPECT_EQ(proxy.count("commit reply lost"), 1U);
        EXPECT_EQ(count_of(once.output, "archive commit found committed after its reply was lost"),
                  1U)
            << once.output;
        EXPECT_NE(once.output.find("archived 25 rows in 1 commits"), std::string::npos)
            << once.output;
    }
    {
        HttpFront proxy("archrestfail", iceberg_rest_uri(), {"--fail-commits", "1"});
        insert_rows(conn, 2, 25);
        const auto once = a.archive("--once", {{"TRACKD_ARCHIVE_REST_URI", proxy.uri}});
        ASSERT_EQ(once.exit_code, 0) << once.output;
        EXPECT_EQ(proxy.count("commit failed 503"), 1U);
        // Sent again: applied once, by the second request.
        EXPECT_EQ(count_of(once.output, "archive commit found committed after its reply was lost"),
                  1U)
            << once.output;
        EXPECT_NE(once.output.find("archived 25 rows in 1 commits"), std::string::npos)
            << once.output;
    }
    insert_rows(conn, 3, 25);
    ASSERT_EQ(a.archive("--once").exit_code, 0);
    auto f = a.check("files");
    EXPECT_EQ(f.at("missing_files"), "0");
    EXPECT_EQ(f.at("snapshots"), "3") << "a snapshot of the same rows twice";
    expect_exact(a.check("compare"));
    {
        HttpFront proxy("archrestmaint", iceberg_rest_uri(), {"--lose-commit-replies", "2"});
        const auto r = a.archive("maintain", {{"TRACKD_ARCHIVE_REST_URI", proxy.uri},
                                              {"TRACKD_ARCHIVE_SNAPSHOT_MAX_AGE_S", "0"},
                                              {"TRACKD_ARCHIVE_MIN_SNAPSHOTS_TO_KEEP", "2"},
                                              {"TRACKD_ARCHIVE_MAX_MANIFESTS", "2"},
                                              {"TRACKD_ARCHIVE_ORPHAN_MIN_AGE_S", "0"}});
        ASSERT_EQ(r.exit_code, 0) << r.output;
        EXPECT_EQ(proxy.count("commit reply lost"), 2U);
        EXPECT_EQ(count_of(r.output, "archive commit found committed after its reply was lost"), 2U)
            << r.output;
        EXPECT_NE(r.output.find("maintenance: 3 manifests merged, 2 snapshots expired"),
                  std::string::npos)
            << r.output;
    }
    f = a.check("files");
    EXPECT_EQ(f.at("missing_files"), "0");
    EXPECT_EQ(f.at("snapshots"), "2");
    EXPECT_EQ(a.check("table").at("current_operation"), "replace");
    const auto c = a.check("compare");
    expect_exact(c);
    EXPECT_EQ(c.at("iceberg_rows"), "75");
    // The mirror the retention guard reads follows the table.
    EXPECT_EQ(query_int(db.dsn(), "SELECT archived_seq FROM trackd.archive_progress"),
              std::stoll(f.at("property_archive_seq")));

    // Compaction through the REST catalog: the three small files become one per partition.
    const auto r = a.archive("compact", {{"TRACKD_ARCHIVE_COMPACT_MIN_FILES", "2"}});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("files rewritten into"), std::string::npos) << r.output;
    const auto v = a.check("values");
    EXPECT_EQ(v.at("values_match"), "1");
    EXPECT_EQ(v.at("iceberg_rows"), "75");
    EXPECT_EQ(v.at("max_files_per_partition"), "1");
    EXPECT_EQ(a.check("table").at("current_operation"), "replace");
}

// A commit whose answer is lost, and then the answers of the reads that would tell its outcome
// (rest_proxy.py --lose-reads-after-lost-commit: the server answers each, the front closes the
// connection instead). The round cannot tell whether its snapshot is in the table: it keeps its
// files, says so and fails without committing again. The next round reads the table: the
// snapshot is in it, so it archives nothing twice.
// The table holds one snapshot, with no file it references missing, and exactly PostGIS's rows.
void expect_one_exact_snapshot(const ArchiveFixture& a, const std::string& rows) {
    const auto f = a.check("files");
    EXPECT_EQ(f.at("snapshots"), "1") << "a snapshot of the same rows twice";
    EXPECT_EQ(f.at("missing_files"), "0");
    const auto c = a.check("compare");
    expect_exact(c);
    EXPECT_EQ(c.at("iceberg_rows"), rows);
}

// The next round finds its rows archived already: it commits nothing, and the table holds one
// exact snapshot of `rows`.
void expect_next_round_commits_nothing(const ArchiveFixture& a, const std::string& rows) {
    const auto again = a.archive("--once");
    ASSERT_EQ(again.exit_code, 0) << again.output;
    EXPECT_EQ(again.output.find("archive committed"), std::string::npos)
        << "committed the same rows again\n"
        << again.output;
    expect_one_exact_snapshot(a, rows);
}

TEST(ArchiveRest, ALostCommitWhoseReadBackIsLostTooIsSettledByTheNextRound) {
    TestDatabase db("archrestblind", Schema::migrated);
    ArchiveFixture a(db.dsn(), "archrestblind", CatalogKind::rest);
    db::Connection conn(db.dsn(), "test writer");
    insert_rows(conn, 1, 25);
    {
        HttpFront proxy("archrestblind", iceberg_rest_uri(),
                        {"--lose-commit-replies", "1", "--lose-reads-after-lost-commit", "1"});
        const auto once = a.archive("--once", {{"TRACKD_ARCHIVE_REST_URI", proxy.uri}});
        EXPECT_EQ(proxy.count("commit reply lost"), 1U) << proxy.text();
        EXPECT_EQ(proxy.count("read back lost"), 1U) << proxy.text();
        EXPECT_NE(once.exit_code, 0) << once.output;
        EXPECT_NE(once.output.find("archive commit outcome still unknown; keeping its files"),
                  std::string::npos)
            << once.output;
    }
    const auto f = a.check("files");
    EXPECT_EQ(f.at("snapshots"), "1") << "the lost commit was applied by the server";
    expect_next_round_commits_nothing(a, "25");
}

// A commit the catalog applied and answered 200, but whose answer names no metadata-location
// (rest_proxy.py --commit-answers-without-location): its outcome is unknown, as a lost reply's,
// so the round reads the table back, finds its snapshot there and goes on; the next round
// archives nothing twice. Before 2026-12-07 the files were deleted as if nothing had been
// committed, and the table referenced files that were gone.
TEST(ArchiveRest, ACommitAnsweredWithoutItsLocationKeepsItsFiles) {
    TestDatabase db("archrestnoloc", Schema::migrated);
    ArchiveFixture a(db.dsn(), "archrestnoloc", CatalogKind::rest);
    db::Connection conn(db.dsn(), "test writer");
    insert_rows(conn, 1, 25);
    {
        HttpFront proxy("archrestnoloc", iceberg_rest_uri(),
                        {"--commit-answers-without-location", "1"});
        const auto once = a.archive("--once", {{"TRACKD_ARCHIVE_REST_URI", proxy.uri}});
        EXPECT_EQ(proxy.count("commit answered without location"), 1U) << proxy.text();
        EXPECT_EQ(once.exit_code, 0) << once.output;
        EXPECT_NE(once.output.find("names no metadata-location"), std::string::npos) << once.output;
        EXPECT_NE(once.output.find("archive commit found committed"), std::string::npos)
            << once.output;
    }
    const auto f = a.check("files");
    EXPECT_EQ(f.at("snapshots"), "1") << "the commit was applied by the server";
    EXPECT_EQ(f.at("missing_files"), "0") << "the applied commit's files were deleted";
    expect_next_round_commits_nothing(a, "25");
}

// A commit the catalog applied, then the mirror of its progress into PostgreSQL fails (here the
// archiver's session is ended while it stands just after the commit; in life a restart of the
// server): the snapshot's files stay, and the next round mirrors the progress. They were removed
// as if nothing had been committed, and the table referenced files that were gone.
TEST(ArchiveRest, AProgressMirrorFailingAfterACommitKeepsTheCommitsFiles) {
    TestDatabase db("archrestmirror", Schema::migrated);
    ArchiveFixture a(db.dsn(), "archrestmirror", CatalogKind::rest);
    db::Connection conn(db.dsn(), "test writer");
    insert_rows(conn, 1, 25);
    const std::string log =
        ::testing::TempDir() + "archrestmirror-" + std::to_string(getpid()) + ".log";
    const std::string release = log + ".go";
    fs::remove(log);
    fs::remove(release);
    ChildProcess archiver({trackd_binary(), "archive", "--once"},
                          a.env({{"TRACKD_TEST_ARCHIVE_PAUSE_AT", "committed@" + release}}), log);
    ASSERT_TRUE(wait_for_log(log, "archive paused at committed", std::chrono::seconds(60)))
        << IngestHarness::read_file(log);
    EXPECT_EQ(conn.query("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE "
                         "datname = current_database() AND application_name = 'trackd archive'")
                  .at(0, 0),
              "1");
    std::ofstream(release) << "go";
    EXPECT_NE(archiver.wait(), 0) << IngestHarness::read_file(log);
    const auto f = a.check("files");
    EXPECT_EQ(f.at("snapshots"), "1") << "the commit was applied";
    EXPECT_EQ(f.at("missing_files"), "0") << "the committed snapshot's files were removed";
    const auto again = a.archive("--once");
    ASSERT_EQ(again.exit_code, 0) << again.output;
    expect_one_exact_snapshot(a, "25");
}

// Statistics another engine wrote for the table (a Puffin file and a partition statistics file
// named in its metadata) outlive trackd's commits and its orphan clean-up: they are referenced,
// if not by a snapshot. They go with their snapshot when it expires.
TEST(Archive, OrphanCleanUpKeepsTheStatisticsFilesTheMetadataNames) {
    TestDatabase db("archstats", Schema::migrated);
    ArchiveFixture a(db.dsn(), "archstats");
    db::Connection conn(db.dsn(), "test writer");
    insert_rows(conn, 1, 25);
    auto once = a.archive("--once");
    ASSERT_EQ(once.exit_code, 0) << once.output;
    const auto named = a.check("stats");
    const auto path = named.at("statistics_path");
    const auto partition_path = named.at("partition_statistics_path");
    insert_rows(conn, 2, 10);  // trackd commits on top of the statistics
    once = a.archive("--once");
    ASSERT_EQ(once.exit_code, 0) << once.output;
    const auto r = a.archive("maintain", {{"TRACKD_ARCHIVE_ORPHAN_MIN_AGE_S", "0"}});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const auto f = a.check("files");
    EXPECT_EQ(f.at("statistics_files"), "1") << "trackd's commit dropped the statistics";
    EXPECT_EQ(f.at("partition_statistics_files"), "1");
    EXPECT_EQ(f.at("missing_files"), "0") << "orphan clean-up deleted " << path;
    EXPECT_EQ(a.check("compare").at("iceberg_rows"), "35");

    // Snapshot expiry takes the statistics of the snapshots it removes with them (spec; with the
    // JDBC catalog trackd writes the metadata): their entries leave it, and their files are
    // deleted after the commit. Before, the entries stayed, naming a snapshot that was gone.
    const auto expired = a.archive("maintain", {{"TRACKD_ARCHIVE_SNAPSHOT_MAX_AGE_S", "0"},
                                                {"TRACKD_ARCHIVE_MIN_SNAPSHOTS_TO_KEEP", "1"},
                                                {"TRACKD_ARCHIVE_ORPHAN_MIN_AGE_S", "0"}});
    ASSERT_EQ(expired.exit_code, 0) << expired.output;
    EXPECT_NE(expired.output.find("1 snapshots expired"), std::string::npos) << expired.output;
    const auto g = a.check("files");
    EXPECT_EQ(g.at("snapshots"), "1");
    EXPECT_EQ(g.at("statistics_files"), "0");
    EXPECT_EQ(g.at("partition_statistics_files"), "0");
    EXPECT_EQ(g.at("dangling_statistics"), "0");
    EXPECT_EQ(g.at("missing_files"), "0");
    EXPECT_EQ(a.check("exists", "--uri " + shell_quote(path)).at("exists"), "0") << path;
    EXPECT_EQ(a.check("exists", "--uri " + shell_quote(partition_path)).at("exists"), "0")
        << partition_path;
    EXPECT_EQ(a.check("compare").at("iceberg_rows"), "35");
}

// The HTTP status of a GET straight to a REST catalog server (not through a test's front).
std::string rest_status(const std::string& rest_uri, const std::string& path) {
    return run_command("curl -s -o /dev/null -w '%{http_code}' " + shell_quote(rest_uri + path))
        .output;
}

// The REST catalog over https: a TLS front (rest_proxy.py with a certificate of a throwaway CA)
// before the real server. A certificate that is not trusted (another CA, the system's store
// without the CA, expired, for another name) stops the archiver before anything is sent, with an
// error that names the URI, the reason and the key to set, and nothing is committed; with
// archive.rest_ca_file naming the CA the archive goes through https, exactly.
TEST(ArchiveRest, HttpsChecksTheCatalogsCertificate) {
    TestDatabase db("archresttls", Schema::migrated);
    ArchiveFixture a(db.dsn(), "archresttls", CatalogKind::rest);
    const TlsFronts tls("archresttls", iceberg_rest_uri());
    db::Connection conn(db.dsn(), "test writer");
    insert_rows(conn, 1, 40);
    tls.each_refusal("archive.rest_ca_file", [&](const HttpFront& f, const std::string& ca_file,
                                                 const std::string& reason) {
        std::map<std::string, std::string> env = {{"TRACKD_ARCHIVE_REST_URI", f.uri}};
        if (!ca_file.empty()) env["TRACKD_ARCHIVE_REST_CA_FILE"] = ca_file;
        const auto once = a.archive("--once", env);
        EXPECT_NE(once.exit_code, 0) << once.output;
        EXPECT_NE(once.output.find("GET " + f.uri +
                                   "/v1/config: TLS handshake: the server's "
                                   "certificate is not trusted: " +
                                   reason),
                  std::string::npos)
            << once.output;
        EXPECT_EQ(f.count("forwarded"), 0U) << f.text();
    });
    // Nothing reached the catalog: no namespace, no table, no progress.
    EXPECT_EQ(rest_status(iceberg_rest_uri(), "/v1/namespaces/" + a.namespace_name()), "404");
    EXPECT_EQ(query_int(db.dsn(), "SELECT count(*) FROM trackd.archive_progress"), 0);

    const auto& good = tls.good;
    const auto once = a.archive("--once", {{"TRACKD_ARCHIVE_REST_URI", good->uri},
                                           {"TRACKD_ARCHIVE_REST_CA_FILE", tls.ca.ca_file()}});
    ASSERT_EQ(once.exit_code, 0) << once.output << good->text();
    EXPECT_NE(once.output.find("archived 40 rows in 1 commits"), std::string::npos) << once.output;
    EXPECT_EQ(good->count("TLS handshake failed"), 2U) << good->text();
    EXPECT_EQ(good->count("forwarded POST /v1/namespaces/" + a.namespace_name() +
                          "/tables/vehicle_positions 200"),
              1U)
        << "the commit went through https\n"
        << good->text();
    const auto c = a.check("compare");
    expect_exact(c);
    EXPECT_EQ(c.at("iceberg_rows"), "40");
}

// The REST catalog server SIGKILLed while trackd's commit is in flight, then started again (its
// catalog is a SQLite file, so it keeps its tables). A front holds the commit on purpose, so the
// kill lands while the archiver waits for the answer: once before the server has the request
// (not applied), once after it applied it and before the answer left (applied). The archiver
// never gets an answer, cannot reach the catalog while it is down, and learns each outcome by
// loading the table once the server is back: PostGIS rows = Iceberg rows, nothing doubled, one
// snapshot per batch. The test's own server, so that killing it disturbs no other test.
TEST(ArchiveRest, ServerKilledMidCommitOutcomeReadFromTheTable) {
    const OwnIcebergRest rest("archrestkill");
    TestDatabase db("archrestkill", Schema::migrated);
    ArchiveFixture a(db.dsn(), "archrestkill", CatalogKind::rest, rest.uri());
    db::Connection conn(db.dsn(), "test writer");
    int batch = 0;
    for (const std::string held : {"before", "after"}) {
        SCOPED_TRACE("commit held " + held + " the server applied it");
        const std::string tag = "archrestkill-" + held;
        const std::string release =
            ::testing::TempDir() + tag + "-" + std::to_string(getpid()) + ".go";
        fs::remove(release);
        const HttpFront front(tag, rest.uri(), {"--hold-commit-" + held, release});
        insert_rows(conn, ++batch, 30);
        const std::string log =
            ::testing::TempDir() + tag + "-" + std::to_string(getpid()) + ".log";
        fs::remove(log);
        auto archiver = a.start_archiver(log, {{"TRACKD_ARCHIVE_REST_URI", front.uri},
                                               {"TRACKD_ARCHIVE_REST_TIMEOUT_MS", "60000"},
                                               {"TRACKD_ARCHIVE_MAINTENANCE_INTERVAL_S", "0"},
                                               {"TRACKD_ARCHIVE_COMPACTION_INTERVAL_S", "0"}});
        ASSERT_TRUE(front.wait_for(held == "before" ? "commit held before the server"
                                                    : "commit answer held (server answered 200)"))
            << front.text() << IngestHarness::read_file(log);
        rest.kill();
        std::ofstream(release) << "go";
        ASSERT_TRUE(front.wait_for("commit dropped")) << front.text();
        ASSERT_TRUE(wait_for_log(log, "archive commit outcome unknown, reading the catalog back",
                                 std::chrono::seconds(60)))
            << IngestHarness::read_file(log);
        // While the server is down the outcome cannot be read: the archiver keeps the files
        // and retries.
        ASSERT_TRUE(wait_for_log(log, "archive failed, retrying", std::chrono::seconds(60)))
            << IngestHarness::read_file(log);
        rest.start();
        ASSERT_TRUE(wait_for_value(db.dsn(), kAllArchived, 0, std::chrono::seconds(120)))
            << IngestHarness::read_file(log) << front.text();
        archiver->kill(SIGTERM);
        EXPECT_EQ(archiver->wait(), 0);
        const auto out = IngestHarness::read_file(log);
        EXPECT_EQ(count_of(out, "archive commit outcome unknown, reading the catalog back"), 1U)
            << out;
        // Not applied: archived again once the table said so; applied: the table said so, and
        // nothing was committed again.
        EXPECT_EQ(count_of(out, "archive committed"), held == "before" ? 1U : 0U) << out;
        const auto f = a.check("files");
        EXPECT_EQ(f.at("missing_files"), "0");
        EXPECT_EQ(f.at("snapshots"), std::to_string(batch)) << "a snapshot of the same rows twice";
        const auto c = a.check("compare");
        expect_exact(c);
        EXPECT_EQ(c.at("iceberg_rows"), std::to_string(30 * batch));
    }
}

// The REST catalog server SIGKILLed inside its own commit: after it wrote the new metadata file
// and before its catalog's pointer moved (the JDBC catalog's UPDATE of its SQLite row). The
// server's FileIO stops there on purpose (TRACKD_TEST_REST_PAUSE_ARM,
// scripts/iceberg-rest/LoopbackRestCatalogServer.java). The archiver gets no answer, cannot read
// the table while the server is down, so its round fails keeping its files; once the server is
// back the next round finds the table at the base and archives the batch again, once. The metadata
// file the server wrote is an orphan, which the clean-up deletes; nothing the table references goes
// with it.
TEST(ArchiveRest, ServerKilledInsideItsOwnCommitLeavesTheTableAtItsBase) {
    const std::string arm =
        ::testing::TempDir() + "archrestinside-" + std::to_string(getpid()) + ".arm";
    fs::remove(arm);
    const OwnIcebergRest rest("archrestinside", {{"TRACKD_TEST_REST_PAUSE_ARM", arm}});
    TestDatabase db("archrestinside", Schema::migrated);
    ArchiveFixture a(db.dsn(), "archrestinside", CatalogKind::rest, rest.uri());
    db::Connection conn(db.dsn(), "test writer");
    insert_rows(conn, 1, 30);
    const auto first = a.archive("--once");
    ASSERT_EQ(first.exit_code, 0) << first.output;
    const auto before = a.stored_files("/metadata");

    std::ofstream(arm) << "armed";
    insert_rows(conn, 2, 30);
    const std::string log =
        ::testing::TempDir() + "archrestinside-" + std::to_string(getpid()) + ".log";
    fs::remove(log);
    auto archiver = a.start_archiver(log, {{"TRACKD_ARCHIVE_REST_TIMEOUT_MS", "60000"},
                                           {"TRACKD_ARCHIVE_MAINTENANCE_INTERVAL_S", "0"},
                                           {"TRACKD_ARCHIVE_COMPACTION_INTERVAL_S", "0"}});
    ASSERT_TRUE(wait_for_log(rest.log(), "paused after writing", std::chrono::seconds(60)))
        << IngestHarness::read_file(rest.log()) << IngestHarness::read_file(log);
    rest.kill();
    fs::remove(arm);
    ASSERT_TRUE(wait_for_log(log, "archive commit outcome unknown, reading the catalog back",
                             std::chrono::seconds(60)))
        << IngestHarness::read_file(log);
    ASSERT_TRUE(wait_for_log(log, "archive failed, retrying", std::chrono::seconds(60)))
        << IngestHarness::read_file(log);
    // The server's new metadata file is complete in the warehouse, and not the table's.
    std::vector<std::string> written;
    for (const auto& f : a.stored_files("/metadata")) {
        if (before.count(f) == 0 && f.ends_with(".metadata.json")) {  // not Hadoop's ".crc"
            written.push_back(f);
        }
    }
    ASSERT_EQ(written.size(), 1U) << "the metadata file the server wrote before it was killed";

    rest.start();
    ASSERT_TRUE(wait_for_value(db.dsn(), kAllArchived, 0, std::chrono::seconds(120)))
        << IngestHarness::read_file(log);
    archiver->kill(SIGTERM);
    EXPECT_EQ(archiver->wait(), 0);
    // The round whose outcome stayed unknown failed; the next one started over from the table.
    const auto out = IngestHarness::read_file(log);
    EXPECT_EQ(count_of(out, "archive committed"), 1U) << "archived again, once\n" << out;
    auto f = a.check("files");
    EXPECT_EQ(f.at("snapshots"), "2") << "a snapshot of the same rows twice";
    EXPECT_EQ(f.at("missing_files"), "0");
    EXPECT_NE(f.at("metadata_location"), written[0]);
    const auto c = a.check("compare");
    expect_exact(c);
    EXPECT_EQ(c.at("iceberg_rows"), "60");

    const auto r = a.archive("maintain", {{"TRACKD_ARCHIVE_ORPHAN_MIN_AGE_S", "0"}});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(a.stored_files("/metadata").count(written[0]), 0U) << "the orphan is still there";
    f = a.check("files");
    EXPECT_EQ(f.at("missing_files"), "0");
    expect_exact(a.check("compare"));
}

}  // namespace
}  // namespace trackd::test
