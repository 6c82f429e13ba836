// The Iceberg JDBC catalog, speaking the same SQL as Apache Iceberg's JdbcCatalog so that Java
// engines and PyIceberg's SqlCatalog share the table with trackd.
#include <type_traits>
#include <utility>

#include "trackd/core/pause_point.hpp"
#include "trackd/db/connection.hpp"

#include "catalog.hpp"

namespace trackd::archive {
namespace {

// How long load_settled() waits for a lost commit that may still be running on the server (it
// holds the table's row lock until it ends); after that the outcome stays unknown for now.
constexpr const char* kSettleLockTimeout = "5s";

constexpr const char* kTableRow =
    "FROM iceberg_tables WHERE catalog_name = $1 AND table_namespace = $2 AND table_name = $3 AND "
    "(iceberg_type = 'TABLE' OR iceberg_type IS NULL)";

class JdbcCatalog final : public Catalog {
  public:
    explicit JdbcCatalog(ConnectionFactory connect) : connect_(std::move(connect)) {}

    std::optional<std::string> load(const TableIdent& t) override {
        // iceberg_type NULL is a table in catalogs created before views existed (schema V0).
        auto r = run([&](db::Connection& c) {
            return c.query(std::string("SELECT metadata_location ") + kTableRow,
                           {t.catalog, t.namespace_, t.name});
        });
        if (r.rows() == 0) return std::nullopt;
        return r.get(0, 0);
    }

    std::optional<std::string> load_settled(const TableIdent& t) override {
        // A commit whose answer was lost may still be running in its old session, holding the
        // row lock its UPDATE took: FOR SHARE waits for it to end, so that the location read is
        // final for that commit, not a snapshot from before it.
        conn_.reset();  // never the connection the commit was lost on
        auto r = run([&](db::Connection& c) {
            c.exec_script("BEGIN");
            c.exec_script(std::string("SET LOCAL lock_timeout = '") + kSettleLockTimeout + "'");
            auto res = c.query(std::string("SELECT metadata_location ") + kTableRow + " FOR SHARE",
                               {t.catalog, t.namespace_, t.name});
            c.exec_script("ROLLBACK");
            return res;
        });
        if (r.rows() == 0) return std::nullopt;
        return r.get(0, 0);
    }

    bool create(const TableIdent& t, const std::string& location,
                const nlohmann::ordered_json& /*metadata*/) override {
        return run([&](db::Connection& c) {
            // JdbcCatalog.createNamespace stores an "exists" property; listing namespaces finds
            // it.
            c.query(
                "INSERT INTO iceberg_namespace_properties (catalog_name, namespace, "
                "property_key, property_value) VALUES ($1, $2, 'exists', 'true') "
                "ON CONFLICT DO NOTHING",
                {t.catalog, t.namespace_});
            auto r = c.query(
                "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, "
                "metadata_location, previous_metadata_location, iceberg_type) "
                "VALUES ($1, $2, $3, $4, NULL, 'TABLE') ON CONFLICT DO NOTHING",
                {t.catalog, t.namespace_, t.name, location});
            return r.affected() == 1;
        });
    }

    std::optional<std::string> commit(const TableIdent& t, const TableChange& change,
                                      const std::optional<CommitProgress>& progress) override {
        const auto& base = change.base_location;
        const auto& next = change.next_location;
        auto& c = connection();
        bool sent_commit = false;
        try {
            c.exec_script("BEGIN");
            // Exactly JdbcCatalog's compare-and-swap: no row updated means another writer
            // committed first.
            auto r = c.query(
                "UPDATE iceberg_tables SET metadata_location = $1, previous_metadata_location = "
                "$2 WHERE catalog_name = $3 AND table_namespace = $4 AND table_name = $5 AND "
                "metadata_location = $2",
                {next, base, t.catalog, t.namespace_, t.name});
            if (r.affected() != 1) {
                c.exec_script("ROLLBACK");
                return std::nullopt;
            }
            if (progress) {
                c.query(
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
            static core::PausePoint pause("TRACKD_TEST_ARCHIVE_PAUSE_AT", "archive");
            pause.at("catalog-transaction");
            sent_commit = true;
            c.exec_script("COMMIT");
            return next;
        } catch (const db::DbError& e) {
            if (sent_commit) {
                // Whatever the error, the COMMIT left: it may have been applied. This session is
                // not asked again (its answers are not trusted any more); load_settled() opens a
                // new one.
                conn_.reset();
                throw CommitStateUnknown(std::string("commit outcome unknown: ") + e.what());
            }
            // No COMMIT was sent: the transaction ends without effect, with this session or
            // when the server notices it is gone.
            if (e.connection_lost()) {
                conn_.reset();
            } else {
                try {
                    c.exec_script("ROLLBACK");
                } catch (const db::DbError&) {
                    conn_.reset();
                }
            }
            throw;
        }
    }

  private:
    db::Connection& connection() {
        if (!conn_ || !conn_->ok()) conn_ = connect_();
        return *conn_;
    }

    // Statements outside the commit: a broken session is dropped, so the next call reconnects.
    template <typename F>
    std::invoke_result_t<F, db::Connection&> run(F&& f) {
        auto& c = connection();
        try {
            return f(c);
        } catch (const db::DbError&) {
            conn_.reset();
            throw;
        }
    }

    ConnectionFactory connect_;
    std::unique_ptr<db::Connection> conn_;
};

}  // namespace

std::unique_ptr<Catalog> make_jdbc_catalog(ConnectionFactory connect) {
    return std::make_unique<JdbcCatalog>(std::move(connect));
}

}  // namespace trackd::archive
