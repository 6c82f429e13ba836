// trackd-bench-watch: polls trackd.kafka_offsets (the offsets trackd commits with each batch)
// over one connection, every --interval-ms.
//
//   --total N     exit 0 once the committed offsets of the group/topic add up to N messages;
//                 prints first_commit_epoch (when anything was first seen committed),
//                 first_commit_messages (how many then), done_epoch, polls
//   --log FILE    write one line per observed change: "seen_us previous_poll_us partition
//                 next_offset" (epoch microseconds): the batch that moved the offset committed
//                 after previous_poll_us and before seen_us. Runs until --total, --timeout-s or
//                 SIGTERM/SIGINT.
//   --timeout-s S give up after S seconds (exit 1); default 1800
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>

#include <libpq-fe.h>

#include "trackd/core/time.hpp"

namespace {

std::atomic<bool> g_stop{false};
extern "C" void on_signal(int /*sig*/) { g_stop.store(true); }

int usage() {
    std::fprintf(stderr,
                 "usage: trackd-bench-watch --dsn DSN --group G --topic T [--total N] "
                 "[--log FILE] [--interval-ms MS] [--timeout-s S]\n");
    return 2;
}

}  // namespace

int main(int argc, char** argv) {
    std::string dsn, group, topic, log_path;
    long long total = -1;
    int interval_ms = 20;
    double timeout_s = 1800;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const bool has = i + 1 < argc;
        if (a == "--dsn" && has) {
            dsn = argv[++i];
        } else if (a == "--group" && has) {
            group = argv[++i];
        } else if (a == "--topic" && has) {
            topic = argv[++i];
        } else if (a == "--total" && has) {
            total = std::atoll(argv[++i]);
        } else if (a == "--log" && has) {
            log_path = argv[++i];
        } else if (a == "--interval-ms" && has) {
            interval_ms = std::atoi(argv[++i]);
        } else if (a == "--timeout-s" && has) {
            timeout_s = std::atof(argv[++i]);
        } else {
            return usage();
        }
    }
    if (dsn.empty() || group.empty() || topic.empty() || (total < 0 && log_path.empty())) {
        return usage();
    }
    std::signal(SIGTERM, on_signal);
    std::signal(SIGINT, on_signal);

    PGconn* conn = PQconnectdb(dsn.c_str());
    if (PQstatus(conn) != CONNECTION_OK) {
        std::fprintf(stderr, "trackd-bench-watch: %s", PQerrorMessage(conn));
        return 1;
    }
    PQclear(PQexec(conn, "SET application_name = 'trackd-bench-watch'"));
    FILE* log = nullptr;
    if (!log_path.empty()) {
        log = std::fopen(log_path.c_str(), "w");
        if (log == nullptr) {
            std::perror(log_path.c_str());
            return 1;
        }
    }
    const char* params[2] = {group.c_str(), topic.c_str()};
    const char* sql =
        "SELECT kafka_partition, next_offset FROM trackd.kafka_offsets "
        "WHERE consumer_group = $1 AND topic = $2";

    std::map<int, long long> seen;
    const std::int64_t started = trackd::core::now_us();
    std::int64_t previous_poll = started;
    std::int64_t first_commit = 0;
    long long first_commit_messages = 0;
    long long polls = 0;
    std::int64_t done = 0;
    int rc = 1;
    auto next = std::chrono::steady_clock::now();
    while (!g_stop.load()) {
        const std::int64_t now = trackd::core::now_us();
        if (static_cast<double>(now - started) / 1e6 > timeout_s) {
            std::fprintf(stderr, "trackd-bench-watch: timeout after %.0f s\n", timeout_s);
            break;
        }
        PGresult* r = PQexecParams(conn, sql, 2, nullptr, params, nullptr, nullptr, 0);
        ++polls;
        if (PQresultStatus(r) != PGRES_TUPLES_OK) {
            std::fprintf(stderr, "trackd-bench-watch: %s", PQresultErrorMessage(r));
            PQclear(r);
            break;
        }
        long long sum = 0;
        for (int i = 0; i < PQntuples(r); ++i) {
            const int p = std::atoi(PQgetvalue(r, i, 0));
            const long long off = std::atoll(PQgetvalue(r, i, 1));
            if (off > 0) sum += off;
            auto [it, inserted] = seen.try_emplace(p, -1);
            if (off > it->second) {
                if (log != nullptr && off > 0) {
                    std::fprintf(log, "%lld %lld %d %lld\n", static_cast<long long>(now),
                                 static_cast<long long>(previous_poll), p, off);
                }
                it->second = off;
            }
        }
        PQclear(r);
        if (first_commit == 0 && sum > 0) {
            first_commit = now;
            first_commit_messages = sum;
        }
        previous_poll = now;
        if (total >= 0 && sum >= total) {
            done = now;
            rc = 0;
            break;
        }
        next += std::chrono::milliseconds(interval_ms);
        std::this_thread::sleep_until(next);
    }
    if (g_stop.load() && total < 0) rc = 0;
    if (done == 0) done = trackd::core::now_us();
    if (log != nullptr) std::fclose(log);
    PQfinish(conn);
    std::printf(
        "first_commit_epoch=%.6f\nfirst_commit_messages=%lld\ndone_epoch=%.6f\npolls=%lld\n",
        static_cast<double>(first_commit) / 1e6, first_commit_messages,
        static_cast<double>(done) / 1e6, polls);
    return rc;
}
