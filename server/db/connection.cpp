#include "trackd/db/connection.hpp"

#include <cerrno>
#include <utility>

#include <fmt/format.h>
#include <libpq-fe.h>

#include "trackd/core/log.hpp"

namespace trackd::db {
namespace {

std::string trim(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
}

// Server NOTICEs (e.g. "moved N rows from the default partition") go to the log, not raw stderr.
void log_notice(void* /*arg*/, const PGresult* res) {
    std::string message = trim(PQresultErrorMessage(res));
    core::log::debug("postgresql notice", {{"message", message}});
}

// Throws DbError for a failed result (taking ownership of `res`, which may be null) with its
// SQLSTATE and message, falling back to the connection's error message.
[[noreturn]] void throw_result_error(pg_conn* conn, PGresult* res) {
    std::string state;
    std::string message;
    if (res != nullptr) {
        const char* s = PQresultErrorField(res, PG_DIAG_SQLSTATE);
        state = s != nullptr ? s : "";
        message = trim(PQresultErrorMessage(res));
        PQclear(res);
    }
    if (message.empty()) message = trim(PQerrorMessage(conn));
    throw DbError(message.empty() ? "unknown PostgreSQL error" : message, state);
}

}  // namespace

bool DbError::connection_lost() const noexcept {
    return sqlstate_.empty() || sqlstate_.rfind("08", 0) == 0 || sqlstate_ == "57P01" ||
           sqlstate_ == "57P02" || sqlstate_ == "57P03";
}

bool DbError::retryable() const noexcept {
    return connection_lost() || sqlstate_.rfind("40", 0) == 0 || sqlstate_.rfind("53", 0) == 0 ||
           sqlstate_ == "55P03" || sqlstate_ == "57014";
}

Result::Result(pg_result* res) : res_(res) {}
Result::~Result() {
    if (res_ != nullptr) PQclear(res_);
}
Result::Result(Result&& other) noexcept : res_(std::exchange(other.res_, nullptr)) {}
Result& Result::operator=(Result&& other) noexcept {
    if (this != &other) {
        if (res_ != nullptr) PQclear(res_);
        res_ = std::exchange(other.res_, nullptr);
    }
    return *this;
}
int Result::rows() const { return PQntuples(res_); }
int Result::columns() const { return PQnfields(res_); }
std::optional<std::string> Result::get(int row, int column) const {
    const auto v = view(row, column);
    return v ? std::optional<std::string>(*v) : std::nullopt;
}
std::optional<std::string_view> Result::view(int row, int column) const {
    if (PQgetisnull(res_, row, column) != 0) return std::nullopt;
    return std::string_view(PQgetvalue(res_, row, column),
                            static_cast<size_t>(PQgetlength(res_, row, column)));
}
std::string Result::at(int row, int column) const { return std::string(at_view(row, column)); }
std::string_view Result::at_view(int row, int column) const {
    const auto v = view(row, column);
    if (!v) {
        throw DbError("unexpected NULL in column " + std::string(PQfname(res_, column)), "");
    }
    return *v;
}
long Result::affected() const {
    const char* n = PQcmdTuples(res_);
    return (n == nullptr || *n == '\0') ? 0 : std::stol(n);
}

Connection::Connection(const std::string& dsn, const std::string& application_name,
                       int connect_timeout_s) {
    connect({{"dbname", dsn},
             {"application_name", application_name},
             {"connect_timeout", std::to_string(connect_timeout_s)}});
}

Connection::Connection(const config::PgConfig& pg, const std::string& application_name,
                       Limits limits) {
    // Keepalives notice a silent peer while nothing is in flight; tcp_user_timeout while a
    // request waits to be acknowledged, where keepalives do not apply (without it a write into
    // a cut-off network waits for TCP's retransmission limit, about 15 minutes). Both ends use
    // the same bound: idle + interval x count.
    const int user_timeout_ms =
        (pg.keepalives_idle_s + pg.keepalives_interval_s * pg.keepalives_count) * 1000;
    // Client side first, so that a DSN that sets its own wins (expand_dbname: the DSN's values
    // override earlier keywords).
    connect({{"keepalives", "1"},
             {"keepalives_idle", std::to_string(pg.keepalives_idle_s)},
             {"keepalives_interval", std::to_string(pg.keepalives_interval_s)},
             {"keepalives_count", std::to_string(pg.keepalives_count)},
             {"tcp_user_timeout", std::to_string(user_timeout_ms)},
             {"dbname", pg.dsn},
             {"application_name", application_name},
             {"connect_timeout", std::to_string(pg.connect_timeout_s)}});
    if (limits == Limits::network) return;
    // Server side: SET rather than the startup `options`, which connection poolers refuse.
    exec_script(
        fmt::format("SET lock_timeout = {}; SET idle_in_transaction_session_timeout = {}; "
                    "SET tcp_keepalives_idle = {}; SET tcp_keepalives_interval = {}; "
                    "SET tcp_keepalives_count = {}; SET tcp_user_timeout = {}",
                    pg.lock_timeout_ms, pg.idle_in_transaction_timeout_ms, pg.keepalives_idle_s,
                    pg.keepalives_interval_s, pg.keepalives_count, user_timeout_ms));
}

void Connection::connect(const std::vector<std::pair<std::string, std::string>>& params) {
    std::vector<const char*> keys;
    std::vector<const char*> values;
    for (const auto& [k, v] : params) {
        keys.push_back(k.c_str());
        values.push_back(v.c_str());
    }
    keys.push_back(nullptr);
    values.push_back(nullptr);
    // expand_dbname=1: `dbname` may be a full connection string or URI.
    conn_ = PQconnectdbParams(keys.data(), values.data(), 1);
    if (conn_ == nullptr || PQstatus(conn_) != CONNECTION_OK) {
        std::string message = conn_ != nullptr ? trim(PQerrorMessage(conn_)) : "out of memory";
        if (conn_ != nullptr) PQfinish(conn_);
        conn_ = nullptr;
        throw DbError("cannot connect to PostgreSQL: " + message, "");
    }
    PQsetNoticeReceiver(conn_, log_notice, nullptr);
}

Connection::~Connection() { close(); }

bool Connection::ok() const { return conn_ != nullptr && PQstatus(conn_) == CONNECTION_OK; }

namespace {

std::vector<const char*> param_values(const Params& params) {
    std::vector<const char*> values;
    values.reserve(params.size());
    for (const auto& p : params) values.push_back(p ? p->c_str() : nullptr);
    return values;
}

// What an exec/query call answers: a command or rows, else the error it carries.
void check_answer(pg_conn* conn, PGresult* res) {
    const auto status = PQresultStatus(res);
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) throw_result_error(conn, res);
}

}  // namespace

void Connection::exec_script(const std::string& sql) {
    PGresult* res = PQexec(conn_, sql.c_str());
    check_answer(conn_, res);
    PQclear(res);
}

Result Connection::query(const std::string& sql, const Params& params) {
    const auto values = param_values(params);
    PGresult* res = PQexecParams(conn_, sql.c_str(), static_cast<int>(values.size()), nullptr,
                                 values.data(), nullptr, nullptr, 0);
    check_answer(conn_, res);
    return Result(res);
}

void Connection::prepare(const std::string& name, const std::string& sql) {
    PGresult* res = PQprepare(conn_, name.c_str(), sql.c_str(), 0, nullptr);
    if (PQresultStatus(res) != PGRES_COMMAND_OK) throw_result_error(conn_, res);
    PQclear(res);
}

Result Connection::query_prepared(const std::string& name, const Params& params, Format format) {
    const auto values = param_values(params);
    PGresult* res =
        PQexecPrepared(conn_, name.c_str(), static_cast<int>(values.size()), values.data(), nullptr,
                       nullptr, format == Format::binary ? 1 : 0);
    check_answer(conn_, res);
    return Result(res);
}

void Connection::send_script(const std::string& sql) {
    if (PQsendQuery(conn_, sql.c_str()) == 0) throw_result_error(conn_, nullptr);
}

void Connection::send_prepare(const std::string& name, const std::string& sql) {
    if (PQsendPrepare(conn_, name.c_str(), sql.c_str(), 0, nullptr) == 0) {
        throw_result_error(conn_, nullptr);
    }
}

void Connection::send_prepared(const std::string& name, const Params& params, Format format) {
    const auto values = param_values(params);
    if (PQsendQueryPrepared(conn_, name.c_str(), static_cast<int>(values.size()), values.data(),
                            nullptr, nullptr, format == Format::binary ? 1 : 0) == 0) {
        throw_result_error(conn_, nullptr);
    }
}

void Connection::send_query(const std::string& sql, const Params& params, Format format) {
    const auto values = param_values(params);
    if (PQsendQueryParams(conn_, sql.c_str(), static_cast<int>(values.size()), nullptr,
                          values.data(), nullptr, nullptr, format == Format::binary ? 1 : 0) == 0) {
        throw_result_error(conn_, nullptr);
    }
}

void Connection::set_nonblocking() {
    if (PQsetnonblocking(conn_, 1) != 0) throw_result_error(conn_, nullptr);
}

bool Connection::flush() {
    const int r = PQflush(conn_);
    if (r < 0) throw_result_error(conn_, nullptr);
    return r == 0;
}

int Connection::socket() const { return conn_ != nullptr ? PQsocket(conn_) : -1; }

std::string Connection::option(const std::string& keyword) const {
    if (conn_ == nullptr) return "";
    PQconninfoOption* options = PQconninfo(conn_);
    if (options == nullptr) throw DbError("out of memory reading the connection's options", "");
    std::string value;
    for (const PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
        if (keyword == o->keyword && o->val != nullptr) value = o->val;
    }
    PQconninfoFree(options);
    return value;
}

bool Connection::answer_ready() {
    if (answer_complete_) return true;
    // A broken connection: PQgetResult reports it, without waiting.
    const bool broken = PQconsumeInput(conn_) == 0;
    for (;;) {
        if (!broken && PQisBusy(conn_) != 0) return false;
        PGresult* res = PQgetResult(conn_);
        if (res == nullptr) break;
        PQclear(answer_);
        answer_ = res;  // the last result is the answer, as PQexec* would return it
        const auto status = PQresultStatus(res);
        if (status == PGRES_COPY_IN || status == PGRES_COPY_OUT || status == PGRES_COPY_BOTH ||
            PQstatus(conn_) == CONNECTION_BAD) {
            break;
        }
    }
    answer_complete_ = true;
    return true;
}

Result Connection::answer() {
    answer_complete_ = false;
    PGresult* res = std::exchange(answer_, nullptr);
    check_answer(conn_, res);
    return Result(res);
}

void Connection::close() {
    PQclear(std::exchange(answer_, nullptr));
    answer_complete_ = false;
    if (conn_ != nullptr) PQfinish(std::exchange(conn_, nullptr));
}

void Connection::copy_start(const std::string& copy_sql) {
    PGresult* res = PQexec(conn_, copy_sql.c_str());
    if (PQresultStatus(res) != PGRES_COPY_IN) throw_result_error(conn_, res);
    PQclear(res);
}

void Connection::copy_send(std::string_view data) {
    // PQputCopyData takes an int: a batch's COPY data (batch.max_bytes has no upper bound) goes
    // in pieces that fit one.
    constexpr std::size_t kPiece = std::size_t{1} << 30;
    do {
        const auto piece = data.substr(0, kPiece);
        if (PQputCopyData(conn_, piece.data(), static_cast<int>(piece.size())) != 1) {
            throw_result_error(conn_, nullptr);
        }
        data.remove_prefix(piece.size());
    } while (!data.empty());
}

void Connection::copy_end() {
    if (PQputCopyEnd(conn_, nullptr) != 1) throw_result_error(conn_, nullptr);
    PGresult* res = PQgetResult(conn_);
    const bool ok = PQresultStatus(res) == PGRES_COMMAND_OK;
    if (!ok) {
        // Drain the remaining results so the connection is usable for ROLLBACK.
        std::string state;
        std::string message;
        const char* s = PQresultErrorField(res, PG_DIAG_SQLSTATE);
        state = s != nullptr ? s : "";
        message = trim(PQresultErrorMessage(res));
        PQclear(res);
        while ((res = PQgetResult(conn_)) != nullptr) PQclear(res);
        throw DbError(message, state);
    }
    PQclear(res);
    while ((res = PQgetResult(conn_)) != nullptr) PQclear(res);
}

void Connection::copy_out_start(const std::string& copy_sql) {
    PGresult* res = PQexec(conn_, copy_sql.c_str());
    if (PQresultStatus(res) != PGRES_COPY_OUT) throw_result_error(conn_, res);
    PQclear(res);
}

bool Connection::copy_out_next(std::string& row) {
    char* buf = nullptr;
    const int n = PQgetCopyData(conn_, &buf, 0);
    if (n > 0) {
        row.assign(buf, static_cast<size_t>(n));
        PQfreemem(buf);
        return true;
    }
    if (n == -2) throw_result_error(conn_, nullptr);
    // -1: done; the COPY's own result says whether it succeeded.
    PGresult* res = PQgetResult(conn_);
    const bool ok = PQresultStatus(res) == PGRES_COMMAND_OK;
    if (!ok) {
        std::string state;
        const char* s = PQresultErrorField(res, PG_DIAG_SQLSTATE);
        state = s != nullptr ? s : "";
        std::string message = trim(PQresultErrorMessage(res));
        PQclear(res);
        while ((res = PQgetResult(conn_)) != nullptr) PQclear(res);
        throw DbError(message, state);
    }
    PQclear(res);
    while ((res = PQgetResult(conn_)) != nullptr) PQclear(res);
    return false;
}

}  // namespace trackd::db
