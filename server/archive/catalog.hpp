// Where an Iceberg table's current metadata file is recorded: the archive's catalog seam.
//
// Contract: load() reads the current pointer; commit() moves it from `base` to the next version
// atomically and returns the new metadata location, or nullopt, changing nothing, when `base` is
// no longer current (another writer won: refresh and retry). Two kinds of catalog: one that only
// swaps a pointer to a metadata file trackd wrote (JDBC: writes_metadata() is false, the change
// carries that file's location), and one that applies the change itself and writes the new
// metadata file (REST: the change is sent as requirements and updates). An implementation may
// also record `progress` (the archive's watermark as the database sees it) atomically with the
// swap, or after it, but never before. A commit whose outcome cannot be known (the connection
// broke, a timeout or a 5xx answer, after the request left) throws CommitStateUnknown: the
// caller learns the outcome with load_settled() and compares what it finds with the change, and
// deletes nothing the new version references until it knows the change did not happen.
// Implementations: JdbcCatalog (the Iceberg JDBC catalog tables in PostgreSQL) and RestCatalog
// (an Iceberg REST catalog server). Not thread-safe: one catalog object per thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "trackd/config/config.hpp"

#include "file_io.hpp"

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

// One commit: the version it starts from and the one it makes.
struct TableChange {
    const std::string& base_location;
    const nlohmann::ordered_json& base;
    const nlohmann::ordered_json& next;
    // The metadata file trackd wrote for `next` (catalogs that do not write metadata); empty
    // otherwise.
    const std::string& next_location;
};

class Catalog {
  public:
    virtual ~Catalog() = default;
    // True when the catalog writes metadata files itself (REST); false when trackd writes them
    // and the catalog records which one is current (JDBC).
    [[nodiscard]] virtual bool writes_metadata() const { return false; }
    // The table's current metadata location, or nullopt when the catalog has no such table.
    virtual std::optional<std::string> load(const TableIdent& table) = 0;
    // Registers a new table (and its namespace) whose first version is `metadata`, written by
    // trackd at `metadata_location` unless writes_metadata(); false when it exists already.
    virtual bool create(const TableIdent& table, const std::string& metadata_location,
                        const nlohmann::ordered_json& metadata) = 0;
    // Throws CommitStateUnknown when the outcome cannot be known (see above), another exception
    // when it is known that nothing changed.
    virtual std::optional<std::string> commit(const TableIdent& table, const TableChange& change,
                                              const std::optional<CommitProgress>& progress) = 0;
    // After CommitStateUnknown: the table's current metadata location once the lost commit can
    // no longer change it (JDBC: it has ended on the server, read on a new connection; REST: the
    // same request sent again has been answered, which applies it at most once since it asserts
    // the base). Throws when that cannot be learnt now.
    virtual std::optional<std::string> load_settled(const TableIdent& table) = 0;
    // The object storage credentials the catalog handed out with the table at its last load
    // (REST with archive.rest_access_delegation: vended credentials); nullopt: none, use
    // trackd's own.
    [[nodiscard]] virtual std::optional<S3Credentials> vended_credentials() const {
        return std::nullopt;
    }
};

// Opens a new connection to the catalog's database; may throw db::DbError.
using ConnectionFactory = std::function<std::unique_ptr<db::Connection>()>;

// The Iceberg JDBC catalog (tables iceberg_tables and iceberg_namespace_properties, created by
// migration V0006) on its own connection from `connect`, opened when first needed and replaced
// by a new one whenever it broke or a commit's outcome was lost on it.
std::unique_ptr<Catalog> make_jdbc_catalog(ConnectionFactory connect);

// An Iceberg REST catalog (archive.rest_*): GET /v1/config for its prefix, namespaces, tables,
// commits as POST .../tables/{table} with assert-table-uuid and assert-ref-snapshot-id on main.
// Bearer token: archive.rest_token, or an OAuth2 client-credentials token from
// archive.rest_oauth2_uri (renewed before it expires and after a 401).
std::unique_ptr<Catalog> make_rest_catalog(const config::ArchiveConfig& config);

// The S3 credentials in a REST catalog's LoadTableResult: from `storage-credentials`, the entry
// whose prefix is the longest one of the table's location, else from `config`
// (s3.access-key-id, s3.secret-access-key, s3.session-token), as the REST spec orders them;
// nullopt when neither holds a key pair.
std::optional<S3Credentials> vended_s3_credentials(const nlohmann::ordered_json& loaded);

}  // namespace trackd::archive
