// A PostgreSQL connection (libpq), owned by one thread at a time.
//
// Contract: the constructor connects or throws DbError. exec()/query() run one statement and
// throw DbError carrying the SQLSTATE on failure; parameters are always sent bound, never
// spliced into SQL text. Not thread-safe: give each thread its own Connection.
#pragma once

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

// The server did not answer within the caller's bound (see Connection::send_*): it is frozen or
// cut off the network. The connection has been closed (SQLSTATE class 08).
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
    // What a connection of trackd's own sets beyond its DSN.
    enum class Limits {
        // TCP keepalives and tcp_user_timeout on both ends, lock_timeout and
        // idle_in_transaction_session_timeout: the server's processes.
        session,
        // TCP keepalives and tcp_user_timeout on trackd's side only: the commands an operator
        // runs (migrate, audit), whose lock waits are their own.
        network,
    };
    // trackd's own connections: the DSN and connect timeout of `pg`, plus `limits`, so that no
    // wait on a dead, frozen or cut-off peer is unbounded.
    Connection(const config::PgConfig& pg, const std::string& application_name,
               Limits limits = Limits::session);
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

    // The same without blocking, for a caller that waits on socket() in its own event loop:
    // send_*() starts one statement; answer_ready() reads what has arrived, never waits, and
    // says whether the whole answer is in; answer() then returns it as query() would (or throws
    // DbError). A server that never answers is the caller's to bound: close() ends the
    // connection. COPY is not covered.
    void send_script(const std::string& sql);
    void send_prepare(const std::string& name, const std::string& sql);
    void send_prepared(const std::string& name, const Params& params, Format format);
    // One statement with bound text parameters, planned with their values (an unnamed
    // statement: nothing stays prepared on the session).
    void send_query(const std::string& sql, const Params& params, Format format);
    [[nodiscard]] bool answer_ready();
    // Nonblocking mode (libpq's PQsetnonblocking): send_*() then only queue what the socket does
    // not take at once, and flush() sends more of it as the socket takes it, true once all is
    // sent. Without it send_*() waits until the whole statement is on its way.
    void set_nonblocking();
    [[nodiscard]] bool flush();
    Result answer();
    [[nodiscard]] int socket() const;
    // A connection option as libpq uses it (PQconninfo: the DSN's, or trackd's), "" if unset.
    [[nodiscard]] std::string option(const std::string& keyword) const;
    // Closes the connection now; ok() is false afterwards.
    void close();

  private:
    void connect(const std::vector<std::pair<std::string, std::string>>& params);

    pg_conn* conn_ = nullptr;
    pg_result* answer_ = nullptr;  // what send_*() started, as far as it has arrived
    bool answer_complete_ = false;
};

}  // namespace trackd::db
