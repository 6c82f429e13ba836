// `trackd audit`'s arguments and report rendering, without services; and the exit codes of the
// binary for argument and connection errors.
#include <gtest/gtest.h>

#include "trackd/audit/audit.hpp"
#include "trackd/core/error.hpp"

#include "support/process.hpp"

namespace trackd::audit {
namespace {

TEST(AuditDuration, UnitsAndRejections) {
    EXPECT_EQ(parse_duration("90s"), 90);
    EXPECT_EQ(parse_duration("15m"), 900);
    EXPECT_EQ(parse_duration("1h"), 3600);
    EXPECT_EQ(parse_duration("7d"), 7 * 86400);
    EXPECT_EQ(parse_duration("2w"), 14 * 86400);
    for (const char* bad : {"", "h", "1", "0h", "-1h", "1.5h", "1 h", "h1", "1hh", "1y", "+1h",
                            "99999999999999999999d", "1000000w"}) {
        EXPECT_EQ(parse_duration(bad), std::nullopt) << bad;
    }
}

TEST(AuditOptions, Flags) {
    const auto d = parse_options({});
    EXPECT_EQ(d.since_s, std::nullopt);
    EXPECT_EQ(d.format, "text");
    EXPECT_EQ(d.limit, 20);
    const auto o = parse_options({"--since", "1h", "--format=json", "--limit", "5"});
    EXPECT_EQ(o.since_s, 3600);
    EXPECT_EQ(o.format, "json");
    EXPECT_EQ(o.limit, 5);
    EXPECT_EQ(parse_options({"--since=7d"}).since_s, 7 * 86400);
}

std::string error_key(const std::vector<std::string>& args) {
    try {
        parse_options(args);
    } catch (const core::ConfigError& e) {
        return e.key();
    }
    return "(no error)";
}

TEST(AuditOptions, ErrorsNameTheFlag) {
    EXPECT_EQ(error_key({"--since", "soon"}), "--since");
    EXPECT_EQ(error_key({"--since"}), "--since");
    EXPECT_EQ(error_key({"--since="}), "--since");
    EXPECT_EQ(error_key({"--format", "xml"}), "--format");
    EXPECT_EQ(error_key({"--limit", "0"}), "--limit");
    EXPECT_EQ(error_key({"--limit", "ten"}), "--limit");
    EXPECT_EQ(error_key({"--once"}), "--once");
    EXPECT_EQ(error_key({"extra"}), "extra");
}

Report sample() {
    Report r;
    r.database = "fleet";
    r.scope = {"positions", "trackd"};
    r.limit = 1;
    r.partitions = {{0, 100, 90, 8, 0}, {1, std::nullopt, 1, 0, 7}};
    r.duplicates = {{0, 17, 1, 1}};
    r.duplicates_total = 3;
    r.beyond = {{1, 7, 1, 0, std::nullopt}};
    r.beyond_total = 1;
    r.gaps_checked = true;
    r.gaps = {{0, 5, 6}};
    r.gap_ranges_total = 1;
    r.gap_offsets_total = 2;
    r.vehicles_checked = 10;
    r.state = {{"veh-\"1\"", "not_latest", RowRef{"2026-01-01T00:00:00.000000Z", 0, 3},
                RowRef{"2026-01-01T00:00:01.000000Z", 0, 4}}};
    r.state_total = 1;
    r.archive_checked = true;
    r.archive_tables = 1;
    return r;
}

TEST(AuditReport, TextListsEachViolationWithItsCoordinates) {
    const auto r = sample();
    EXPECT_EQ(r.violations(), 5);
    const auto text = to_text(r);
    EXPECT_NE(text.find("offsets: VIOLATION"), std::string::npos) << text;
    EXPECT_NE(text.find("3 offsets stored more than once:\n"
                        "    partition 0 offset 17: 1 history row, 1 dead letter\n"
                        "    and 2 more\n"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("partition 1 offset 7: 1 history row, 0 dead letters (no stored offset)"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("2 offsets below next_offset in neither table, in 1 range:\n"
                        "    partition 0 offsets 5-6\n"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("veh-\"1\": current state is not the latest history row: current "
                        "2026-01-01T00:00:00.000000Z partition 0 offset 3, latest "
                        "2026-01-01T00:00:01.000000Z partition 0 offset 4"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("archive: OK: 1 archive table not ahead"), std::string::npos) << text;
    EXPECT_NE(text.find("result: 5 violations\n"), std::string::npos) << text;
}

TEST(AuditReport, JsonEscapesAndCounts) {
    const auto json = to_json(sample());
    EXPECT_NE(json.find(R"("violations":5,)"), std::string::npos) << json;
    EXPECT_NE(json.find(R"("vehicle_id":"veh-\"1\"")"), std::string::npos) << json;
    EXPECT_NE(json.find(R"("next_offset":null)"), std::string::npos) << json;
    EXPECT_NE(json.find(R"("duplicates_total":3,)"), std::string::npos) << json;
}

TEST(AuditReport, CleanIsOk) {
    Report r;
    r.database = "fleet";
    r.gaps_checked = true;
    r.archive_checked = true;
    const auto text = to_text(r);
    EXPECT_EQ(r.violations(), 0);
    EXPECT_NE(text.find("offsets: OK"), std::string::npos) << text;
    EXPECT_NE(text.find("current state: OK"), std::string::npos) << text;
    EXPECT_NE(text.find("result: no violation\n"), std::string::npos) << text;
}

// The binary: argument errors exit 2 before any config or database is touched, with the flag
// named; so does a database that cannot be reached (1 would mean "violations found").
TEST(AuditCommand, BadSinceExitsTwoNamingTheFlag) {
    const auto r = test::run_command(test::trackd_binary() + " audit --since 5x");
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_EQ(r.output,
              "trackd: configuration error: --since: '5x' is not a duration: a positive whole "
              "number and one unit of s, m, h, d, w (e.g. 90m, 1h, 7d)\n");
    const auto missing = test::run_command(test::trackd_binary() + " audit --since");
    EXPECT_EQ(missing.exit_code, 2) << missing.output;
    EXPECT_EQ(missing.output, "trackd: configuration error: --since: needs a value\n");
    const auto unknown = test::run_command(test::trackd_binary() + " audit --fix");
    EXPECT_EQ(unknown.exit_code, 2) << unknown.output;
    EXPECT_NE(unknown.output.find("--fix"), std::string::npos) << unknown.output;
}

TEST(AuditCommand, UnreachableDatabaseExitsTwo) {
    const auto r = test::run_command(
        "env TRACKD_PG_DSN=postgresql://nobody@127.0.0.1:1/none TRACKD_PG_CONNECT_TIMEOUT_S=2 " +
        test::trackd_binary() + " audit");
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find("trackd: cannot connect to PostgreSQL"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace trackd::audit
