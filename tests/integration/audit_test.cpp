// `trackd audit` against a database a real ingest filled: clean after the exact accounting,
// then each planted violation reported with its exact coordinates, and --since windows.
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/ingest_harness.hpp"

namespace trackd::test {
namespace {

constexpr int kPartitions = 2;
constexpr int kVehicles = 200;
constexpr int kMessages = 5000;

struct AuditRun {
    int exit_code = -1;
    std::string output;  // stdout only
    std::string errors;  // stderr
};

AuditRun run_audit(const IngestHarness& h, const std::string& flags,
                   std::map<std::string, std::string> extra_env = {}) {
    auto env = h.trackd_env();
    for (auto& [k, v] : extra_env) env[k] = v;
    std::string command = "(env";
    for (const auto& [k, v] : env) command += " " + k + "=" + shell_quote(v);
    const std::string errors = h.dir() + "/audit.err";
    command += " " + trackd_binary() + " audit " + flags + " 2>" + shell_quote(errors) + ")";
    const auto r = run_command(command);
    return {r.exit_code, r.output, IngestHarness::read_file(errors)};
}

nlohmann::json audit_json(const IngestHarness& h, const std::string& flags, int expected_exit) {
    const auto r = run_audit(h, "--format json --limit 1000 " + flags);
    EXPECT_EQ(r.exit_code, expected_exit) << r.output << r.errors;
    return nlohmann::json::parse(r.output);
}

using Offsets = std::set<std::tuple<int, std::int64_t, std::int64_t, std::int64_t>>;

// (partition, offset, history rows, dead letters) of each duplicate.
Offsets duplicates(const nlohmann::json& j) {
    Offsets out;
    for (const auto& d : j["offsets"]["duplicates"]) {
        out.emplace(d["partition"].get<int>(), d["offset"].get<std::int64_t>(),
                    d["history_rows"].get<std::int64_t>(), d["dead_letters"].get<std::int64_t>());
    }
    EXPECT_EQ(j["offsets"]["duplicates_total"].get<size_t>(), out.size());
    return out;
}

struct Coords {
    int partition = 0;
    std::int64_t offset = 0;
};

Coords coords(db::Connection& conn, const std::string& sql) {
    auto r = conn.query(sql);
    EXPECT_EQ(r.rows(), 1) << sql;
    return {std::stoi(r.at(0, 0)), std::stoll(r.at(0, 1))};
}

TEST(Audit, CleanIngestThenPlantedViolations) {
    IngestHarness h("audit", kPartitions);
    h.produce(kVehicles, kMessages);
    const auto manifest = load_manifest(h.manifest_path());
    ASSERT_EQ(manifest.size(), static_cast<size_t>(kMessages));
    {
        auto trackd = h.start_trackd();
        ASSERT_TRUE(h.wait_drained(kMessages, std::chrono::seconds(300)))
            << IngestHarness::read_file(h.log_path());
        trackd->kill(SIGTERM);
        ASSERT_TRUE(trackd->wait_for(std::chrono::seconds(15)));
        ASSERT_EQ(trackd->exit_code(), 0) << IngestHarness::read_file(h.log_path());
    }
    // The harness's exact accounting first: the audit must agree with it.
    h.check_accounting(manifest);
    ASSERT_FALSE(::testing::Test::HasFailure());

    // Clean: exit 0, every message accounted for, no gap (the fleet's producer writes no
    // transaction markers), every vehicle checked.
    const auto clean_text = run_audit(h, "");
    EXPECT_EQ(clean_text.exit_code, 0) << clean_text.output << clean_text.errors;
    EXPECT_NE(clean_text.output.find("result: no violation\n"), std::string::npos)
        << clean_text.output;
    EXPECT_EQ(clean_text.output.find("VIOLATION"), std::string::npos) << clean_text.output;
    const auto clean = audit_json(h, "", 0);
    EXPECT_EQ(clean["violations"], 0);
    std::int64_t stored = 0;
    for (const auto& p : clean["offsets"]["partitions"]) {
        stored += p["history_rows"].get<std::int64_t>() + p["dead_letters"].get<std::int64_t>();
        EXPECT_EQ(p["lowest_offset"], 0);
    }
    EXPECT_EQ(clean["offsets"]["partitions"].size(), static_cast<size_t>(kPartitions));
    EXPECT_EQ(stored, kMessages);
    EXPECT_EQ(clean["offsets"]["gaps_checked"], true);
    EXPECT_EQ(clean["offsets"]["gap_ranges_total"], 0);
    EXPECT_EQ(clean["current_state"]["vehicles_checked"], kVehicles);
    EXPECT_EQ(clean["archive"]["checked"], true);
    EXPECT_EQ(audit_json(h, "--since 1h", 0)["violations"], 0);

    // The wrong group is a configuration error (2), not a violation of every row (1).
    const auto wrong = run_audit(h, "", {{"TRACKD_KAFKA_GROUP", "not-the-group"}});
    EXPECT_EQ(wrong.exit_code, 2) << wrong.output << wrong.errors;
    EXPECT_NE(wrong.errors.find("trackd: configuration error: kafka.topic/kafka.group: "),
              std::string::npos)
        << wrong.errors;

    db::Connection conn(h.db().dsn(), "test");
    const std::string history = "trackd.vehicle_telemetry_history";
    // (a) A history row stored twice: the first offset of partition 0.
    const auto a = coords(conn, "SELECT kafka_partition, kafka_offset FROM " + history +
                                    " WHERE kafka_partition = 0 ORDER BY kafka_offset LIMIT 1");
    conn.query("INSERT INTO " + history + " SELECT * FROM " + history +
                   " WHERE kafka_partition = $1 AND kafka_offset = $2",
               {std::to_string(a.partition), std::to_string(a.offset)});
    // (b) A dead letter for an offset history holds: the first offset of partition 1.
    const auto b = coords(conn, "SELECT kafka_partition, kafka_offset FROM " + history +
                                    " WHERE kafka_partition = 1 ORDER BY kafka_offset LIMIT 1");
    conn.query(
        "INSERT INTO trackd.dead_letters (topic, kafka_partition, kafka_offset, reason_code, "
        "detail, ingest_batch_id) VALUES ($1, $2, $3, 'planted', 'audit test', 0)",
        {h.topic(), std::to_string(b.partition), std::to_string(b.offset)});
    // (c) A stale current state: the first vehicle's row set back to its second-latest position.
    auto c = conn.query(
        "WITH v AS (SELECT vehicle_id FROM " + history +
        " GROUP BY vehicle_id HAVING count(*) >= 2 ORDER BY vehicle_id LIMIT 1), "
        "ranked AS (SELECT h.*, row_number() OVER (ORDER BY recorded_at DESC, kafka_offset DESC) "
        "AS n FROM " +
        history +
        " h JOIN v USING (vehicle_id)), "
        "older AS (SELECT * FROM ranked WHERE n = 2), newest AS (SELECT * FROM ranked WHERE n = "
        "1) "
        "UPDATE trackd.vehicle_current_state s SET last_updated = o.recorded_at, geom = o.geom, "
        "kafka_partition = o.kafka_partition, kafka_offset = o.kafka_offset "
        "FROM older o, newest l WHERE s.vehicle_id = o.vehicle_id "
        "RETURNING s.vehicle_id, o.kafka_partition, o.kafka_offset, l.kafka_partition, "
        "l.kafka_offset");
    ASSERT_EQ(c.rows(), 1);
    const std::string stale_vehicle = c.at(0, 0);

    const auto planted = audit_json(h, "", 1);
    EXPECT_EQ(planted["violations"], 3);
    const Offsets expected{{a.partition, a.offset, 2, 0}, {b.partition, b.offset, 1, 1}};
    EXPECT_EQ(duplicates(planted), expected);
    EXPECT_EQ(planted["offsets"]["beyond_next_offset_total"], 0);
    ASSERT_EQ(planted["current_state"]["violations"].size(), 1U);
    const auto& s = planted["current_state"]["violations"][0];
    EXPECT_EQ(s["vehicle_id"], stale_vehicle);
    EXPECT_EQ(s["problem"], "not_latest");
    EXPECT_EQ(s["current"]["partition"], std::stoi(c.at(0, 1)));
    EXPECT_EQ(s["current"]["offset"], std::stoll(c.at(0, 2)));
    EXPECT_EQ(s["latest"]["partition"], std::stoi(c.at(0, 3)));
    EXPECT_EQ(s["latest"]["offset"], std::stoll(c.at(0, 4)));
    EXPECT_TRUE(planted["archive"]["violations"].empty());

    // The same in the text report, each with its coordinates.
    const auto text = run_audit(h, "");
    EXPECT_EQ(text.exit_code, 1) << text.output << text.errors;
    for (const auto& line :
         {fmt::format("    partition {} offset {}: 2 history rows, 0 dead letters\n", a.partition,
                      a.offset),
          fmt::format("    partition {} offset {}: 1 history row, 1 dead letter\n", b.partition,
                      b.offset),
          fmt::format("    {}: current state is not the latest history row: current ",
                      stale_vehicle),
          std::string("result: 3 violations\n")}) {
        EXPECT_NE(text.output.find(line), std::string::npos) << line << "\n" << text.output;
    }

    // (d) An old duplicate: a copy of the first offset of partition 1 after (b)'s, ten days
    // back in vehicle time. The full audit and a 30-day window see it; a 1-day window does not,
    // and still sees (a), (b) and (c), whose rows are recent.
    const auto d = coords(conn, "SELECT kafka_partition, kafka_offset FROM " + history +
                                    " WHERE kafka_partition = 1 AND kafka_offset > " +
                                    std::to_string(b.offset) + " ORDER BY kafka_offset LIMIT 1");
    conn.query("INSERT INTO " + history +
                   " SELECT vehicle_id, recorded_at - interval '10 days', geom, speed_kmh, "
                   "heading_deg, accuracy_m, attributes, ingest_batch_id, kafka_partition, "
                   "kafka_offset FROM " +
                   history + " WHERE kafka_partition = $1 AND kafka_offset = $2",
               {std::to_string(d.partition), std::to_string(d.offset)});
    Offsets with_old = expected;
    with_old.emplace(d.partition, d.offset, 2, 0);

    EXPECT_EQ(duplicates(audit_json(h, "", 1)), with_old);
    EXPECT_EQ(duplicates(audit_json(h, "--since 30d", 1)), with_old);
    const auto day = audit_json(h, "--since 1d", 1);
    EXPECT_EQ(duplicates(day), expected) << "the 10-day-old copy is outside a 1-day window";
    EXPECT_EQ(day["violations"], 3);
    EXPECT_EQ(day["since_s"], 86400);
    EXPECT_EQ(day["offsets"]["gaps_checked"], false);
    ASSERT_EQ(day["current_state"]["violations"].size(), 1U);
    EXPECT_EQ(day["current_state"]["violations"][0]["vehicle_id"], stale_vehicle);

    // (e) Archive progress ahead of the history: no batch has been stamped, so a progress row
    // claiming archive_seq 5 and a batch id beyond every batch is two violations.
    conn.query(
        "INSERT INTO trackd.archive_progress (catalog_name, table_namespace, table_name, "
        "archived_seq, max_ingest_batch_id, metadata_location) "
        "VALUES ('trackd', 'trackd', 'planted', 5, "
        "(SELECT max(ingest_batch_id) + 1 FROM trackd.ingest_batches), 'file:///nowhere')");
    const auto archive = audit_json(h, "--since 1d", 1);
    EXPECT_EQ(archive["violations"], 5);
    ASSERT_EQ(archive["archive"]["violations"].size(), 2U);
    EXPECT_EQ(archive["archive"]["violations"][0]["table"], "trackd.trackd.planted");

    // (f) The same after the ledger is pruned (V0012): every batch stamped as the archiver does,
    // the planted table claims exactly what was stamped (no archive violation), and its rows
    // go from trackd.ingest_batches into the watermark; the audit reads both. Claiming one
    // stamp and one batch more than there are is again two violations.
    conn.query(
        "UPDATE trackd.ingest_batches b SET archive_seq = nextval('trackd.archive_seq') FROM "
        "(SELECT ingest_batch_id FROM trackd.ingest_batches ORDER BY ingest_batch_id) s "
        "WHERE b.ingest_batch_id = s.ingest_batch_id");
    conn.query(
        "UPDATE trackd.archive_progress SET archived_seq = (SELECT max(archive_seq) FROM "
        "trackd.ingest_batches), max_ingest_batch_id = (SELECT max(ingest_batch_id) FROM "
        "trackd.ingest_batches) WHERE table_name = 'planted'");
    const auto batches = conn.query("SELECT count(*) FROM trackd.ingest_batches").at(0, 0);
    EXPECT_EQ(audit_json(h, "--since 1d", 1)["violations"], 3) << "none of the archive";
    EXPECT_EQ(conn.query("SELECT trackd.prune_ingest_batches()").at(0, 0), batches);
    EXPECT_EQ(conn.query("SELECT count(*) FROM trackd.ingest_batches").at(0, 0), "0");
    const auto pruned = audit_json(h, "--since 1d", 1);
    EXPECT_EQ(pruned["violations"], 3) << pruned.dump();
    EXPECT_EQ(pruned["archive"]["violations"].size(), 0U) << pruned.dump();
    conn.query(
        "UPDATE trackd.archive_progress SET archived_seq = archived_seq + 1, max_ingest_batch_id "
        "= max_ingest_batch_id + 1 WHERE table_name = 'planted'");
    const auto ahead = audit_json(h, "--since 1d", 1);
    EXPECT_EQ(ahead["violations"], 5);
    ASSERT_EQ(ahead["archive"]["violations"].size(), 2U) << ahead.dump();
    EXPECT_EQ(ahead["archive"]["violations"][1]["table"], "trackd.trackd.planted");
}

}  // namespace
}  // namespace trackd::test
