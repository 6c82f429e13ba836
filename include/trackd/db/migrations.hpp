// Schema migrations: the numbered SQL files of sql/migrations, compiled into trackd.
//
// Contract: migrate() applies the missing files in order, each in its own transaction, under a
// PostgreSQL advisory lock (so two instances starting together do not race), recording each
// file's SHA-256 in trackd.schema_migrations. A file applied earlier whose text has changed is
// an error, as is a database newer than this build. check_schema() is what `trackd run` calls:
// it throws core::StartupError saying what to run when the schema is not exactly this build's.
//
// Lock waits are bounded: every lock a file waits for, it waits at most lock_timeout_ms for
// (while a migration waits for a lock, every later request for the table queues behind it:
// ingest's COPY, the API's reads). A file that times out is rolled back and tried again after
// retry_delay_ms, up to `attempts` times, each logged with the sessions that hold locks on
// trackd's tables in transactions older than the timeout; then migrate() throws naming them.
#pragma once

#include <string>
#include <vector>

#include "trackd/db/connection.hpp"

namespace trackd::db {

struct Migration {
    int version = 0;
    std::string name;  // "create_schema"
    std::string file;  // "V0001__create_schema.sql"
    std::string sql;
};

// Every migration this build knows, ordered by version.
const std::vector<Migration>& known_migrations();

// The version the newest known migration brings the schema to.
int expected_schema_version();

// The highest applied version, or 0 when trackd's schema does not exist yet.
int current_schema_version(Connection& conn);

struct MigrateReport {
    int version_before = 0;
    int version_after = 0;
    std::vector<std::string> applied;  // file names, in order
};

struct MigrateOptions {
    int lock_timeout_ms = 1000;  // `trackd migrate`: postgis.ddl_lock_timeout_ms
    int attempts = 10;
    int retry_delay_ms = 1000;
};

MigrateReport migrate(Connection& conn, const MigrateOptions& options = {});

void check_schema(Connection& conn);

}  // namespace trackd::db
