// The Iceberg archive's side of the end-to-end tests: a fresh warehouse per test, the archive
// settings for trackd, and the read-back by independent readers (PyIceberg, DuckDB, fastavro)
// through tests/integration/archive_check.py in the project's .venv, with the assertions of
// "the table holds exactly the history, once". The same tests run against the JDBC catalog in
// the test's PostgreSQL and against Apache Iceberg's REST catalog server (one server for every
// test: each test's table is in a namespace of its own, in the test's own warehouse; a test that
// kills the server passes its own, support/own_services.hpp).
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "support/child_process.hpp"
#include "support/process.hpp"
#include "support/services.hpp"

namespace trackd::test {

namespace fs = std::filesystem;

inline std::map<std::string, std::string> parse_kv(const std::string& out) {
    std::map<std::string, std::string> kv;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);) {
        const auto eq = line.find('=');
        if (eq != std::string::npos && line.find(' ') > eq)
            kv[line.substr(0, eq)] = line.substr(eq + 1);
    }
    return kv;
}

inline std::string env_prefix(const std::map<std::string, std::string>& env) {
    std::string out = "env";
    for (const auto& [k, v] : env) out += " " + k + "=" + shell_quote(v);
    return out + " ";
}

enum class CatalogKind { jdbc, rest };

inline const char* to_string(CatalogKind k) { return k == CatalogKind::rest ? "rest" : "jdbc"; }

// The archive's settings for one test: a fresh warehouse, quick commits.
class ArchiveFixture {
  public:
    ArchiveFixture(const std::string& dsn, const std::string& tag,
                   CatalogKind kind = CatalogKind::jdbc, std::string rest_uri = iceberg_rest_uri())
        : dsn_(dsn),
          kind_(kind),
          rest_uri_(std::move(rest_uri)),
          warehouse_(::testing::TempDir() + "trackd-wh-" + tag + "-" + std::to_string(getpid())),
          namespace_(kind == CatalogKind::rest ? "t_" + tag + "_" + std::to_string(getpid()) + "_" +
                                                     std::to_string(time(nullptr))
                                               : "trackd") {
        fs::remove_all(warehouse_);
        fs::create_directories(warehouse_);
    }
    ~ArchiveFixture() {
        std::error_code ec;
        fs::remove_all(warehouse_, ec);
    }

    [[nodiscard]] std::string table_dir() const {
        return warehouse_ + "/" + namespace_ + "/vehicle_positions";
    }
    [[nodiscard]] CatalogKind kind() const { return kind_; }
    [[nodiscard]] const std::string& namespace_name() const { return namespace_; }

    [[nodiscard]] std::map<std::string, std::string> env(
        std::map<std::string, std::string> extra = {}) const {
        std::map<std::string, std::string> e = {{"TRACKD_PG_DSN", dsn_},
                                                {"TRACKD_ARCHIVE_WAREHOUSE", warehouse_},
                                                {"TRACKD_ARCHIVE_COMMIT_INTERVAL_S", "1"},
                                                {"TRACKD_ARCHIVE_POLL_INTERVAL_MS", "100"}};
        if (kind_ == CatalogKind::rest) {
            e["TRACKD_ARCHIVE_CATALOG_TYPE"] = "rest";
            e["TRACKD_ARCHIVE_REST_URI"] = rest_uri_;
            e["TRACKD_ARCHIVE_NAMESPACE"] = namespace_;
        }
        for (auto& [k, v] : extra) e[k] = v;
        return e;
    }

    CommandResult archive(const std::string& args,
                          const std::map<std::string, std::string>& extra = {}) const {
        return run_command(env_prefix(env(extra)) + trackd_binary() + " archive " + args);
    }

    std::unique_ptr<ChildProcess> start_archiver(const std::string& log,
                                                 std::map<std::string, std::string> extra = {}) {
        return std::make_unique<ChildProcess>(std::vector<std::string>{trackd_binary(), "archive"},
                                              env(std::move(extra)), log);
    }

    std::map<std::string, std::string> check(const std::string& what) const {
        const std::string py = std::string(TRACKD_SOURCE_DIR) + "/.venv/bin/python " +
                               TRACKD_SOURCE_DIR + "/tests/integration/archive_check.py ";
        std::string args = what == "avro" ? " --dir " + shell_quote(table_dir())
                                          : " --pg " + shell_quote(dsn_) + " --table " +
                                                namespace_ + ".vehicle_positions";
        if (kind_ == CatalogKind::rest && what != "avro") {
            args += " --rest " + shell_quote(rest_uri_);
        }
        const auto r = run_command(py + what + args);
        EXPECT_EQ(r.exit_code, 0) << r.output;
        return parse_kv(r.output);
    }

  private:
    std::string dsn_;
    CatalogKind kind_;
    std::string rest_uri_;  // the catalog's own address (not a front a test puts before it)
    std::string warehouse_;
    std::string namespace_;
};

// Every assertion of "the table holds exactly the history, once".
inline void expect_exact(const std::map<std::string, std::string>& c) {
    ASSERT_TRUE(c.count("pg_rows") && c.count("duckdb_rows")) << "archive_check.py failed";
    EXPECT_NE(c.at("pg_rows"), "0");
    EXPECT_EQ(c.at("iceberg_rows"), c.at("pg_rows"));
    EXPECT_EQ(c.at("iceberg_distinct"), c.at("pg_distinct"));
    EXPECT_EQ(c.at("iceberg_distinct_kafka"), c.at("pg_rows")) << "a row archived twice";
    EXPECT_EQ(c.at("missing"), "0");
    EXPECT_EQ(c.at("extra"), "0");
    EXPECT_EQ(c.at("iceberg_vehicle_rows"), c.at("pg_vehicle_rows"));
    EXPECT_EQ(c.at("summary_total_records"), c.at("pg_rows"));
    EXPECT_EQ(c.at("summary_archive_seq"), c.at("property_archive_seq"));
    EXPECT_EQ(c.at("kafka_offsets_match"), "1");
    EXPECT_EQ(c.at("duckdb_rows"), c.at("pg_rows"));
}

inline void expect_avro_ok(const std::map<std::string, std::string>& a) {
    ASSERT_TRUE(a.count("fields_without_id")) << "archive_check.py avro failed";
    EXPECT_EQ(a.at("fields_without_id"), "0");
    EXPECT_EQ(a.at("bad_metadata_keys"), "0");
    EXPECT_GE(std::stoi(a.at("manifest_lists")), 1);
    EXPECT_GE(std::stoi(a.at("manifests")), 1);
}

}  // namespace trackd::test
