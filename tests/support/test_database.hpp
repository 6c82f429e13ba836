// A fresh PostgreSQL database per test, dropped afterwards, on the real local cluster.
#pragma once

#include <atomic>
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
        admin.exec_script("CREATE DATABASE " + name_);
        db::Connection conn(dsn(), "trackd tests");
        conn.exec_script("CREATE EXTENSION IF NOT EXISTS postgis");
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
    [[nodiscard]] std::string dsn() const {
        std::string admin = pg_admin_dsn();
        const auto slash = admin.rfind('/');
        const auto query = admin.find('?', slash);
        return admin.substr(0, slash + 1) + name_ +
               (query == std::string::npos ? "" : admin.substr(query));
    }

  private:
    std::string name_;
};

}  // namespace trackd::test
