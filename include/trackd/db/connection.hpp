// A PostgreSQL connection (libpq), owned by one thread at a time.
//
// Contract: the constructor connects or throws DbError. exec()/query() run one statement and
// throw DbError carrying the SQLSTATE on failure; parameters are always sent bound, never
// spliced into SQL text. Not thread-safe: give each thread its own Connection.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "trackd/config/config.hpp"

struct pg_conn;
struct pg_result;

namespace trackd::db {

class DbError : public std::runtime_error {
  public:
    DbError(const std::string& message, std::string sqlstate)
        : std::runtime_error(message), sqlstate_(std::move(sqlstate)) {}
    // Five-character SQLSTATE, or empty when the connection itself failed.
    [[nodiscard]] const std::string& sqlstate() const noexcept { return sqlstate_; }
    // The connection is gone (class 08, admin shutdown 57P01..57P03, or no SQLSTATE at all):
    // reconnecting and retrying is the remedy.
    [[nodiscard]] bool connection_lost() const noexcept;
    // Running the work again may succeed: the connection is lost, or the server asks to try again
    // (class 40: serialization failure, deadlock; class 53: out of resources; 55P03: lock not
    // available; 57014: statement timeout or cancel). The one retry rule: the ingest retries its
    // batch, the HTTP API answers 503.
    [[nodiscard]] bool retryable() const noexcept;

  private:
    std::string sqlstate_;
};

// The server did not answer within the connection's answer timeout (set_answer_timeout): it is
// frozen or cut off the network. The connection has been closed (SQLSTATE class 08).
class DbTimeout : public DbError {
  public:
    explicit DbTimeout(const std::string& message) : DbError(message, "08006") {}
};

// How a statement's result values come back: PostgreSQL's text output, or its binary wire form
// (read with trackd/db/binary.hpp), which spares the server its output functions (float and
// timestamp formatting, numeric arithmetic for epoch values, hex geometry).
enum class Format { text, binary };

// The rows of one result, as text (or binary, if the statement asked for it). Values are nullopt
// for SQL NULL.
class Result {
  public:
    explicit Result(pg_result* res);
    ~Result();
    Result(Result&& other) noexcept;
    Result& operator=(Result&& other) noexcept;
    Result(const Result&) = delete;
    Result& operator=(const Result&) = delete;

    [[nodiscard]] int rows() const;
    [[nodiscard]] int columns() const;
    [[nodiscard]] std::optional<std::string> get(int row, int column) const;
    // The value without a copy, valid while this Result lives; nullopt if it is NULL.
    [[nodiscard]] std::optional<std::string_view> view(int row, int column) const;
    // The value, or throws if it is NULL.
    [[nodiscard]] std::string at(int row, int column) const;
    // The same without a copy, valid while this Result lives.
    [[nodiscard]] std::string_view at_view(int row, int column) const;
    // Number of rows an INSERT/UPDATE/DELETE touched.
    [[nodiscard]] long affected() const;

  private:
    pg_result* res_;
};

using Params = std::vector<std::optional<std::string>>;

class Connection {
  public:
    // `application_name` shows in pg_stat_activity, so operators see which part of trackd it is.
    Connection(const std::string& dsn, const std::string& application_name,
               int connect_timeout_s = 10);
    // trackd's own connections: the DSN and connect timeout of `pg`, plus its session limits
    // (lock_timeout, idle_in_transaction_session_timeout, TCP keepalives on both ends and the
    // server's tcp_user_timeout), so that no wait on a dead or frozen peer is unbounded.
    Connection(const config::PgConfig& pg, const std::string& application_name);
    ~Connection();
    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;

    // Runs SQL text that may hold several statements, without parameters (migrations).
    void exec_script(const std::string& sql);
    // Runs one statement with bound text parameters ($1, $2, ...).
    Result query(const std::string& sql, const Params& params = {});
    // A named prepared statement on this session: prepare() once, then query_prepared() with
    // bound text parameters as often as needed, its values in `format`. A name is prepared once
    // per session; a server that forgot it (DISCARD ALL) answers SQLSTATE 26000.
    void prepare(const std::string& name, const std::string& sql);
    Result query_prepared(const std::string& name, const Params& params = {},
                          Format format = Format::text);

    // COPY ... FROM STDIN: start, send data in chunks, finish (throws on server error).
    void copy_start(const std::string& copy_sql);
    void copy_send(std::string_view data);
    void copy_end();

    // COPY ... TO STDOUT: start, then read one row (binary format: one tuple) per call until it
    // returns false; throws on server error.
    void copy_out_start(const std::string& copy_sql);
    bool copy_out_next(std::string& row);

    [[nodiscard]] bool ok() const;

    // Waits at most `limit` for the server's answer to each later exec_script(), query(),
    // prepare() or query_prepared() (zero, the default: as long as it takes); past it the call
    // closes the connection and throws DbTimeout. A server-side statement_timeout ends a slow
    // statement but not the wait on a server that is frozen or cut off the network, which only
    // the client can bound. COPY is not covered.
    void set_answer_timeout(std::chrono::milliseconds limit) { answer_timeout_ = limit; }

  private:
    void connect(const std::vector<std::pair<std::string, std::string>>& params);
    // What a PQsend* call started, as the PQexec* call would return it (its last result),
    // waiting at most answer_timeout_ in all.
    pg_result* await_result();

    pg_conn* conn_ = nullptr;
    std::chrono::milliseconds answer_timeout_{0};
};

}  // namespace trackd::db
