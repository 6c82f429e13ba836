// A fresh PostgreSQL database per test, dropped afterwards, on the real local cluster.
#pragma once

#include <atomic>
#include <cctype>
#include <cstdint>
#include <ctime>
#include <functional>
#include <string>

#include <fmt/format.h>
#include <unistd.h>

#include "trackd/db/connection.hpp"
#include "trackd/db/migrations.hpp"

#include "support/services.hpp"

namespace trackd::test {

// What a test database starts with: PostGIS only, or PostGIS and trackd's schema as
// `trackd migrate` leaves it (a test of the migrations themselves starts from PostGIS only).
enum class Schema { postgis, migrated };

class TestDatabase {
  public:
    explicit TestDatabase(const std::string& tag, Schema schema = Schema::postgis)
        : name_(unique_name(tag)) {
        db::Connection admin(pg_admin_dsn(), "trackd tests");
        admin.exec_script("DROP DATABASE IF EXISTS " + name_);
        const auto from =
            schema == Schema::migrated ? migrated_template(admin) : postgis_template(admin);
        admin.exec_script("CREATE DATABASE " + name_ + " TEMPLATE " + from);
    }
    // A database whose text sorts as the ICU locale `icu_locale` does (the local cluster's
    // collation is C.UTF-8), with PostGIS only.
    TestDatabase(const std::string& tag, const std::string& icu_locale) : name_(unique_name(tag)) {
        db::Connection admin(pg_admin_dsn(), "trackd tests");
        admin.exec_script("DROP DATABASE IF EXISTS " + name_);
        admin.exec_script("CREATE DATABASE " + name_ +
                          " TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE '" + icu_locale +
                          "'");
        db::Connection(dsn(), "trackd tests").exec_script("CREATE EXTENSION postgis");
    }
    ~TestDatabase() {
        try {
            db::Connection admin(pg_admin_dsn(), "trackd tests");
            admin.exec_script("DROP DATABASE IF EXISTS " + name_ + " WITH (FORCE)");
        } catch (...) {  // NOLINT(bugprone-empty-catch): best effort in a destructor
        }
    }
    TestDatabase(const TestDatabase&) = delete;
    TestDatabase& operator=(const TestDatabase&) = delete;

    [[nodiscard]] const std::string& name() const { return name_; }
    // The admin DSN with this database's name in place of the last path element.
    [[nodiscard]] std::string dsn() const { return dsn_of(name_); }

  private:
    // trackd_t_<tag>_<pid>_<n>: unique among the tests of this process and of others beside it.
    static std::string unique_name(const std::string& tag) {
        static std::atomic<int> counter{0};
        return "trackd_t_" + tag + "_" + std::to_string(getpid()) + "_" + std::to_string(counter++);
    }

    // `CREATE EXTENSION postgis` runs thousands of statements, about half a second of the
    // server's CPU; so every test database is a copy of one that has PostGIS and nothing else,
    // made once per cluster and PostGIS version.
    static std::string postgis_template(db::Connection& admin) {
        std::string version = admin
                                  .query(
                                      "SELECT default_version FROM pg_available_extensions "
                                      "WHERE name = 'postgis'")
                                  .at(0, 0);
        for (char& c : version) {
            if (std::isalnum(static_cast<unsigned char>(c)) == 0) c = '_';
        }
        return made_once(
            admin, "trackd_t_template_postgis_" + version, {},
            [](db::Connection& draft) { draft.exec_script("CREATE EXTENSION postgis"); });
    }

    // Migrating takes the server most of a second more; a migrated test database is a copy of
    // one migrated with this build's migrations on this (UTC) day: the migrations make the
    // history's daily partitions around now(), so a copy has the partitions a fresh migration
    // would. Copies of other days or other migrations are dropped when a new one is made.
    static std::string migrated_template(db::Connection& admin) {
        std::uint64_t hash = 14695981039346656037ULL;  // FNV-1a of every migration's text
        for (const auto& m : db::known_migrations()) {
            for (const char c : m.sql) {
                hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
            }
        }
        const std::time_t now = std::time(nullptr);
        std::tm day{};
        gmtime_r(&now, &day);
        const std::string prefix = "trackd_t_template_migrated_";
        const auto name = prefix + fmt::format("{:016x}_{:04}{:02}{:02}", hash, day.tm_year + 1900,
                                               day.tm_mon + 1, day.tm_mday);
        const auto from = postgis_template(admin);
        return made_once(
            admin, name, from, [](db::Connection& draft) { db::migrate(draft); }, prefix);
    }

    // Database `name`, made (if it is not there yet) as a copy of `from` (or empty) changed by
    // `make`, under an advisory lock: tests run side by side. It is made under another name and
    // renamed when complete, so that a test killed meanwhile leaves no half-made template.
    // Other databases whose name starts with `stale_prefix` are dropped then.
    static std::string made_once(db::Connection& admin, const std::string& name,
                                 const std::string& from,
                                 const std::function<void(db::Connection&)>& make,
                                 const std::string& stale_prefix = {}) {
        const auto exists = [&] {
            return admin.query("SELECT count(*) FROM pg_database WHERE datname = $1", {name})
                       .at(0, 0) == "1";
        };
        if (exists()) return name;
        admin.exec_script("SELECT pg_advisory_lock(hashtext('trackd tests template'))");
        if (!exists()) {
            const std::string draft = name + "_draft";  // left by a test killed while making it
            admin.exec_script("DROP DATABASE IF EXISTS " + draft + " WITH (FORCE)");
            admin.exec_script("CREATE DATABASE " + draft +
                              (from.empty() ? std::string() : " TEMPLATE " + from));
            {
                db::Connection conn(dsn_of(draft), "trackd tests");
                make(conn);
            }
            if (!stale_prefix.empty()) {
                const auto stale = admin.query(
                    "SELECT datname FROM pg_database WHERE starts_with(datname, $1) "
                    "AND datname <> $2",
                    {stale_prefix, draft});
                for (int i = 0; i < stale.rows(); ++i) {
                    admin.exec_script("DROP DATABASE IF EXISTS " + stale.at(i, 0) +
                                      " WITH (FORCE)");
                }
            }
            // Waits (up to 5 s) for the session above to end.
            admin.exec_script("ALTER DATABASE " + draft + " RENAME TO " + name);
        }
        admin.exec_script("SELECT pg_advisory_unlock(hashtext('trackd tests template'))");
        return name;
    }

    // The admin DSN with `db` in place of the last path element.
    static std::string dsn_of(const std::string& db) {
        std::string admin = pg_admin_dsn();
        const auto slash = admin.rfind('/');
        const auto query = admin.find('?', slash);
        return admin.substr(0, slash + 1) + db +
               (query == std::string::npos ? "" : admin.substr(query));
    }

    std::string name_;
};

// The plan PostgreSQL chooses for `query` on `conn` (EXPLAIN, without running it), one line a
// node: what a test searches for the index a query reads.
inline std::string explain(db::Connection& conn, const std::string& query) {
    const auto plan = conn.query("EXPLAIN " + query);
    std::string text;
    for (int i = 0; i < plan.rows(); ++i) text += plan.at(i, 0) + "\n";
    return text;
}

}  // namespace trackd::test
