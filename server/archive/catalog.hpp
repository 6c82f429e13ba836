// Where an Iceberg table's current metadata file is recorded: the archive's catalog seam.
//
// Contract: load() reads the current pointer; commit() swaps it from `base` to `next` atomically
// and returns false, changing nothing, when `base` is no longer current (another writer won:
// refresh and retry). An implementation may also record `progress` (the archive's watermark as
// the database sees it) atomically with the swap, or after it, but never before. A commit whose
// outcome cannot be known (the connection broke, or any error came, after the request left)
// throws CommitStateUnknown and drops that connection: the caller learns the outcome with
// load_settled() (a new connection) and compares the pointer with `base` and `next`, and deletes
// nothing the new version references until it knows the swap did not happen.
// JdbcCatalog (the Iceberg JDBC catalog tables in PostgreSQL) is the implementation today; a REST
// catalog client would be another. Not thread-safe: one catalog object per thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

namespace trackd::db {
class Connection;
}

namespace trackd::archive {

struct TableIdent {
    std::string catalog;     // the catalog's name (JDBC: catalog_name)
    std::string namespace_;  // one level
    std::string name;
    [[nodiscard]] std::string dotted() const { return namespace_ + "." + name; }
};

// What the archive holds after a commit (mirrored into trackd.archive_progress).
struct CommitProgress {
    std::int64_t archived_seq = 0;
    std::optional<std::int64_t> max_ingest_batch_id;
    std::optional<std::int64_t> snapshot_id;
};

class CommitStateUnknown : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

class Catalog {
  public:
    virtual ~Catalog() = default;
    // The table's current metadata location, or nullopt when the catalog has no such table.
    virtual std::optional<std::string> load(const TableIdent& table) = 0;
    // Registers a new table (and its namespace); false when it exists already.
    virtual bool create(const TableIdent& table, const std::string& metadata_location) = 0;
    // Throws CommitStateUnknown when the outcome cannot be known (see above), db::DbError when
    // it is known that nothing changed.
    virtual bool commit(const TableIdent& table, const std::string& base, const std::string& next,
                        const std::optional<CommitProgress>& progress) = 0;
    // After CommitStateUnknown: the table's current metadata location once no commit to it is
    // still in flight (a lost commit can still be running on the server), read on a new
    // connection, never the one the commit was lost on. Throws (db::DbError) when that cannot be
    // learnt now: the database is away, or the lost commit has not finished yet.
    virtual std::optional<std::string> load_settled(const TableIdent& table) = 0;
};

// Opens a new connection to the catalog's database; may throw db::DbError.
using ConnectionFactory = std::function<std::unique_ptr<db::Connection>()>;

// The Iceberg JDBC catalog (tables iceberg_tables and iceberg_namespace_properties, created by
// migration V0006) on its own connection from `connect`, opened when first needed and replaced
// by a new one whenever it broke or a commit's outcome was lost on it.
std::unique_ptr<Catalog> make_jdbc_catalog(ConnectionFactory connect);

}  // namespace trackd::archive
