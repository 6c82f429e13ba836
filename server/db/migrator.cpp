#include <algorithm>
#include <chrono>
#include <map>
#include <regex>
#include <thread>

#include <fmt/format.h>

#include "trackd/core/error.hpp"
#include "trackd/core/log.hpp"
#include "trackd/db/migrations.hpp"

#include "embedded_migrations.hpp"

namespace trackd::db {
namespace {

// Arbitrary but fixed: the key of the advisory lock that serialises migrations.
constexpr long long kMigrationLockKey = 0x747261636b640001LL;  // "trackd" + 1

std::vector<Migration> parse_embedded() {
    static const std::regex pattern(R"(V(\d{4})__([a-z0-9_]+)\.sql)");
    std::vector<Migration> out;
    for (const auto& f : embedded_migrations()) {
        std::cmatch m;
        if (!std::regex_match(f.name, m, pattern)) {
            throw core::StartupError(fmt::format(
                "migration file name '{}' does not match V<4 digits>__<name>.sql", f.name));
        }
        out.push_back({std::stoi(m[1].str()), m[2].str(), f.name, f.text});
    }
    std::sort(out.begin(), out.end(),
              [](const Migration& a, const Migration& b) { return a.version < b.version; });
    for (size_t i = 0; i < out.size(); ++i) {
        if (out[i].version != static_cast<int>(i) + 1) {
            throw core::StartupError(fmt::format(
                "migrations must be numbered 1, 2, 3, ... without gaps; found {}", out[i].file));
        }
    }
    return out;
}

bool schema_table_exists(Connection& conn) {
    return conn.query("SELECT to_regclass('trackd.schema_migrations') IS NOT NULL").at(0, 0) == "t";
}

struct Applied {
    std::string name;
    std::optional<std::string> checksum;
};

std::map<int, Applied> applied_migrations(Connection& conn) {
    std::map<int, Applied> out;
    if (!schema_table_exists(conn)) return out;
    auto r = conn.query("SELECT version, name, checksum FROM trackd.schema_migrations");
    for (int i = 0; i < r.rows(); ++i) {
        out[std::stoi(r.at(i, 0))] = Applied{r.at(i, 1), r.get(i, 2)};
    }
    return out;
}

// SHA-256 as PostgreSQL computes it, so that a DBA can compare with
// `SELECT encode(sha256(pg_read_binary_file(...)), 'hex')` or sha256sum.
std::string checksum(Connection& conn, const std::string& text) {
    return conn.query("SELECT encode(sha256(convert_to($1, 'UTF8')), 'hex')", {text}).at(0, 0);
}

// SQLSTATE undefined_object, and how often a file is tried when it gets one.
constexpr const char* kUndefinedObject = "42704";
constexpr int kAttempts = 3;
// SQLSTATE lock_not_available: a lock wait ran past lock_timeout.
constexpr const char* kLockNotAvailable = "55P03";

// The sessions that hold locks on trackd's tables in transactions older than `older_than_ms`:
// who a timed-out lock wait was most likely waiting for (the wait itself is over by now).
std::string lock_holders(Connection& conn, int older_than_ms) {
    try {
        const auto r = conn.query(
            "SELECT string_agg(format('pid %s (application %L, %s for %s s: %L)', a.pid, "
            "a.application_name, a.state, round(extract(epoch FROM now() - a.xact_start)), "
            "left(a.query, 60)), '; ' ORDER BY a.xact_start) "
            "FROM pg_stat_activity a WHERE a.pid <> pg_backend_pid() "
            "AND a.xact_start < now() - make_interval(secs => $1::int / 1000.0) "
            "AND EXISTS (SELECT 1 FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
            "WHERE l.pid = a.pid AND l.granted AND l.database = "
            "(SELECT oid FROM pg_database WHERE datname = current_database()) "
            "AND c.relnamespace = 'trackd'::regnamespace)",
            {std::to_string(older_than_ms)});
        return r.get(0, 0).value_or("none found (the holder has finished)");
    } catch (const DbError& e) {
        return std::string("not known (") + e.what() + ")";
    }
}

class AdvisoryLock {
  public:
    explicit AdvisoryLock(Connection& conn) : conn_(conn) {
        conn_.query("SELECT pg_advisory_lock($1)", {std::to_string(kMigrationLockKey)});
    }
    ~AdvisoryLock() {
        try {
            conn_.query("SELECT pg_advisory_unlock($1)", {std::to_string(kMigrationLockKey)});
        } catch (const DbError&) {
            // The lock is released with the session anyway.
        }
    }
    AdvisoryLock(const AdvisoryLock&) = delete;
    AdvisoryLock& operator=(const AdvisoryLock&) = delete;

  private:
    Connection& conn_;
};

}  // namespace

const std::vector<Migration>& known_migrations() {
    static const std::vector<Migration> all = parse_embedded();
    return all;
}

int expected_schema_version() { return known_migrations().back().version; }

int current_schema_version(Connection& conn) {
    if (!schema_table_exists(conn)) return 0;
    auto r = conn.query("SELECT coalesce(max(version), 0) FROM trackd.schema_migrations");
    return std::stoi(r.at(0, 0));
}

MigrateReport migrate(Connection& conn, const MigrateOptions& options) {
    AdvisoryLock lock(conn);
    MigrateReport report;
    report.version_before = current_schema_version(conn);
    if (report.version_before > expected_schema_version()) {
        throw core::StartupError(
            fmt::format("the database schema is at version {}, newer than this trackd knows ({}); "
                        "upgrade trackd",
                        report.version_before, expected_schema_version()));
    }
    auto applied = applied_migrations(conn);
    for (const auto& m : known_migrations()) {
        const std::string sum = checksum(conn, m.sql);
        auto it = applied.find(m.version);
        if (it != applied.end()) {
            if (!it->second.checksum) {
                // Applied by a DBA with psql: the file records itself without a checksum.
                conn.query("UPDATE trackd.schema_migrations SET checksum = $2 WHERE version = $1",
                           {std::to_string(m.version), sum});
            } else if (*it->second.checksum != sum) {
                throw core::StartupError(fmt::format(
                    "migration {} was changed after it was applied (checksum {} in the "
                    "database, {} now); restore the file, and put schema changes in a new "
                    "migration",
                    m.file, it->second.checksum->substr(0, 12), sum.substr(0, 12)));
            }
            continue;
        }
        for (int attempt = 1;; ++attempt) {
            try {
                conn.exec_script(
                    fmt::format("BEGIN; SET LOCAL lock_timeout = {}", options.lock_timeout_ms));
                conn.exec_script(m.sql);
                conn.query(
                    "INSERT INTO trackd.schema_migrations (version, name, checksum) "
                    "VALUES ($1, $2, $3) ON CONFLICT (version) DO UPDATE SET checksum = $3",
                    {std::to_string(m.version), m.name, sum});
                conn.exec_script("COMMIT");
                break;
            } catch (const DbError& e) {
                try {
                    conn.exec_script("ROLLBACK");
                } catch (const DbError&) {
                    // The connection is broken; the transaction is gone with it.
                }
                // The advisory lock is per database, the roles are the cluster's. When another
                // database on the same cluster creates the same role at the same moment, a
                // later statement of this file can fail with 42704 (role does not exist; seen
                // with V0006, Migrations.SideBySideOnAFreshClusterAllSucceed). In a new
                // transaction the role is there.
                if (e.sqlstate() == kUndefinedObject && attempt < kAttempts) {
                    core::log::warn(
                        "migration retried: an object it needs was being created "
                        "beside it",
                        {{"file", m.file}, {"error", e.what()}});
                    continue;
                }
                // A lock held past the timeout (a long transaction, a frozen session): the
                // file gives way, so that the table's other users do not queue behind it, and
                // is tried again.
                if (e.sqlstate() == kLockNotAvailable) {
                    const std::string holders = lock_holders(conn, options.lock_timeout_ms);
                    if (attempt < options.attempts) {
                        core::log::warn("migration waited past its lock timeout; trying again",
                                        {{"file", m.file},
                                         {"attempt", std::to_string(attempt)},
                                         {"lock_holders", holders}});
                        std::this_thread::sleep_for(
                            std::chrono::milliseconds(options.retry_delay_ms));
                        continue;
                    }
                    throw core::StartupError(fmt::format(
                        "migration {} failed: a lock it needs was held past {} ms in each of {} "
                        "tries (postgis.ddl_lock_timeout_ms); sessions holding locks on trackd's "
                        "tables: {}. End or commit them, then run `trackd migrate` again",
                        m.file, options.lock_timeout_ms, options.attempts, holders));
                }
                throw core::StartupError(fmt::format("migration {} failed: {}", m.file, e.what()));
            }
        }
        report.applied.push_back(m.file);
    }
    report.version_after = current_schema_version(conn);
    return report;
}

void check_schema(Connection& conn) {
    const int have = current_schema_version(conn);
    const int want = expected_schema_version();
    if (have == 0) {
        throw core::StartupError(
            "the database has no trackd schema; run `trackd migrate` (or apply "
            "sql/migrations/*.sql with psql) first");
    }
    if (have < want) {
        throw core::StartupError(fmt::format(
            "the database schema is at version {}, this trackd needs {}; run `trackd migrate`",
            have, want));
    }
    if (have > want) {
        throw core::StartupError(
            fmt::format("the database schema is at version {}, newer than this trackd knows ({}); "
                        "upgrade trackd",
                        have, want));
    }
}

}  // namespace trackd::db
