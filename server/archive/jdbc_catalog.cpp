// The Iceberg JDBC catalog, speaking the same SQL as Apache Iceberg's JdbcCatalog so that Java
// engines and PyIceberg's SqlCatalog share the table with trackd.
#include "trackd/archive/catalog.hpp"
#include "trackd/db/connection.hpp"

#include "pause_point.hpp"

namespace trackd::archive {
namespace {

class JdbcCatalog final : public Catalog {
  public:
    explicit JdbcCatalog(db::Connection& conn) : conn_(conn) {}

    std::optional<std::string> load(const TableIdent& t) override {
        // iceberg_type NULL is a table in catalogs created before views existed (schema V0).
        auto r = conn_.query(
            "SELECT metadata_location FROM iceberg_tables WHERE catalog_name = $1 AND "
            "table_namespace = $2 AND table_name = $3 AND "
            "(iceberg_type = 'TABLE' OR iceberg_type IS NULL)",
            {t.catalog, t.namespace_, t.name});
        if (r.rows() == 0) return std::nullopt;
        return r.get(0, 0);
    }

    bool create(const TableIdent& t, const std::string& location) override {
        // JdbcCatalog.createNamespace stores an "exists" property; listing namespaces finds it.
        conn_.query(
            "INSERT INTO iceberg_namespace_properties (catalog_name, namespace, property_key, "
            "property_value) VALUES ($1, $2, 'exists', 'true') ON CONFLICT DO NOTHING",
            {t.catalog, t.namespace_});
        auto r = conn_.query(
            "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, "
            "metadata_location, previous_metadata_location, iceberg_type) "
            "VALUES ($1, $2, $3, $4, NULL, 'TABLE') ON CONFLICT DO NOTHING",
            {t.catalog, t.namespace_, t.name, location});
        return r.affected() == 1;
    }

    bool commit(const TableIdent& t, const std::string& base, const std::string& next,
                const std::optional<CommitProgress>& progress) override {
        bool sent_commit = false;
        try {
            conn_.exec_script("BEGIN");
            // Exactly JdbcCatalog's compare-and-swap: no row updated means another writer
            // committed first.
            auto r = conn_.query(
                "UPDATE iceberg_tables SET metadata_location = $1, previous_metadata_location = "
                "$2 WHERE catalog_name = $3 AND table_namespace = $4 AND table_name = $5 AND "
                "metadata_location = $2",
                {next, base, t.catalog, t.namespace_, t.name});
            if (r.affected() != 1) {
                conn_.exec_script("ROLLBACK");
                return false;
            }
            if (progress) {
                conn_.query(
                    "INSERT INTO trackd.archive_progress AS p (catalog_name, table_namespace, "
                    "table_name, archived_seq, max_ingest_batch_id, snapshot_id, "
                    "metadata_location) VALUES ($1, $2, $3, $4, $5, $6, $7) "
                    "ON CONFLICT (catalog_name, table_namespace, table_name) DO UPDATE SET "
                    "archived_seq = EXCLUDED.archived_seq, max_ingest_batch_id = "
                    "coalesce(EXCLUDED.max_ingest_batch_id, p.max_ingest_batch_id), snapshot_id = "
                    "EXCLUDED.snapshot_id, metadata_location = EXCLUDED.metadata_location, "
                    "updated_at = now()",
                    {t.catalog, t.namespace_, t.name, std::to_string(progress->archived_seq),
                     progress->max_ingest_batch_id
                         ? std::optional(std::to_string(*progress->max_ingest_batch_id))
                         : std::nullopt,
                     progress->snapshot_id ? std::optional(std::to_string(*progress->snapshot_id))
                                           : std::nullopt,
                     next});
            }
            pause_point("catalog-transaction");
            sent_commit = true;
            conn_.exec_script("COMMIT");
            return true;
        } catch (const db::DbError& e) {
            if (sent_commit && e.connection_lost()) {
                throw CommitStateUnknown(std::string("commit outcome unknown: ") + e.what());
            }
            try {
                conn_.exec_script("ROLLBACK");
            } catch (const db::DbError&) {
                // The connection is gone; so is the transaction.
            }
            throw;
        }
    }

  private:
    db::Connection& conn_;
};

}  // namespace

std::unique_ptr<Catalog> make_jdbc_catalog(db::Connection& conn) {
    return std::make_unique<JdbcCatalog>(conn);
}

}  // namespace trackd::archive
