// Where an Iceberg table's current metadata file is recorded: the archive's catalog seam.
//
// Contract: load() reads the current pointer; commit() swaps it from `base` to `next` atomically
// and returns false, changing nothing, when `base` is no longer current (another writer won:
// refresh and retry). An implementation may also record `progress` (the archive's watermark as
// the database sees it) atomically with the swap, or after it, but never before. A commit whose
// outcome cannot be known (the connection broke after the request was sent) throws
// CommitStateUnknown: the caller reloads and compares the pointer with `next`.
// JdbcCatalog (the Iceberg JDBC catalog tables in PostgreSQL) is the implementation today; a REST
// catalog client would be another. Not thread-safe: one catalog object per thread.
#pragma once

#include <cstdint>
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
    virtual bool commit(const TableIdent& table, const std::string& base, const std::string& next,
                        const std::optional<CommitProgress>& progress) = 0;
};

// The Iceberg JDBC catalog (tables iceberg_tables and iceberg_namespace_properties, created by
// migration V0006) on `conn`, which the catalog uses but does not own.
std::unique_ptr<Catalog> make_jdbc_catalog(db::Connection& conn);

}  // namespace trackd::archive
