// A fresh PostgreSQL database per test, dropped afterwards, on the real local cluster.
#pragma once

#include <atomic>
#include <cctype>
#include <string>

#include <unistd.h>

#include "trackd/db/connection.hpp"

#include "support/services.hpp"

namespace trackd::test {

class TestDatabase {
  public:
    explicit TestDatabase(const std::string& tag) {
        static std::atomic<int> counter{0};
        name_ =
            "trackd_t_" + tag + "_" + std::to_string(getpid()) + "_" + std::to_string(counter++);
        db::Connection admin(pg_admin_dsn(), "trackd tests");
        admin.exec_script("DROP DATABASE IF EXISTS " + name_);
        admin.exec_script("CREATE DATABASE " + name_ + " TEMPLATE " + postgis_template(admin));
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
    // `CREATE EXTENSION postgis` runs thousands of statements, about half a second of the
    // server's CPU; so every test database is a copy of one that has PostGIS and nothing else,
    // made once per cluster and PostGIS version (under an advisory lock: tests run side by side).
    static std::string postgis_template(db::Connection& admin) {
        std::string version = admin
                                  .query(
                                      "SELECT default_version FROM pg_available_extensions "
                                      "WHERE name = 'postgis'")
                                  .at(0, 0);
        for (char& c : version) {
            if (std::isalnum(static_cast<unsigned char>(c)) == 0) c = '_';
        }
        const std::string name = "trackd_t_template_postgis_" + version;
        const auto exists = [&] {
            return admin.query("SELECT count(*) FROM pg_database WHERE datname = $1", {name})
                       .at(0, 0) == "1";
        };
        if (exists()) return name;
        admin.exec_script("SELECT pg_advisory_lock(hashtext('trackd tests postgis template'))");
        if (!exists()) {
            const std::string draft = name + "_draft";  // left by a test killed while making it
            admin.exec_script("DROP DATABASE IF EXISTS " + draft + " WITH (FORCE)");
            admin.exec_script("CREATE DATABASE " + draft);
            {
                db::Connection conn(dsn_of(draft), "trackd tests");
                conn.exec_script("CREATE EXTENSION postgis");
            }
            // Waits (up to 5 s) for the session above to end.
            admin.exec_script("ALTER DATABASE " + draft + " RENAME TO " + name);
        }
        admin.exec_script("SELECT pg_advisory_unlock(hashtext('trackd tests postgis template'))");
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

}  // namespace trackd::test
