// trackd's entry point: parse the command line, load the config, run one command.
// Everything that can fail at start-up throws; this file turns that into one line and exit 1
// (exit 2 for `trackd audit`, whose 1 means "violations found").
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <unistd.h>

#include "trackd/archive/archiver.hpp"
#include "trackd/archive/object_storage.hpp"
#include "trackd/audit/audit.hpp"
#include "trackd/config/config.hpp"
#include "trackd/core/error.hpp"
#include "trackd/core/log.hpp"
#include "trackd/core/version.hpp"
#include "trackd/db/connection.hpp"
#include "trackd/db/migrations.hpp"
#include "trackd/pipeline/pipeline.hpp"

namespace {

constexpr std::string_view kUsage = R"(usage: trackd <command> [--config FILE]

commands:
  run            ingest from Kafka into PostGIS and serve the HTTP API
                 (and archive to Iceberg when archive.enabled)
  archive        archive committed history to the Iceberg table until stopped
  archive --once archive what is committed now, then exit (3: another archiver runs)
  archive maintain  expire snapshots, merge manifests, delete orphan files, apply retention,
                    prune the batch ledger (exit 1 if a step failed; the others still run)
  archive compact   rewrite small data files into target-sized ones (beside a running archiver)
  migrate        apply the missing SQL migrations to the database
  audit [--since DURATION] [--format text|json] [--limit N]
                 check the database against the delivery promise: each Kafka offset stored
                 at most once and none beyond the stored offsets, current state = latest
                 history row, archive progress not ahead (--since 1h: only recent rows);
                 exit 0 clean, 1 violations found, 2 error
  check-config   print the effective configuration (secrets masked) and exit
  version        print the version and the schema version this build expects

Every setting can also be given as an environment variable TRACKD_<SECTION>_<KEY>,
e.g. TRACKD_KAFKA_BROKERS, TRACKD_KAFKA_TOPIC, TRACKD_PG_DSN, TRACKD_HTTP_LISTEN.
)";

struct Args {
    std::string command;
    std::string config_file;
    std::vector<std::string> sub;  // `archive --once`, `archive maintain`, audit's flags
};

Args parse_args(int argc, char** argv) {
    Args args;
    const std::vector<std::string> v(argv + 1, argv + argc);
    for (size_t i = 0; i < v.size(); ++i) {
        if (v[i] == "--config" || v[i] == "-c") {
            if (i + 1 >= v.size()) throw trackd::core::ConfigError("--config", "needs a file");
            args.config_file = v[++i];
        } else if (v[i].rfind("--config=", 0) == 0) {
            args.config_file = v[i].substr(9);
        } else if (v[i] == "--help" || v[i] == "-h") {
            args.command = "help";
        } else if (args.command.empty() && v[i][0] != '-') {
            args.command = v[i];
        } else if ((args.command == "archive" &&
                    (v[i] == "--once" || v[i] == "maintain" || v[i] == "compact")) ||
                   args.command == "audit") {  // audit::parse_options() judges its flags
            args.sub.push_back(v[i]);
        } else {
            throw trackd::core::ConfigError(v[i], "unknown argument (see trackd --help)");
        }
    }
    return args;
}

// The commands' own connection: bounded on the network like the server's, with the session
// limits left to each command (migrate sets its lock waits per migration).
trackd::db::Connection connect(const trackd::config::Config& config, const char* role) {
    return {config.pg, std::string("trackd ") + role, trackd::db::Connection::Limits::network};
}

int cmd_migrate(const trackd::config::Config& config) {
    auto conn = connect(config, "migrate");
    trackd::db::MigrateOptions options;
    options.lock_timeout_ms = config.postgis.ddl_lock_timeout_ms;
    const auto report = trackd::db::migrate(conn, options);
    for (const auto& f : report.applied) trackd::core::log::info("applied", {{"file", f}});
    if (report.applied.empty()) {
        fmt::print("schema is up to date at version {}\n", report.version_after);
    } else {
        fmt::print("schema migrated from version {} to {} ({} file(s) applied)\n",
                   report.version_before, report.version_after, report.applied.size());
    }
    return 0;
}

// Exit 0: no violation; 1: violations, reported on stdout.
int cmd_audit(const trackd::config::Config& config, const trackd::audit::Options& options) {
    auto conn = connect(config, "audit");
    const auto report = trackd::audit::run(conn, {config.kafka.topic, config.kafka.group}, options);
    fmt::print("{}", options.format == "json" ? trackd::audit::to_json(report)
                                              : trackd::audit::to_text(report));
    return report.violations() == 0 ? 0 : 1;
}

// `trackd audit` exits 2 on any error, since its 1 means "violations found".
bool is_audit(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        if (a == "--config" || a == "-c") {
            ++i;
        } else if (a.empty() || a[0] != '-') {
            return a == "audit";
        }
    }
    return false;
}

std::atomic<bool> g_stop{false};

extern "C" void on_signal(int /*signal*/) { g_stop.store(true); }

void stop_on_signals() {
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGINT, &sa, nullptr);
}

// How long a stop of `trackd run` or `trackd archive` may take once asked for. Every step of a
// stop has its own bound (the batches' grace, leaving the group, the HTTP server's grace) and they
// add up to well under this, but a statement on a PostgreSQL *process* that is frozen has none: its
// host still acknowledges TCP, so neither keepalives nor tcp_user_timeout end the wait. Past this
// the process exits at once (status 1). Nothing is lost: that is a SIGKILL in effect, and exactly
// once holds under SIGKILL. TRACKD_TEST_STOP_BOUND_S shortens it for the tests.
std::chrono::seconds stop_bound() {
    if (const char* s = std::getenv("TRACKD_TEST_STOP_BOUND_S")) {
        return std::chrono::seconds(std::max(1, std::atoi(s)));
    }
    return std::chrono::seconds(60);
}

// Runs `loop` (which returns once g_stop is set) under stop_bound(): past it after a stop was
// asked for, the process logs why and exits at once with status 1.
template <class Loop>
void with_stop_bound(Loop&& loop) {
    std::mutex mutex;
    std::condition_variable cv;
    bool finished = false;
    std::thread watchdog([&] {
        std::unique_lock lock(mutex);
        while (!g_stop.load()) {
            if (cv.wait_for(lock, std::chrono::milliseconds(200), [&] { return finished; })) return;
        }
        const auto bound = stop_bound();
        if (cv.wait_for(lock, bound, [&] { return finished; })) return;
        trackd::core::log::error(
            "stop did not finish in time (a statement that does not return: a frozen PostgreSQL "
            "server?); exiting now. Nothing committed is lost: ingest reads the rest again from "
            "Kafka, the archive from the history table",
            {{"waited_s", std::to_string(bound.count())}});
        std::_Exit(1);
    });
    const auto finish = [&] {
        {
            const std::lock_guard lock(mutex);
            finished = true;
        }
        cv.notify_all();
        watchdog.join();
    };
    try {
        loop();
    } catch (...) {
        finish();
        throw;
    }
    finish();
}

int cmd_archive(const trackd::config::Config& config, const std::vector<std::string>& sub) {
    {
        auto conn = connect(config, "archive");
        trackd::db::check_schema(conn);
    }
    stop_on_signals();
    const bool once = std::find(sub.begin(), sub.end(), "--once") != sub.end();
    const bool maintain = std::find(sub.begin(), sub.end(), "maintain") != sub.end();
    trackd::archive::Archiver archiver(config);
    if (std::find(sub.begin(), sub.end(), "compact") != sub.end()) {
        const auto r = archiver.compact();
        fmt::print(
            "compaction: {} partitions, {} files rewritten into {} ({} rows); data files {} -> "
            "{}; at most {} small files in a partition\n",
            r.partitions, r.files_rewritten, r.files_written, r.rows, r.data_files_before,
            r.data_files_after, r.max_small_files_per_partition);
        return 0;
    }
    if (!once && !maintain) {
        with_stop_bound([&] { archiver.run(g_stop); });
        return 0;
    }
    if (!archiver.try_lock(std::chrono::seconds(5))) {
        fmt::print(stderr, "trackd: another archiver holds the lock of {}.{}; not archiving\n",
                   config.archive.namespace_, config.archive.table);
        return 3;
    }
    if (maintain) {
        const auto r = archiver.maintain();
        fmt::print(
            "maintenance: {} manifests merged, {} snapshots expired, {} files deleted, {} "
            "orphans deleted, {} uploads aborted, {} partitions dropped, {} ledger batches "
            "pruned\n",
            r.manifests_merged, r.snapshots_expired, r.files_deleted, r.orphans_deleted,
            r.uploads_aborted, r.partitions_dropped, r.batches_pruned);
        // The steps after a failed one ran; the command still fails, naming each that did.
        for (const auto& f : r.failures) {
            fmt::print(stderr, "trackd: archive maintenance step {} failed: {}\n", f.step, f.error);
        }
        return r.failures.empty() ? 0 : 1;
    }
    const auto r = archiver.archive_pending();
    fmt::print("archived {} rows in {} commits ({} files, {} bytes); archived_seq {}\n", r.rows,
               r.commits, r.files, r.bytes, r.archived_seq);
    return 0;
}

int cmd_run(const trackd::config::Config& config) {
    stop_on_signals();
    with_stop_bound([&] { trackd::pipeline::run(config, g_stop); });
    return 0;
}

// What runs after a command has returned: the destructors of main's objects (Arrow's S3
// subsystem among them), static destructors, atexit handlers and the libraries' finalisers
// (the AWS SDK's, jemalloc's background thread that Arrow's library starts). None has a bound of
// its own, and a process that never ends after "trackd stopped" holds its supervisor's restart.
// Past stop_bound() the process ends with the command's status: everything it did was done and
// stopped in order by then. The line goes straight to stderr: the logger may be gone.
void bound_the_exit(int status) {
    const auto bound = stop_bound();
    std::thread([status, bound] {
        std::this_thread::sleep_for(bound);
        const auto line = fmt::format(
            "trackd: the process's exit did not finish within {} s of the command's end (a "
            "library's finaliser that does not return?); ending it now with status {}\n",
            bound.count(), status);
        static_cast<void>(::write(STDERR_FILENO, line.data(), line.size()));
        std::_Exit(status);
    }).detach();
}

// TRACKD_TEST_HANG_IN_EXIT: an atexit handler that never returns, as a finaliser that hangs.
extern "C" void hang_in_exit() {
    for (;;) ::pause();
}

int dispatch(int argc, char** argv, int failure) {
    try {
        const Args args = parse_args(argc, argv);
        // Before the config and the database: a bad flag needs neither.
        const auto audit_options = args.command == "audit" ? trackd::audit::parse_options(args.sub)
                                                           : trackd::audit::Options{};
        if (args.command.empty() || args.command == "help") {
            std::fputs(kUsage.data(), args.command.empty() ? stderr : stdout);
            return args.command.empty() ? 2 : 0;
        }
        if (args.command == "version") {
            fmt::print("trackd {} (schema version {})\n", trackd::core::version(),
                       trackd::db::expected_schema_version());
            return 0;
        }
        const auto config =
            trackd::config::load(args.config_file, trackd::config::process_environment());
        trackd::core::log::configure(config.log.level, config.log.format);
        if (args.command == "check-config") {
            fmt::print("{}", trackd::config::to_masked_toml(config));
            return 0;
        }
        if (args.command == "migrate") return cmd_migrate(config);
        if (args.command == "run") return cmd_run(config);
        if (args.command == "archive") return cmd_archive(config, args.sub);
        if (args.command == "audit") return cmd_audit(config, audit_options);
        throw trackd::core::ConfigError(args.command, "unknown command (see trackd --help)");
    } catch (const trackd::core::ConfigError& e) {
        fmt::print(stderr, "trackd: configuration error: {}\n", e.what());
    } catch (const std::exception& e) {
        fmt::print(stderr, "trackd: {}\n", e.what());
    }
    return failure;
}

}  // namespace

int main(int argc, char** argv) {
    if (std::getenv("TRACKD_TEST_HANG_IN_EXIT") != nullptr) std::atexit(hang_in_exit);
    // Arrow's S3 subsystem, finalised after every archive object is gone (s3:// warehouses).
    const trackd::archive::ObjectStorageRuntime object_storage;
    const int status = dispatch(argc, argv, is_audit(argc, argv) ? 2 : 1);
    std::fflush(nullptr);  // what the command printed is out even if the exit is cut short
    bound_the_exit(status);
    return status;
}
