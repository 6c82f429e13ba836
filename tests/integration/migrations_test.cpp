// Migrations against the real local PostgreSQL/PostGIS: idempotence, equality with the psql
// route, a migration cut off half-way, the schema-version guard of `trackd run`, and the DEFAULT
// history partition.
#include "trackd/db/migrations.hpp"

#include <atomic>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "support/own_services.hpp"
#include "support/process.hpp"
#include "support/test_database.hpp"

namespace trackd::test {
namespace {

std::string trackd_with_db(const TestDatabase& db, const std::string& command) {
    return "env TRACKD_PG_DSN=" + shell_quote(db.dsn()) + " " + trackd_binary() + " " + command;
}

std::string pg_bin(const std::string& tool) {
    const std::string versioned = "/usr/lib/postgresql/15/bin/" + tool;
    return std::ifstream(versioned).good() ? versioned : tool;
}

std::string schema_dump(const TestDatabase& db) {
    const auto r =
        run_command(pg_bin("pg_dump") + " --schema-only --no-owner " + shell_quote(db.dsn()));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    // pg_dump brackets its output with \restrict <random key>; drop those lines.
    std::istringstream in(r.output);
    std::string out;
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("\\restrict ", 0) == 0 || line.rfind("\\unrestrict ", 0) == 0) continue;
        out += line + "\n";
    }
    return out;
}

// Rows of the current state that one statement updated, and how many of those updates were HOT:
// the backend's pending counters, read before and after it in its own transaction.
std::string current_state_updates(db::Connection& conn, const std::string& update) {
    const auto counters = [&] {
        const auto c = conn.query(
            "SELECT pg_stat_get_xact_tuples_updated(c.oid), "
            "pg_stat_get_xact_tuples_hot_updated(c.oid) FROM pg_class c "
            "WHERE c.oid = 'trackd.vehicle_current_state'::regclass");
        return std::pair{std::stoll(c.at(0, 0)), std::stoll(c.at(0, 1))};
    };
    conn.exec_script("BEGIN");
    const auto before = counters();
    conn.exec_script(update);
    const auto after = counters();
    conn.exec_script("COMMIT");
    return std::to_string(after.first - before.first) + "/" +
           std::to_string(after.second - before.second);
}

// Vehicles on grid lines (k/128), just either side of them and at the extremes, in the current
// state: 88 rows named `prefix` and a number, of Kafka partition 0.
void insert_edge_vehicles(db::Connection& conn, const std::string& prefix) {
    conn.query(R"SQL(
INSERT INTO trackd.vehicle_current_state (vehicle_id, last_updated, geom, ingest_batch_id,
  kafka_partition, kafka_offset)
SELECT $1::text || n, '2026-12-01T00:00:00Z', ST_SetSRID(ST_MakePoint(x, y, 0), 4326), 1, 0, n
  FROM (SELECT row_number() OVER () AS n, x, y
          FROM unnest(ARRAY[-180, -179.9921875, -0.0078125, -1e-12, 0, 1e-12, 0.29, 13.37109375,
                            13.371093750000002, 179.9999999, 180]) x,
               unnest(ARRAY[-90, -45.5, -1e-12, 0, 0.29, 52.5078125, 89.99, 90]) y) p
)SQL",
               {prefix});
}

// The current state's rows as a count and a hash of id, position, offset and time.
std::string current_state_fingerprint(db::Connection& conn) {
    return conn
        .query(
            "SELECT count(*) || ' ' || sum(hashtext(vehicle_id || ST_AsText(geom) || "
            "kafka_offset || last_updated))::text FROM trackd.vehicle_current_state")
        .at(0, 0);
}

// On insert_edge_vehicles' rows: the vehicle at 0.29 E moves within its cell (a HOT update),
// then into the next cell (not HOT: a new index entry).
void expect_hot_within_the_cell_and_not_across(db::Connection& conn) {
    // 0.29 lies in [37/128, 38/128): 0.2921 does too, 0.2969 does not.
    EXPECT_EQ(current_state_updates(conn,
                                    "UPDATE trackd.vehicle_current_state SET geom = "
                                    "ST_SetSRID(ST_MakePoint(0.2921, 52.5078126, 0), 4326), "
                                    "last_updated = last_updated + interval '1 s' "
                                    "WHERE ST_X(geom) = 0.29 AND ST_Y(geom) = 52.5078125"),
              "1/1");
    EXPECT_EQ(current_state_updates(conn,
                                    "UPDATE trackd.vehicle_current_state SET geom = "
                                    "ST_SetSRID(ST_MakePoint(0.2969, 52.5078126, 0), 4326) "
                                    "WHERE ST_X(geom) = 0.2921"),
              "1/0");
}

// The row's cell_corner is the south-west corner of the 1/128 degree grid cell holding its geom
// (V0016), as an SQL condition.
constexpr const char* kCornerHoldsItsPoint =
    "(ST_X(cell_corner) * 128 = floor(ST_X(cell_corner) * 128) "
    "AND ST_Y(cell_corner) * 128 = floor(ST_Y(cell_corner) * 128) "
    "AND ST_X(geom) >= ST_X(cell_corner) AND ST_X(geom) - ST_X(cell_corner) < 1.0 / 128 "
    "AND ST_Y(geom) >= ST_Y(cell_corner) AND ST_Y(geom) - ST_Y(cell_corner) < 1.0 / 128)";

void apply_with_psql(const TestDatabase& db, int up_to_version, int from_version = 1) {
    for (const auto& m : db::known_migrations()) {
        if (m.version > up_to_version) break;
        if (m.version < from_version) continue;
        const auto r = run_command(
            pg_bin("psql") + " -X -q -1 -v ON_ERROR_STOP=1 -d " + shell_quote(db.dsn()) + " -f " +
            shell_quote(std::string(TRACKD_SOURCE_DIR) + "/sql/migrations/" + m.file));
        ASSERT_EQ(r.exit_code, 0) << m.file << ": " << r.output;
    }
}

TEST(Migrations, SecondRunChangesNothing) {
    TestDatabase db("mig_twice");
    auto first = run_command(trackd_with_db(db, "migrate"));
    ASSERT_EQ(first.exit_code, 0) << first.output;
    EXPECT_NE(first.output.find("schema migrated from version 0 to " +
                                std::to_string(db::expected_schema_version())),
              std::string::npos)
        << first.output;
    const std::string before = schema_dump(db);

    auto second = run_command(trackd_with_db(db, "migrate"));
    ASSERT_EQ(second.exit_code, 0) << second.output;
    EXPECT_NE(second.output.find("schema is up to date"), std::string::npos) << second.output;
    EXPECT_EQ(schema_dump(db), before);

    db::Connection conn(db.dsn(), "test");
    auto r =
        conn.query("SELECT count(*), count(checksum), max(version) FROM trackd.schema_migrations");
    const auto n = std::to_string(db::known_migrations().size());
    EXPECT_EQ(r.at(0, 0), n);
    EXPECT_EQ(r.at(0, 1), n);
    EXPECT_EQ(r.at(0, 2), std::to_string(db::expected_schema_version()));
}

// The advisory lock that serialises migrations is per database, the roles are the cluster's:
// databases migrated side by side on a fresh cluster race to create them. Each round starts
// with no trackd roles on a cluster of the test's own. Before the migrator retried such a file,
// a lost race failed a database in about one round in five with `role "trackd_archive" does not
// exist`; with the retry switched off this test failed in its first round.
TEST(Migrations, SideBySideOnAFreshClusterAllSucceed) {
    OwnPostgres pg("mig_side");
    constexpr int kRounds = 3;
    constexpr int kDatabases = 6;
    for (int round = 0; round < kRounds; ++round) {
        {
            std::vector<std::unique_ptr<TestDatabase>> dbs;
            for (int i = 0; i < kDatabases; ++i) {
                dbs.push_back(std::make_unique<TestDatabase>("mig_side"));
            }
            std::vector<std::string> errors(kDatabases);
            std::vector<std::thread> threads;
            for (int i = 0; i < kDatabases; ++i) {
                threads.emplace_back([&, i] {
                    try {
                        db::Connection conn(dbs[i]->dsn(), "trackd tests");
                        db::migrate(conn);
                    } catch (const std::exception& e) {
                        errors[i] = e.what();
                    }
                });
            }
            for (auto& t : threads) t.join();
            for (int i = 0; i < kDatabases; ++i) {
                EXPECT_EQ(errors[i], "") << "round " << round << ", database " << i;
            }
        }
        db::Connection admin(pg_admin_dsn(), "trackd tests");
        admin.exec_script("DROP ROLE trackd_ingest, trackd_api, trackd_readonly, trackd_archive");
    }
}

TEST(Migrations, TrackdMigrateEqualsPsqlFilesInOrder) {
    TestDatabase by_trackd("mig_trackd");
    TestDatabase by_psql("mig_psql");
    ASSERT_EQ(run_command(trackd_with_db(by_trackd, "migrate")).exit_code, 0);
    apply_with_psql(by_psql, db::expected_schema_version());
    const std::string a = schema_dump(by_trackd);
    const std::string b = schema_dump(by_psql);
    ASSERT_GT(a.size(), 1000U);
    EXPECT_EQ(a, b);

    // trackd adopts psql-applied migrations: it fills in their checksums and applies nothing.
    auto r = run_command(trackd_with_db(by_psql, "migrate"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("schema is up to date"), std::string::npos) << r.output;
    db::Connection conn(by_psql.dsn(), "test");
    EXPECT_EQ(
        conn.query("SELECT count(*) FROM trackd.schema_migrations WHERE checksum IS NULL").at(0, 0),
        "0");
}

// The suffixes of a history partition's indexes, in name order ("_geom_gist,_ingest_...").
std::string index_suffixes(db::Connection& conn, const std::string& partition) {
    return conn
        .query(
            "SELECT string_agg(substr(c.relname, length($1) + 1), ',' ORDER BY c.relname) "
            "FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid "
            "WHERE x.indrelid = ('trackd.' || $1)::regclass",
            {partition})
        .at(0, 0);
}

// V0013 indexes geom with SP-GiST: an empty partition gets it in place of its GiST; one with
// rows keeps its GiST, which counts as its spatial index (nothing for the indexer to build, no
// hot index to drop) and still answers a box.
TEST(Migrations, V0013GivesEmptyPartitionsTheSpGistAndLeavesAFullOneItsGist) {
    TestDatabase db("mig_spgist");
    apply_with_psql(db, 12);
    db::Connection conn(db.dsn(), "test");
    conn.exec_script(R"SQL(
SELECT trackd.create_history_partitions('2099-03-01T00:00:00Z', '2099-03-03T00:00:00Z', 'day', false);
INSERT INTO trackd.vehicle_telemetry_history (vehicle_id, recorded_at, geom, ingest_batch_id,
  kafka_partition, kafka_offset)
SELECT 'veh-' || v, '2099-03-01T10:00:00Z'::timestamptz + v * interval '1 min',
       ST_SetSRID(ST_MakePoint(13.0 + v * 0.01, 52.0, 0), 4326), 1, 0, v
  FROM generate_series(1, 50) v;
)SQL");
    const auto indexes = [&](const std::string& partition) {
        return index_suffixes(conn, partition);
    };
    const std::string full = "vehicle_telemetry_history_p20990301";
    const std::string empty = "vehicle_telemetry_history_p20990302";
    ASSERT_EQ(indexes(full), "_geom_gist,_ingest_batch_id_idx,_vehicle_time_idx");
    ASSERT_EQ(indexes(empty), "_geom_gist,_ingest_batch_id_idx,_vehicle_time_idx");

    auto r = run_command(trackd_with_db(db, "migrate"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    // (and V0019 gives every partition the BRIN on recorded_at)
    EXPECT_EQ(indexes(full), "_geom_gist,_ingest_batch_id_idx,_time_brin,_vehicle_time_idx");
    EXPECT_EQ(indexes(empty), "_geom_spgist,_ingest_batch_id_idx,_time_brin,_vehicle_time_idx");
    EXPECT_EQ(conn.query("SELECT string_agg(partition_name || ':' || closed_missing::text || "
                         "closed_invalid::text || hot_present::text, ',' ORDER BY partition_name) "
                         "FROM trackd.history_partition_indexes() WHERE partition_name IN ($1, $2)",
                         {full, empty})
                  .at(0, 0),
              full + ":{}{}{}," + empty + ":{}{}{}");
    // A partition made now gets the SP-GiST.
    conn.exec_script(
        "SELECT trackd.create_history_partitions('2099-04-01T00:00:00Z', "
        "'2099-04-02T00:00:00Z', 'day', false)");
    EXPECT_EQ(indexes("vehicle_telemetry_history_p20990401"),
              "_geom_spgist,_ingest_batch_id_idx,_time_brin,_vehicle_time_idx");
    conn.exec_script("SET enable_seqscan = off");
    const std::string box =
        "SELECT count(*) FROM trackd.vehicle_telemetry_history WHERE geom && "
        "ST_MakeEnvelope(13.095, 51.9, 13.205, 52.1, 4326)";
    EXPECT_EQ(conn.query(box).at(0, 0), "11");
    const auto text = explain(conn, box);
    EXPECT_NE(text.find(full + "_geom_gist"), std::string::npos) << text;
}

// V0010 replaces the hot indexes of postgis.defer_indexes: an open partition made under V0009
// (with rows) gets the new set in place of V0009's BRINs and keeps its rows; a partition with
// the closed indexes is not touched.
TEST(Migrations, V0010GivesAnOpenV0009PartitionTheNewHotIndexes) {
    TestDatabase db("mig_hot");
    apply_with_psql(db, 9);
    db::Connection conn(db.dsn(), "test");
    conn.exec_script(R"SQL(
SELECT trackd.create_history_partitions('2099-01-01T00:00:00Z', '2099-01-02T00:00:00Z', 'day', true);
SELECT trackd.create_history_partitions('2099-02-01T00:00:00Z', '2099-02-02T00:00:00Z', 'day', false);
INSERT INTO trackd.vehicle_telemetry_history (vehicle_id, recorded_at, geom, ingest_batch_id,
  kafka_partition, kafka_offset)
SELECT 'veh-' || v, '2099-01-01T10:00:00Z'::timestamptz + v * interval '1 min',
       ST_SetSRID(ST_MakePoint(13.0 + v * 0.01, 52.0, 0), 4326), 1, 0, v
  FROM generate_series(1, 50) v;
)SQL");
    const auto indexes = [&](const std::string& partition) {
        return index_suffixes(conn, partition);
    };
    const std::string hot = "vehicle_telemetry_history_p20990101";
    const std::string closed = "vehicle_telemetry_history_p20990201";
    ASSERT_EQ(indexes(hot), "_geom_brin,_ingest_batch_id_idx,_time_brin,_vehicle_bloom");
    ASSERT_EQ(indexes(closed), "_geom_gist,_ingest_batch_id_idx,_vehicle_time_idx");

    auto r = run_command(trackd_with_db(db, "migrate"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(indexes(hot), "_geom_spgist,_ingest_batch_id_idx,_time_brin,_vehicle_hash");
    // Empty, so V0013 gave it the SP-GiST in place of the GiST; V0019 the BRIN on recorded_at.
    EXPECT_EQ(indexes(closed), "_geom_spgist,_ingest_batch_id_idx,_time_brin,_vehicle_time_idx");
    EXPECT_EQ(conn.query("SELECT count(*) FROM trackd.vehicle_telemetry_history").at(0, 0), "50");
    // The new indexes answer: a vehicle by the hash, a box by the SP-GiST.
    conn.exec_script("SET enable_seqscan = off");
    EXPECT_EQ(conn.query("SELECT kafka_offset FROM trackd.vehicle_telemetry_history "
                         "WHERE vehicle_id = 'veh-7'")
                  .at(0, 0),
              "7");
    EXPECT_EQ(conn.query("SELECT count(*) FROM trackd.vehicle_telemetry_history WHERE geom && "
                         "ST_MakeEnvelope(13.095, 51.9, 13.205, 52.1, 4326)")
                  .at(0, 0),
              "11");
    r = run_command(trackd_with_db(db, "migrate"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("schema is up to date"), std::string::npos) << r.output;
}

// V0011 moves the current state's spatial index from geom to the generated grid cell, so that
// an update inside the cell writes no index entry: rows made under V0010 get their cell, every
// cell holds its point (grid lines, negative and extreme coordinates included), an update in
// the same cell is HOT and one into another cell is found there through the cell's index (a GiST
// in V0011, an SP-GiST since V0014).
TEST(Migrations, V0011MakesCurrentStateUpdatesInTheSameCellHot) {
    TestDatabase db("mig_cell");
    apply_with_psql(db, 10);
    db::Connection conn(db.dsn(), "test");
    insert_edge_vehicles(conn, "veh-");
    auto r = run_command(trackd_with_db(db, "migrate"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    // Every cell holds its point (V0016 stores the cell as its south-west corner).
    EXPECT_EQ(conn.query("SELECT count(*) || ',' || count(*) FILTER (WHERE " +
                         std::string(kCornerHoldsItsPoint) + ") FROM trackd.vehicle_current_state")
                  .at(0, 0),
              "88,88");
    EXPECT_EQ(conn.query("SELECT string_agg(c.relname, ',' ORDER BY c.relname) FROM pg_index x "
                         "JOIN pg_class c ON c.oid = x.indexrelid "
                         "WHERE x.indrelid = 'trackd.vehicle_current_state'::regclass")
                  .at(0, 0),
              "vehicle_current_state_cell_corner_spgist,vehicle_current_state_pkey");  // V0016
    EXPECT_EQ(conn.query("SELECT reloptions::text FROM pg_class "
                         "WHERE oid = 'trackd.vehicle_current_state'::regclass")
                  .at(0, 0),
              "{fillfactor=20}");  // V0015

    expect_hot_within_the_cell_and_not_across(conn);
    conn.exec_script("SET enable_seqscan = off");
    EXPECT_EQ(conn.query("SELECT count(*) FROM trackd.vehicle_current_state WHERE cell_corner && "
                         "trackd.cell_corners_for(ST_MakeEnvelope(0.295, 52.5, 0.298, 52.6, "
                         "4326)) AND geom && ST_MakeEnvelope(0.295, 52.5, 0.298, 52.6, 4326)")
                  .at(0, 0),
              "1");
    EXPECT_NE(conn.query("EXPLAIN SELECT count(*) FROM trackd.vehicle_current_state WHERE "
                         "cell_corner && trackd.cell_corners_for(ST_MakeEnvelope(0.295, 52.5, "
                         "0.298, 52.6, 4326))")
                  .at(1, 0)
                  .find("vehicle_current_state_cell_corner_spgist"),
              std::string::npos);
    r = run_command(trackd_with_db(db, "migrate"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("schema is up to date"), std::string::npos) << r.output;
}

// V0014 indexes the current state's grid cells with SP-GiST in place of V0011's GiST. A
// CREATE INDEX CONCURRENTLY that a DBA ran ahead and that was cut off leaves an invalid index
// of the same name: the migration builds it again. The new index answers `cell && box` for
// rows that were there, for a new vehicle and for one moved into another cell.
TEST(Migrations, V0014IndexesTheCurrentStateCellsWithSpGist) {
    TestDatabase db("mig_cell_spgist");
    apply_with_psql(db, 13);
    db::Connection conn(db.dsn(), "test");
    // 40 x 25 vehicles, 0.01 degree apart from 13.0 E, 52.0 N.
    conn.exec_script(R"SQL(
INSERT INTO trackd.vehicle_current_state (vehicle_id, last_updated, geom, ingest_batch_id,
  kafka_partition, kafka_offset)
SELECT 'veh-' || i || '-' || j, '2026-12-01T00:00:00Z', ST_SetSRID(ST_MakePoint(13.0 + i * 0.01,
       52.0 + j * 0.01, 0), 4326), 1, 0, i * 100 + j
  FROM generate_series(0, 39) i, generate_series(0, 24) j;
CREATE INDEX vehicle_current_state_cell_spgist ON trackd.vehicle_current_state USING spgist (cell);
-- What an interrupted CREATE INDEX CONCURRENTLY leaves behind.
UPDATE pg_index SET indisvalid = false
 WHERE indexrelid = 'trackd.vehicle_current_state_cell_spgist'::regclass;
)SQL");
    const auto indexes = [&] {
        return conn
            .query(
                "SELECT string_agg(c.relname || ':' || am.amname || ':' || x.indisvalid, ',' "
                "ORDER BY c.relname) FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid "
                "JOIN pg_am am ON am.oid = c.relam "
                "WHERE x.indrelid = 'trackd.vehicle_current_state'::regclass")
            .at(0, 0);
    };
    ASSERT_EQ(indexes(),
              "vehicle_current_state_cell_gist:gist:true,vehicle_current_state_cell_spgist:spgist:"
              "false,vehicle_current_state_pkey:btree:true");

    apply_with_psql(db, 14, 14);  // V0016 replaces the cells by their corners: not here
    EXPECT_EQ(
        indexes(),
        "vehicle_current_state_cell_spgist:spgist:true,vehicle_current_state_pkey:btree:true");

    // A new vehicle, and one moved across a cell edge (a non-HOT update: a new index entry).
    conn.exec_script(R"SQL(
INSERT INTO trackd.vehicle_current_state (vehicle_id, last_updated, geom, ingest_batch_id,
  kafka_partition, kafka_offset)
VALUES ('veh-new', '2026-12-01T00:00:01Z', ST_SetSRID(ST_MakePoint(13.1051, 52.1051, 0), 4326),
        2, 0, 5000);
UPDATE trackd.vehicle_current_state SET geom = ST_SetSRID(ST_MakePoint(13.1052, 52.1052, 0), 4326)
 WHERE vehicle_id = 'veh-0-0';
)SQL");
    conn.exec_script("SET enable_seqscan = off");
    // Columns 10 and 11 (13.10, 13.11) by rows 10 and 11 (52.10, 52.11): four vehicles, plus the
    // two now at 13.105 E, 52.105 N.
    const std::string box =
        "SELECT string_agg(vehicle_id, ',' ORDER BY vehicle_id) FROM trackd.vehicle_current_state "
        "WHERE cell && ST_MakeEnvelope(13.0995, 52.0995, 13.1105, 52.1105, 4326) AND geom && "
        "ST_MakeEnvelope(13.0995, 52.0995, 13.1105, 52.1105, 4326)";
    EXPECT_EQ(conn.query(box).at(0, 0), "veh-0-0,veh-10-10,veh-10-11,veh-11-10,veh-11-11,veh-new");
    const auto text = explain(conn, box);
    EXPECT_NE(text.find("vehicle_current_state_cell_spgist"), std::string::npos) << text;

    apply_with_psql(db, 14, 14);  // twice: nothing changes
    EXPECT_EQ(
        indexes(),
        "vehicle_current_state_cell_spgist:spgist:true,vehicle_current_state_pkey:btree:true");
}

// V0015 lowers the current state's fillfactor from 50 to 20, so that a page keeps room for
// several versions of each of its rows while pruning cannot yet remove the dead ones (a
// transaction that can still see them: in trackd, the other writer's batch). Rows inserted under
// V0014 stay where they are; rows inserted after it are spread thinner, and two rounds of
// in-cell updates under an old snapshot stay HOT for every one of them, where the rows packed
// at fillfactor 50 run out of room.
TEST(Migrations, V0015LeavesRoomForHotUpdatesWhilePruningWaits) {
    TestDatabase db("mig_fillfactor");
    apply_with_psql(db, 14);
    db::Connection conn(db.dsn(), "test");
    // Vehicles at the centre of 1/128 degree cells, 20 cells apart: every update below stays in
    // its cell. `packed-*` before the migration, `spread-*` after it.
    const auto insert = [&](const std::string& prefix) {
        conn.exec_script(
            "INSERT INTO trackd.vehicle_current_state (vehicle_id, last_updated, geom, "
            "ingest_batch_id, kafka_partition, kafka_offset) "
            "SELECT '" +
            prefix +
            "-' || lpad(n::text, 3, '0'), '2026-12-01T00:00:00Z', "
            "ST_SetSRID(ST_MakePoint(13 + (n * 20 + 0.5) / 128, 52 + 0.5 / 128, 0), 4326), 1, 0, n "
            "FROM generate_series(1, 140) n");
    };
    insert("packed");
    apply_with_psql(db, 15, 15);  // V0016 rewrites the table (packing every row anew): not here
    EXPECT_EQ(conn.query("SELECT reloptions::text FROM pg_class "
                         "WHERE oid = 'trackd.vehicle_current_state'::regclass")
                  .at(0, 0),
              "{fillfactor=20}");
    insert("spread");
    // Rows per page, at most, of each kind.
    EXPECT_EQ(conn.query("SELECT string_agg(m::text, ',' ORDER BY k) FROM (SELECT k, max(c) AS m "
                         "FROM (SELECT split_part(vehicle_id, '-', 1) AS k, "
                         "(ctid::text::point)[0] AS page, count(*) AS c "
                         "FROM trackd.vehicle_current_state GROUP BY 1, 2) p GROUP BY k) q")
                  .at(0, 0),
              "16,6");

    // Another session's snapshot holds every dead version back from pruning.
    db::Connection reader(db.dsn(), "reader");
    reader.exec_script(
        "BEGIN ISOLATION LEVEL REPEATABLE READ; "
        "SELECT count(*) FROM trackd.vehicle_current_state");
    const auto hot_updates = [&](const std::string& prefix) {
        return current_state_updates(
            conn,
            "UPDATE trackd.vehicle_current_state SET geom = ST_Translate(geom, 1e-6, 0), "
            "last_updated = last_updated + interval '1 s' WHERE vehicle_id LIKE '" +
                prefix + "-%'");
    };
    for (int round = 1; round <= 2; ++round) {
        EXPECT_EQ(hot_updates("spread"), "140/140") << "round " << round;
    }
    hot_updates("packed");
    const auto packed = hot_updates("packed");
    ASSERT_EQ(packed.substr(0, 4), "140/");
    EXPECT_LT(std::stoi(packed.substr(4)), 70)
        << "HOT updates of rows packed at fillfactor 50, second round: " << packed;
    reader.exec_script("COMMIT");
}

// V0016 stores each vehicle's grid cell as the cell's south-west corner (a point) instead of its
// box. Rows stored under V0015 (on grid lines, either side of them, at the extremes, and 2,000
// around 13 E, 52 N) keep their values and get the corner of their cell; boxes through the
// corners' SP-GiST find exactly the vehicles that `geom && box` finds (a tiny box around each
// vehicle, boxes with their edges on grid lines, others); an update within the cell stays HOT,
// one into another cell is found there through the index.
TEST(Migrations, V0016FindsEveryVehicleThroughTheCornerOfItsCell) {
    TestDatabase db("mig_corner");
    apply_with_psql(db, 15);
    db::Connection conn(db.dsn(), "test");
    insert_edge_vehicles(conn, "edge-");
    conn.exec_script(R"SQL(
INSERT INTO trackd.vehicle_current_state (vehicle_id, last_updated, geom, ingest_batch_id,
  kafka_partition, kafka_offset)
SELECT 'grid-' || n, '2026-12-01T00:00:00Z', ST_SetSRID(ST_MakePoint(13 + (n * 7919 % 2000) /
       10000.0, 52 + (n * 104729 % 2000) / 10000.0, 0), 4326), 1, 1, n
  FROM generate_series(1, 2000) n;
)SQL");
    const auto fingerprint = [&] { return current_state_fingerprint(conn); };
    const auto before = fingerprint();
    auto r = run_command(trackd_with_db(db, "migrate"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(fingerprint(), before);
    EXPECT_EQ(conn.query("SELECT string_agg(attname || ':' || format_type(atttypid, atttypmod), "
                         "',' ORDER BY attname) FROM pg_attribute WHERE attrelid = "
                         "'trackd.vehicle_current_state'::regclass AND attname LIKE 'cell%' "
                         "AND NOT attisdropped")
                  .at(0, 0),
              "cell_corner:geometry(Point,4326)");
    EXPECT_EQ(conn.query("SELECT count(*) || ',' || count(*) FILTER (WHERE " +
                         std::string(kCornerHoldsItsPoint) + ") FROM trackd.vehicle_current_state")
                  .at(0, 0),
              "2088,2088");
    EXPECT_EQ(conn.query("SELECT string_agg(c.relname || ':' || am.amname, ',' ORDER BY c.relname) "
                         "FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid "
                         "JOIN pg_am am ON am.oid = c.relam "
                         "WHERE x.indrelid = 'trackd.vehicle_current_state'::regclass")
                  .at(0, 0),
              "vehicle_current_state_cell_corner_spgist:spgist,vehicle_current_state_pkey:btree");
    EXPECT_EQ(conn.query("SELECT reloptions::text FROM pg_class "
                         "WHERE oid = 'trackd.vehicle_current_state'::regclass")
                  .at(0, 0),
              "{fillfactor=20}");

    conn.exec_script(R"SQL(
CREATE TEMP TABLE boxes AS
SELECT row_number() OVER () AS id, b FROM (
  SELECT ST_Expand(ST_Force2D(geom), 1e-9) FROM trackd.vehicle_current_state
  UNION ALL
  SELECT ST_MakeEnvelope(13 + i / 128.0, 52 + j / 128.0, 13 + (i + k) / 128.0,
                         52 + (j + k) / 128.0, 4326)
    FROM generate_series(0, 24, 3) i, generate_series(0, 24, 3) j, generate_series(1, 3) k
  UNION ALL
  SELECT ST_MakeEnvelope(x, y, x + (n % 7 + 1) * 0.003, y + (n % 5 + 1) * 0.004, 4326)
    FROM generate_series(1, 300) n,
         LATERAL (SELECT 12.99 + (n * 37 % 220) / 1000.0 AS x, 51.99 + (n * 53 % 220) / 1000.0 AS y) p
  UNION ALL
  VALUES (ST_MakeEnvelope(-180, -90, -179.99, -89.99, 4326)),
         (ST_MakeEnvelope(179.99, 89.99, 180, 90, 4326)),
         (ST_MakeEnvelope(-0.001, -0.001, 0, 0, 4326))) q(b);
)SQL");
    const auto found = [&](const std::string& condition) {
        return conn
            .query(
                "SELECT sum(n)::text || ' ' || count(*) FILTER (WHERE n = 0) || ' ' || "
                "md5(string_agg(id || ':' || n, ',' ORDER BY id)) FROM (SELECT id, (SELECT "
                "count(*) FROM trackd.vehicle_current_state v WHERE " +
                condition + ") AS n FROM boxes) q")
            .at(0, 0);
    };
    const std::string through_cells = "v.cell_corner && trackd.cell_corners_for(b) AND v.geom && b";
    conn.exec_script("SET enable_seqscan = off");
    const auto by_cells = found(through_cells);
    const auto text =
        explain(conn, "SELECT id, (SELECT count(*) FROM trackd.vehicle_current_state v WHERE " +
                          through_cells + ") FROM boxes");
    EXPECT_NE(text.find("vehicle_current_state_cell_corner_spgist"), std::string::npos) << text;
    conn.exec_script(
        "SET enable_seqscan = on; SET enable_indexscan = off; SET enable_bitmapscan = off");
    const auto by_scan = found("v.geom && b");
    EXPECT_EQ(by_cells, by_scan);
    // Every tiny box finds its vehicle at least: only grid and other boxes can be empty.
    EXPECT_EQ(conn.query("SELECT count(*) FROM boxes WHERE id <= 2088 AND NOT EXISTS (SELECT 1 "
                         "FROM trackd.vehicle_current_state v WHERE v.geom && b)")
                  .at(0, 0),
              "0");
    conn.exec_script("RESET enable_seqscan; RESET enable_indexscan; RESET enable_bitmapscan");

    expect_hot_within_the_cell_and_not_across(conn);
    conn.exec_script("SET enable_seqscan = off");
    EXPECT_EQ(conn.query("SELECT string_agg(ST_X(geom)::text, ',') FROM "
                         "trackd.vehicle_current_state WHERE cell_corner && "
                         "trackd.cell_corners_for(ST_MakeEnvelope(0.295, 52.5, 0.298, 52.6, "
                         "4326)) AND geom && ST_MakeEnvelope(0.295, 52.5, 0.298, 52.6, 4326)")
                  .at(0, 0),
              "0.2969");

    r = run_command(trackd_with_db(db, "migrate"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("schema is up to date"), std::string::npos) << r.output;
}

// A migration cut off in the middle of its work: the backend running V0011 is terminated while
// it rewrites a current state of 300,000 vehicles (it adds the generated cell and builds its
// GiST). The file, its schema_migrations row and every row of the table are one transaction,
// so the database is left at V0010 with the rows as they were, `trackd migrate` says which file
// failed, and the next run applies V0011 and the rest whole.
TEST(Migrations, AMigrationKilledInTheMiddleOfItsRewriteLeavesThePreviousSchemaAndRows) {
    TestDatabase db("mig_kill");
    apply_with_psql(db, 10);
    db::Connection conn(db.dsn(), "test");
    conn.exec_script(R"SQL(
INSERT INTO trackd.vehicle_current_state (vehicle_id, last_updated, geom, ingest_batch_id,
  kafka_partition, kafka_offset)
SELECT 'veh-' || n, '2026-12-01T00:00:00Z'::timestamptz + n * interval '1 ms',
       ST_SetSRID(ST_MakePoint(5 + (n % 1000) * 0.01, 45 + (n / 1000) * 0.03, 0), 4326), 1, 0, n
  FROM generate_series(1, 300000) n;
)SQL");
    const auto fingerprint = [&] { return current_state_fingerprint(conn); };
    const auto version = [&] {
        return conn.query("SELECT max(version)::text FROM trackd.schema_migrations").at(0, 0);
    };
    const auto has_cell = [&] {
        return conn
            .query(
                "SELECT count(*) FROM pg_attribute WHERE attrelid = "
                "'trackd.vehicle_current_state'::regclass AND attname IN ('cell', 'cell_corner') "
                "AND NOT attisdropped")
            .at(0, 0);
    };
    const auto before = fingerprint();

    std::string v0011;
    for (const auto& m : db::known_migrations()) {
        if (m.version == 11) v0011 = m.sql.substr(0, 200);
    }
    ASSERT_FALSE(v0011.empty());

    CommandResult first;
    std::atomic<bool> done{false};
    std::thread migrate([&] {
        first = run_command(trackd_with_db(db, "migrate"));
        done = true;
    });
    // The backend that has been running V0011's file for 100 ms (pg_stat_activity shows the
    // start of the text the migrator sent: the file).
    std::string killed = "0";
    while (killed == "0" && !done) {
        killed = conn.query(
                         "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                         "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                         "AND state = 'active' AND starts_with(query, $1) "
                         "AND clock_timestamp() - query_start > interval '100 ms'",
                         {v0011})
                     .at(0, 0);
        if (killed == "0") std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    migrate.join();
    ASSERT_EQ(killed, "1") << "V0011 was not caught running: " << first.output;
    EXPECT_NE(first.exit_code, 0) << first.output;
    EXPECT_NE(first.output.find("migration V0011__current_state_hot_updates.sql failed"),
              std::string::npos)
        << first.output;
    EXPECT_EQ(version(), "10");
    EXPECT_EQ(has_cell(), "0");
    EXPECT_EQ(fingerprint(), before);

    const auto r = run_command(trackd_with_db(db, "migrate"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(version(), std::to_string(db::expected_schema_version()));
    EXPECT_EQ(has_cell(), "1");
    EXPECT_EQ(fingerprint(), before);
    EXPECT_EQ(conn.query("SELECT count(*) FROM trackd.vehicle_current_state WHERE NOT " +
                         std::string(kCornerHoldsItsPoint))
                  .at(0, 0),
              "0");
}

TEST(Migrations, ChangedFileIsRefused) {
    TestDatabase db("mig_changed");
    ASSERT_EQ(run_command(trackd_with_db(db, "migrate")).exit_code, 0);
    {
        db::Connection conn(db.dsn(), "test");
        conn.query("UPDATE trackd.schema_migrations SET checksum = 'deadbeef' WHERE version = 2");
    }
    const auto r = run_command(trackd_with_db(db, "migrate"));
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.output.find("migration V0002__history.sql was changed after it was applied"),
              std::string::npos)
        << r.output;
}

TEST(Migrations, RunRefusesOlderAndNewerSchemas) {
    TestDatabase db("mig_guard");
    auto none = run_command(trackd_with_db(db, "run"));
    EXPECT_EQ(none.exit_code, 1);
    EXPECT_NE(none.output.find("no trackd schema; run `trackd migrate`"), std::string::npos)
        << none.output;

    apply_with_psql(db, 1);
    auto older = run_command(trackd_with_db(db, "run"));
    EXPECT_EQ(older.exit_code, 1);
    EXPECT_NE(
        older.output.find("schema is at version 1, this trackd needs " +
                          std::to_string(db::expected_schema_version()) + "; run `trackd migrate`"),
        std::string::npos)
        << older.output;

    ASSERT_EQ(run_command(trackd_with_db(db, "migrate")).exit_code, 0);
    {
        db::Connection conn(db.dsn(), "test");
        conn.query("INSERT INTO trackd.schema_migrations (version, name) VALUES (999, 'future')");
    }
    auto newer = run_command(trackd_with_db(db, "run"));
    EXPECT_EQ(newer.exit_code, 1);
    EXPECT_NE(newer.output.find("newer than this trackd knows"), std::string::npos) << newer.output;
    auto migrate_newer = run_command(trackd_with_db(db, "migrate"));
    EXPECT_EQ(migrate_newer.exit_code, 1);
    EXPECT_NE(migrate_newer.output.find("upgrade trackd"), std::string::npos)
        << migrate_newer.output;
}

TEST(HistoryPartitions, RowOutsideEveryPartitionLandsInDefault) {
    TestDatabase db("part_default");
    ASSERT_EQ(run_command(trackd_with_db(db, "migrate")).exit_code, 0);
    db::Connection conn(db.dsn(), "test");
    const std::string insert =
        "INSERT INTO trackd.vehicle_telemetry_history (vehicle_id, recorded_at, geom, "
        "ingest_batch_id, kafka_partition, kafka_offset) VALUES ($1, $2::timestamptz, "
        "ST_SetSRID(ST_MakePoint(13.4, 52.5, 0), 4326), 1, 0, $3)";
    conn.query(insert, {"old-1", "1999-06-01T12:00:00Z", "1"});
    conn.query(insert, {"now-1", "now", "2"});

    auto where = conn.query(
        "SELECT vehicle_id, tableoid::regclass::text FROM trackd.vehicle_telemetry_history "
        "ORDER BY vehicle_id");
    ASSERT_EQ(where.rows(), 2);
    EXPECT_EQ(where.at(0, 0), "now-1");
    EXPECT_NE(where.at(0, 1), "trackd.vehicle_telemetry_history_default");
    EXPECT_EQ(where.at(1, 0), "old-1");
    EXPECT_EQ(where.at(1, 1), "trackd.vehicle_telemetry_history_default");

    // Creating the partition later moves the row out of DEFAULT instead of failing.
    auto created =
        conn.query("SELECT trackd.create_history_partitions('1999-06-01', '1999-06-02', 'day')");
    EXPECT_EQ(created.at(0, 0), "1");
    auto moved = conn.query(
        "SELECT tableoid::regclass::text FROM trackd.vehicle_telemetry_history "
        "WHERE vehicle_id = 'old-1'");
    ASSERT_EQ(moved.rows(), 1);
    EXPECT_EQ(moved.at(0, 0), "trackd.vehicle_telemetry_history_p19990601");
}

}  // namespace
// V0017 takes autosummarize off the history's BRINs where that needs no lock that COPY waits
// for: the empty partitions made ahead. A partition holding rows keeps it;
// partitions made afterwards have their BRIN without it, attached to the parent's index.
TEST(Migrations, V0017TakesAutosummarizeOffTheEmptyPartitionsAndNewOnesOnly) {
    TestDatabase db("mig_brin");
    apply_with_psql(db, 16);
    db::Connection conn(db.dsn(), "test");
    conn.exec_script(R"SQL(
INSERT INTO trackd.vehicle_telemetry_history (vehicle_id, recorded_at, geom, ingest_batch_id,
  kafka_partition, kafka_offset)
VALUES ('veh-1', now(), ST_SetSRID(ST_MakePoint(13, 52, 0), 4326), 1, 0, 1);
)SQL");
    // "partition:index options" of the BRINs, those still on autosummarize first.
    const auto brins = [&](const std::string& where) {
        return conn
            .query(
                "SELECT count(*) FILTER (WHERE i.reloptions @> ARRAY['autosummarize=on']) || "
                "'/' || count(*) FROM pg_inherits h JOIN pg_index x ON x.indrelid = h.inhrelid "
                "JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_am a ON a.oid = i.relam "
                "WHERE a.amname = 'brin' AND h.inhparent = "
                "'trackd.vehicle_telemetry_history'::regclass AND " +
                where)
            .at(0, 0);
    };
    const std::string with_rows =
        "h.inhrelid IN (SELECT DISTINCT tableoid FROM trackd.vehicle_telemetry_history)";
    const std::string empty = "NOT " + with_rows;
    ASSERT_EQ(brins(with_rows), "1/1");
    ASSERT_EQ(brins(empty), "9/9");  // yesterday to a week ahead and the default partition
    apply_with_psql(db, 17, 17);     // V0019 adds a BRIN to every partition: not here
    EXPECT_EQ(brins(with_rows), "1/1");
    EXPECT_EQ(brins(empty), "0/9");
    conn.query(
        "SELECT trackd.create_history_partitions('2099-03-01T00:00:00Z', "
        "'2099-03-01T01:00:00Z')");
    EXPECT_EQ(brins(empty), "0/10");
    EXPECT_EQ(conn.query("SELECT count(*) FROM pg_inherits h JOIN pg_class i ON i.oid = "
                         "h.inhrelid WHERE h.inhparent = "
                         "'trackd.vehicle_telemetry_history_batch_brin'::regclass")
                  .at(0, 0),
              "11");
    // One row fills no block range: nothing to summarize yet.
    EXPECT_EQ(conn.query("SELECT trackd.summarize_history_brins()").at(0, 0), "0");
}

}  // namespace trackd::test

namespace trackd::test {
namespace {

// V0019: every time partition of the history gets a BRIN on recorded_at, built in the migration;
// one a DBA built beforehand (CONCURRENTLY, as the file's header says) is left as it is, a
// partition made afterwards has it, and a time window over every vehicle is read through it.
TEST(Migrations, V0019GivesEveryHistoryPartitionABrinOnTheTimeThatAnswersTimeWindows) {
    TestDatabase db("mig_time_brin");
    apply_with_psql(db, 18);
    db::Connection conn(db.dsn(), "test");
    conn.exec_script(R"SQL(
SELECT trackd.create_history_partitions('2099-01-01T00:00:00Z', '2099-01-03T00:00:00Z');
INSERT INTO trackd.vehicle_telemetry_history (vehicle_id, recorded_at, geom, ingest_batch_id,
  kafka_partition, kafka_offset)
SELECT 'veh-' || (i % 100), '2099-01-01T00:00:00Z'::timestamptz + i * interval '1 s',
       ST_SetSRID(ST_MakePoint(13.0 + (i % 50) * 0.001, 52.0 + (i / 50) * 0.0001, 0), 4326),
       i / 1000 + 1, 0, i
  FROM generate_series(0, 19999) i;
)SQL");
    conn.exec_script(
        "CREATE INDEX CONCURRENTLY vehicle_telemetry_history_p20990102_time_brin ON "
        "trackd.vehicle_telemetry_history_p20990102 USING brin (recorded_at)");
    const std::string full = "vehicle_telemetry_history_p20990101";
    const std::string ahead = "vehicle_telemetry_history_p20990102";
    const auto oid_of = [&](const std::string& index) {
        return conn.query("SELECT ('trackd.' || $1)::regclass::oid::text", {index}).at(0, 0);
    };
    const auto built_ahead = oid_of(ahead + "_time_brin");
    const auto without = [&] {
        return conn
            .query(
                "SELECT count(*) FROM trackd.history_partitions() p WHERE NOT p.is_default AND "
                "to_regclass(format('trackd.%I', p.partition_name || '_time_brin')) IS NULL")
            .at(0, 0);
    };
    ASSERT_NE(without(), "0");

    apply_with_psql(db, 19, 19);
    apply_with_psql(db, 19, 19);  // twice: nothing left to do
    EXPECT_EQ(without(), "0");
    EXPECT_EQ(oid_of(ahead + "_time_brin"), built_ahead);
    EXPECT_EQ(
        conn.query("SELECT pg_get_indexdef(('trackd.' || $1)::regclass)", {full + "_time_brin"})
            .at(0, 0),
        "CREATE INDEX " + full + "_time_brin ON trackd." + full + " USING brin (recorded_at)");
    // The closed set names it, so trackd's index maintenance has nothing to build.
    EXPECT_EQ(conn.query("SELECT count(*) FROM trackd.history_partition_indexes() WHERE "
                         "cardinality(closed_missing) + cardinality(closed_invalid) > 0")
                  .at(0, 0),
              "0");
    conn.query(
        "SELECT trackd.create_history_partitions('2099-01-05T00:00:00Z', "
        "'2099-01-06T00:00:00Z')");
    EXPECT_NO_THROW(oid_of("vehicle_telemetry_history_p20990105_time_brin"));

    // Ten minutes of every vehicle: 600 of the partition's 20,000 rows, through the BRIN.
    conn.exec_script("ANALYZE trackd." + full + "; SET enable_seqscan = off");
    const std::string window =
        " FROM trackd.vehicle_telemetry_history WHERE recorded_at >= '2099-01-01T01:00:00Z' AND "
        "recorded_at < '2099-01-01T01:10:00Z'";
    EXPECT_EQ(conn.query("SELECT count(*)" + window).at(0, 0), "600");
    const auto text = explain(conn, "SELECT count(*)" + window);
    EXPECT_NE(text.find("Bitmap Index Scan on " + full + "_time_brin"), std::string::npos) << text;
}

// V0018: PostgreSQL 15 plans an index-only scan on a PostGIS SP-GiST (which keeps boxes, not
// geometries) for a query that needs no column, such as count(*) once VACUUM has marked the
// pages all-visible, and the backend then crashes or allocates gigabytes. The migration makes
// those indexes partial (IS NOT NULL), which a bare count(*) does not imply. Only EXPLAIN runs
// before it: the crash would restart every session of the shared test server.
TEST(Migrations, V0018KeepsCountOffTheSpGistIndexesAndBoxesOnThem) {
    TestDatabase db("mig_spgist_partial");
    apply_with_psql(db, 17);
    db::Connection conn(db.dsn(), "test");
    conn.exec_script(R"SQL(
SELECT trackd.create_history_partitions('2099-01-01T00:00:00Z', '2099-01-02T00:00:00Z');
INSERT INTO trackd.vehicle_telemetry_history (vehicle_id, recorded_at, geom, ingest_batch_id,
  kafka_partition, kafka_offset)
SELECT 'veh-' || (i % 100), '2099-01-01T00:00:00Z'::timestamptz + i * interval '1 s',
       ST_SetSRID(ST_MakePoint(13.0 + (i % 50) * 0.001, 52.0 + (i / 50) * 0.001, 0), 4326), 1, 0, i
  FROM generate_series(1, 3000) i;
INSERT INTO trackd.vehicle_current_state (vehicle_id, last_updated, geom, ingest_batch_id,
  kafka_partition, kafka_offset)
SELECT 'veh-' || i, '2099-01-01T00:00:00Z', ST_SetSRID(ST_MakePoint(13.0 + i * 0.001, 52.0, 0),
       4326), 1, 0, i
  FROM generate_series(1, 400) i;
)SQL");
    const std::string partition = "vehicle_telemetry_history_p20990101";
    const auto predicates = [&] {
        return conn
            .query(
                "SELECT string_agg(i.relname || ':' || coalesce(pg_get_expr(x.indpred, "
                "x.indrelid), '-'), ',' ORDER BY i.relname) FROM pg_index x JOIN pg_class i ON "
                "i.oid = x.indexrelid JOIN pg_am am ON am.oid = i.relam WHERE am.amname = "
                "'spgist' AND x.indrelid IN ('trackd." +
                partition + "'::regclass, 'trackd.vehicle_current_state'::regclass)")
            .at(0, 0);
    };
    ASSERT_EQ(predicates(),
              "vehicle_current_state_cell_corner_spgist:-," + partition + "_geom_spgist:-");
    // The plan with `settings`. For count(*), sequential and bitmap scans are discouraged, which
    // leaves an index-only scan the one undiscouraged plan wherever the planner allows one,
    // whatever the visibility map says (enable_indexscan = off would discourage it too).
    const auto plan_with = [&](const std::string& settings, const std::string& query) {
        conn.exec_script("BEGIN; " + settings);
        std::string out;
        const auto r = conn.query("EXPLAIN " + query);
        for (int i = 0; i < r.rows(); ++i) out += r.at(i, 0) + "\n";
        conn.exec_script("ROLLBACK");
        return out;
    };
    const auto count_plan = [&](const std::string& query) {
        return plan_with("SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off",
                         query);
    };
    const auto plan = [&](const std::string& query) {
        return plan_with("SET LOCAL enable_seqscan = off", query);
    };
    // As on an open partition under postgis.defer_indexes: no btree to count through instead.
    conn.exec_script("DROP INDEX trackd." + partition + "_vehicle_time_idx");
    conn.exec_script("VACUUM (ANALYZE) trackd." + partition);
    const std::string count_history = "SELECT count(*) FROM trackd." + partition;
    const auto crashing = count_plan(count_history);
    ASSERT_NE(crashing.find("Index Only Scan using " + partition + "_geom_spgist"),
              std::string::npos)
        << crashing;

    apply_with_psql(db, 18, 18);
    apply_with_psql(db, 18, 18);  // twice: nothing left to do
    EXPECT_EQ(predicates(), "vehicle_current_state_cell_corner_spgist:(cell_corner IS NOT NULL)," +
                                partition + "_geom_spgist:(geom IS NOT NULL)");
    conn.exec_script("VACUUM (ANALYZE) trackd." + partition);
    conn.exec_script("VACUUM (ANALYZE) trackd.vehicle_current_state");
    for (const std::string& query :
         {count_history, std::string("SELECT count(*) FROM trackd.vehicle_telemetry_history"),
          std::string("SELECT count(*) FROM trackd.vehicle_current_state")}) {
        EXPECT_EQ(count_plan(query).find("spgist"), std::string::npos) << count_plan(query);
    }
    EXPECT_EQ(conn.query(count_history).at(0, 0), "3000");
    EXPECT_EQ(conn.query("SELECT count(*) FROM trackd.vehicle_current_state").at(0, 0), "400");
    // Boxes still go through the indexes.
    const std::string box = "ST_MakeEnvelope(13.0, 52.0, 13.01, 52.01, 4326)";
    EXPECT_NE(plan("SELECT vehicle_id FROM trackd." + partition + " WHERE geom && " + box)
                  .find(partition + "_geom_spgist"),
              std::string::npos);
    EXPECT_NE(plan("SELECT vehicle_id FROM trackd.vehicle_current_state WHERE cell_corner && "
                   "trackd.cell_corners_for(" +
                   box + ") AND geom && " + box)
                  .find("vehicle_current_state_cell_corner_spgist"),
              std::string::npos);
    // A partition made from now on gets the partial index.
    conn.query(
        "SELECT trackd.create_history_partitions('2099-01-02T00:00:00Z', "
        "'2099-01-03T00:00:00Z')");
    EXPECT_EQ(conn.query("SELECT pg_get_expr(x.indpred, x.indrelid) FROM pg_index x WHERE "
                         "x.indexrelid = "
                         "'trackd.vehicle_telemetry_history_p20990102_geom_spgist'::regclass")
                  .at(0, 0),
              "(geom IS NOT NULL)");
}

// A migration that needs a lock a frozen session holds gives way instead of waiting for it:
// while it waited, every later request for the table would queue behind it. Here V0018 needs a
// SHARE lock on the current state to rebuild its SP-GiST and a session sits in a transaction
// holding ROW EXCLUSIVE on it (a writer frozen mid-transaction). The migration waits at most
// postgis.ddl_lock_timeout_ms for each try, so another writer's statements, which queue behind
// its lock request, get through meanwhile (with a lock_timeout of their own that an unbounded
// wait would exceed); after its tries it fails naming the frozen session, and succeeds once
// that session has ended.
TEST(Migrations, AMigrationGivesWayToAFrozenLockHolderAndNamesIt) {
    TestDatabase db("mig_lock_wait");
    apply_with_psql(db, 17);
    db::Connection frozen(db.dsn(), "frozen writer");
    frozen.exec_script("BEGIN; LOCK TABLE trackd.vehicle_current_state IN ROW EXCLUSIVE MODE");

    std::atomic<bool> done{false};
    CommandResult r;
    std::thread migrate([&] {
        r = run_command("env TRACKD_POSTGIS_DDL_LOCK_TIMEOUT_MS=200 " +
                        trackd_with_db(db, "migrate"));
        done = true;
    });
    db::Connection writer(db.dsn(), "another writer");
    writer.exec_script("SET lock_timeout = '10s'");
    int inserted = 0;
    std::vector<std::string> errors;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!done && std::chrono::steady_clock::now() < deadline) {
        try {
            writer.query(
                "INSERT INTO trackd.vehicle_current_state (vehicle_id, last_updated, geom, "
                "ingest_batch_id, kafka_partition, kafka_offset) VALUES ($1, now(), "
                "ST_SetSRID(ST_MakePoint(13.4, 52.5, 0), 4326), 1, 0, 0)",
                {"veh-" + std::to_string(inserted)});
            ++inserted;
        } catch (const db::DbError& e) {
            errors.push_back(e.what());
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (!done) {
        ADD_FAILURE() << "trackd migrate still waited for the frozen session after 60 s";
        frozen.exec_script("ROLLBACK");
    }
    migrate.join();
    EXPECT_EQ(errors, std::vector<std::string>{});
    EXPECT_GT(inserted, 10);
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("migration V0018__spgist_partial.sql failed: a lock it needs was held "
                            "past 200 ms in each of 10 tries"),
              std::string::npos)
        << r.output;
    EXPECT_NE(r.output.find("application 'frozen writer', idle in transaction"), std::string::npos)
        << r.output;
    EXPECT_EQ(db::Connection(db.dsn(), "test")
                  .query("SELECT max(version) FROM trackd.schema_migrations")
                  .at(0, 0),
              "17");

    frozen.exec_script("ROLLBACK");
    const auto again = run_command(trackd_with_db(db, "migrate"));
    ASSERT_EQ(again.exit_code, 0) << again.output;
    EXPECT_EQ(db::Connection(db.dsn(), "test")
                  .query("SELECT max(version) || ':' || count(*) FROM trackd.schema_migrations")
                  .at(0, 0),
              std::to_string(db::expected_schema_version()) + ":" +
                  std::to_string(db::expected_schema_version()));
    EXPECT_EQ(db::Connection(db.dsn(), "test")
                  .query("SELECT count(*) FROM trackd.vehicle_current_state")
                  .at(0, 0),
              std::to_string(inserted));
}

// V0022 on a database whose text sorts as English does: every table and history partition with
// a vehicle_id has it in byte order ("C") afterwards, its indexes rebuilt on it, the rows as they
// were; ORDER BY vehicle_id goes by bytes; a lookup and a join with a table in the database's
// collation use the indexes; a partition made later is in byte order too; and a second run
// rebuilds nothing.
TEST(Migrations, V0022PutsVehicleIdsInByteOrderEverywhere) {
    TestDatabase db("mig_bytes", std::string("en-US"));
    apply_with_psql(db, 21);
    db::Connection conn(db.dsn(), "test");
    conn.exec_script(R"SQL(
INSERT INTO trackd.vehicle_telemetry_history (vehicle_id, recorded_at, geom, ingest_batch_id,
  kafka_partition, kafka_offset)
SELECT v, now() - i * interval '1 s', ST_SetSRID(ST_MakePoint(13, 52, 0), 4326), 1, 0, i
  FROM unnest(ARRAY['veh-a', 'Veh-b', 'veh-c']) WITH ORDINALITY AS t(v, i);
INSERT INTO trackd.vehicle_current_state (vehicle_id, last_updated, geom, ingest_batch_id,
  kafka_partition, kafka_offset)
SELECT v, now(), ST_SetSRID(ST_MakePoint(13, 52, 0), 4326), 1, 0, i
  FROM unnest(ARRAY['veh-a', 'Veh-b', 'veh-c']) WITH ORDINALITY AS t(v, i);
)SQL");
    const auto order = [&](const std::string& table) {
        return conn
            .query("SELECT string_agg(vehicle_id, ',' ORDER BY vehicle_id) FROM trackd." + table)
            .at(0, 0);
    };
    ASSERT_EQ(order("vehicle_current_state"), "veh-a,Veh-b,veh-c");
    ASSERT_EQ(order("vehicle_telemetry_history"), "veh-a,Veh-b,veh-c");
    // "relations whose vehicle_id is not in byte order / all with a vehicle_id" (tables,
    // partitions, indexes), and the storage of every index on it.
    const std::string collations =
        "SELECT count(*) FILTER (WHERE a.attcollation <> 'pg_catalog.\"C\"'::regcollation) || "
        "'/' || count(*) FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
        "WHERE c.relnamespace = 'trackd'::regnamespace AND a.attname = 'vehicle_id'";
    const std::string index_files =
        "SELECT string_agg(c.relname || ':' || c.relfilenode, ',' ORDER BY c.relname) "
        "FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid WHERE c.relkind = 'i' AND "
        "c.relnamespace = 'trackd'::regnamespace AND a.attname = 'vehicle_id'";
    // The history parent, its DEFAULT and 9 time partitions (yesterday to a week ahead), the
    // partitions' 10 btrees, the current state, the two geofence tables and an index of each: 27.
    ASSERT_EQ(conn.query(collations).at(0, 0), "27/27");
    const std::string files_before = conn.query(index_files).at(0, 0);

    apply_with_psql(db, 22, 22);
    EXPECT_EQ(conn.query(collations).at(0, 0), "0/27");
    const std::string files_after = conn.query(index_files).at(0, 0);
    EXPECT_NE(files_after, files_before) << "the indexes on vehicle_id are rebuilt";
    EXPECT_EQ(order("vehicle_current_state"), "Veh-b,veh-a,veh-c");
    EXPECT_EQ(order("vehicle_telemetry_history"), "Veh-b,veh-a,veh-c");

    conn.exec_script(
        "SET enable_seqscan = off; CREATE TEMP TABLE register (vehicle_id text PRIMARY KEY); "
        "INSERT INTO register VALUES ('veh-a'), ('VEH-C')");
    EXPECT_NE(explain(conn, "SELECT * FROM trackd.vehicle_current_state WHERE vehicle_id = 'veh-a'")
                  .find("vehicle_current_state_pkey"),
              std::string::npos);
    EXPECT_NE(explain(conn,
                      "SELECT * FROM trackd.vehicle_telemetry_history WHERE vehicle_id = 'veh-a' "
                      "AND recorded_at > now() - interval '1 hour'")
                  .find("_vehicle_time_idx"),
              std::string::npos);
    EXPECT_EQ(conn.query("SELECT string_agg(vehicle_id, ',') FROM register JOIN "
                         "trackd.vehicle_current_state USING (vehicle_id)")
                  .at(0, 0),
              "veh-a");

    conn.query("SELECT trackd.create_history_partitions('2099-01-01', '2099-01-02')");
    EXPECT_EQ(conn.query(collations).at(0, 0), "0/29");
    const std::string files_with_new = conn.query(index_files).at(0, 0);
    apply_with_psql(db, 22, 22);
    EXPECT_EQ(conn.query(index_files).at(0, 0), files_with_new) << "a second run rebuilds nothing";
}

}  // namespace
}  // namespace trackd::test
