// The Iceberg archive's side of the end-to-end tests: a fresh warehouse per test, the archive
// settings for trackd, and the read-back by independent readers (PyIceberg, DuckDB, fastavro)
// through tests/integration/archive_check.py in the project's .venv, with the assertions of
// "the table holds exactly the history, once". The same tests run against the JDBC catalog in
// the test's PostgreSQL and against Apache Iceberg's REST catalog server (one server for every
// test: each test's table is in a namespace of its own, in the test's own warehouse; a test that
// kills the server passes its own, support/own_services.hpp), with the warehouse in a local
// folder or in a bucket of its own on the S3 server (moto, scripts/s3.sh).
#pragma once

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

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
enum class StorageKind { local, s3 };

inline const char* to_string(CatalogKind k) { return k == CatalogKind::rest ? "rest" : "jdbc"; }

// The key pair trackd, the REST catalog server (scripts/iceberg-rest.sh) and the readers
// (archive_check.py) use with the test S3 server (moto accepts any; a MinIO started with it as its
// root user checks it).
inline const char* kS3KeyId = "trackd-test";
inline const char* kS3Secret = "trackd-test-secret";

// One archive test's setup: the catalog and where the warehouse is.
struct ArchiveSetup {
    CatalogKind catalog = CatalogKind::jdbc;
    StorageKind storage = StorageKind::local;
};

// Creates a bucket on the test S3 server (a path-style PUT, signed with the tests' key pair).
inline std::string make_bucket(const std::string& name) {
    const auto r = run_command(
        "curl -sS -f -X PUT -o /dev/null --aws-sigv4 aws:amz:us-east-1:s3 "
        "--user " +
        shell_quote(std::string(kS3KeyId) + ":" + kS3Secret) + " " +
        shell_quote(s3_endpoint() + "/" + name));
    EXPECT_EQ(r.exit_code, 0) << "creating bucket " << name << " on " << s3_endpoint() << ": "
                              << r.output;
    return name;
}

// The archive's settings for one test: a fresh warehouse, quick commits.
class ArchiveFixture {
  public:
    ArchiveFixture(const std::string& dsn, const std::string& tag,
                   CatalogKind kind = CatalogKind::jdbc, std::string rest_uri = iceberg_rest_uri())
        : ArchiveFixture(dsn, tag, ArchiveSetup{kind, StorageKind::local}, std::move(rest_uri)) {}
    ArchiveFixture(const std::string& dsn, const std::string& tag, ArchiveSetup setup,
                   std::string rest_uri = iceberg_rest_uri())
        : dsn_(dsn),
          kind_(setup.catalog),
          rest_uri_(std::move(rest_uri)),
          storage_(setup.storage),
          unique_(std::to_string(getpid()) + "-" + std::to_string(time(nullptr))),
          warehouse_(::testing::TempDir() + "trackd-wh-" + tag + "-" + std::to_string(getpid())),
          namespace_(kind_ == CatalogKind::rest ? "t_" + tag + "_" + std::to_string(getpid()) +
                                                      "_" + std::to_string(time(nullptr))
                                                : "trackd") {
        fs::remove_all(warehouse_);
        fs::create_directories(warehouse_);
        if (storage_ == StorageKind::s3) {
            // A bucket of its own per test (moto keeps them in memory until it stops).
            std::string name = "t-" + tag + "-" + unique_;
            std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) {
                return std::isalnum(c) != 0 ? static_cast<char>(std::tolower(c)) : '-';
            });
            bucket_ = make_bucket(name.substr(0, 63));
        }
    }
    ~ArchiveFixture() {
        std::error_code ec;
        fs::remove_all(warehouse_, ec);
    }

    // The warehouse trackd is given: a local folder, or s3://<bucket>/wh.
    [[nodiscard]] std::string warehouse() const {
        return storage_ == StorageKind::s3 ? "s3://" + bucket_ + "/wh" : warehouse_;
    }
    [[nodiscard]] std::string table_dir() const {
        return warehouse() + "/" + namespace_ + "/vehicle_positions";
    }
    [[nodiscard]] StorageKind storage() const { return storage_; }
    [[nodiscard]] const std::string& bucket() const { return bucket_; }
    [[nodiscard]] CatalogKind kind() const { return kind_; }
    [[nodiscard]] const std::string& namespace_name() const { return namespace_; }

    [[nodiscard]] std::map<std::string, std::string> env(
        std::map<std::string, std::string> extra = {}) const {
        std::map<std::string, std::string> e = {{"TRACKD_PG_DSN", dsn_},
                                                {"TRACKD_ARCHIVE_WAREHOUSE", warehouse()},
                                                {"TRACKD_ARCHIVE_COMMIT_INTERVAL_S", "1"},
                                                {"TRACKD_ARCHIVE_POLL_INTERVAL_MS", "100"}};
        // The tests give trackd a key pair: nothing may reach for the EC2 instance metadata
        // service (169.254.169.254) either.
        if (storage_ == StorageKind::s3) e["AWS_EC2_METADATA_DISABLED"] = "true";
        if (storage_ == StorageKind::s3 && kind_ == CatalogKind::rest) {
            // Both routes to the S3 settings run: the AWS environment here...
            e["AWS_ENDPOINT_URL"] = s3_endpoint();
            e["AWS_REGION"] = "us-east-1";
            e["AWS_ACCESS_KEY_ID"] = kS3KeyId;
            e["AWS_SECRET_ACCESS_KEY"] = kS3Secret;
            e["TRACKD_ARCHIVE_S3_PATH_STYLE"] = "true";
        } else if (storage_ == StorageKind::s3) {
            // ...and archive.s3_* with the JDBC catalog.
            e["TRACKD_ARCHIVE_S3_ENDPOINT"] = s3_endpoint();
            e["TRACKD_ARCHIVE_S3_PATH_STYLE"] = "true";
            e["TRACKD_ARCHIVE_S3_ACCESS_KEY_ID"] = kS3KeyId;
            e["TRACKD_ARCHIVE_S3_SECRET_ACCESS_KEY"] = kS3Secret;
        }
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

    // archive_check.py `what` on this test's table; `extra` replaces the default arguments
    // (ls --dir URI, put --uri URI).
    std::map<std::string, std::string> check(const std::string& what,
                                             const std::string& extra = {}) const {
        std::string args = !extra.empty()   ? " " + extra
                           : what == "avro" ? " --dir " + shell_quote(table_dir())
                                            : " --pg " + shell_quote(dsn_) + " --table " +
                                                  namespace_ + ".vehicle_positions";
        if (kind_ == CatalogKind::rest && what != "avro" && extra.empty()) {
            args += " --rest " + shell_quote(rest_uri_);
        }
        const auto r = run_checker(what + args);
        EXPECT_EQ(r.exit_code, 0) << r.output;
        return parse_kv(r.output);
    }

    // The files under the table's location now (local folder or bucket), by URI.
    [[nodiscard]] std::set<std::string> stored_files(const std::string& under = {}) const {
        std::set<std::string> out;
        const std::string dir = table_dir() + under;
        const auto r = run_checker("ls --dir " + shell_quote(dir));
        EXPECT_EQ(r.exit_code, 0) << r.output;
        std::istringstream in(r.output);
        for (std::string line; std::getline(in, line);) {
            if (line.rfind("file=", 0) == 0) out.insert(line.substr(5));
        }
        return out;
    }

  private:
    // archive_check.py with `args` (quoted for the shell), told where the S3 server is: through
    // the server scripts/test.sh starts for the suite (TEST_ARCHIVE_CHECK_SOCKET), which has
    // the readers imported, or else in the project's .venv as a process of its own.
    [[nodiscard]] CommandResult run_checker(const std::string& args) const {
        std::string line;
        if (storage_ == StorageKind::s3) line += "--s3 " + shell_quote(s3_endpoint()) + " ";
        line += args;
        const char* server = std::getenv("TEST_ARCHIVE_CHECK_SOCKET");
        if (server != nullptr && *server != '\0') return ask_check_server(server, line);
        return run_command(std::string(TRACKD_SOURCE_DIR) + "/.venv/bin/python " +
                           TRACKD_SOURCE_DIR + "/tests/integration/archive_check.py " + line);
    }

    // One request to `archive_check.py serve`: the arguments' line; the answer is the output,
    // a NUL byte and the exit status (none: the check died).
    static CommandResult ask_check_server(const std::string& path, const std::string& line) {
        CommandResult r;
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || path.size() >= sizeof addr.sun_path) {
            r.output = "archive_check.py server " + path + ": no socket";
            if (fd >= 0) ::close(fd);
            return r;
        }
        std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
        const std::string request = line + "\n";
        bool sent = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
        for (std::size_t at = 0; sent && at < request.size();) {
            const auto n = ::send(fd, request.data() + at, request.size() - at, MSG_NOSIGNAL);
            sent = n > 0;
            if (sent) at += static_cast<std::size_t>(n);
        }
        if (!sent) {
            r.output = "archive_check.py server " + path + ": " + std::strerror(errno);
            ::close(fd);
            return r;
        }
        std::array<char, 65536> buf{};
        for (;;) {
            const ssize_t n = ::read(fd, buf.data(), buf.size());
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) break;
            r.output.append(buf.data(), static_cast<std::size_t>(n));
        }
        ::close(fd);
        const auto nul = r.output.rfind('\0');
        if (nul == std::string::npos) {
            r.output += "\n(archive_check.py server: the check ended without an exit status)";
            return r;
        }
        r.exit_code = std::atoi(r.output.c_str() + nul + 1);
        r.output.resize(nul);
        return r;
    }

    std::string dsn_;
    CatalogKind kind_;
    std::string rest_uri_;  // the catalog's own address (not a front a test puts before it)
    StorageKind storage_;
    std::string unique_;
    std::string bucket_;
    std::string warehouse_;  // a local folder (also made, unused, for S3 tests)
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
