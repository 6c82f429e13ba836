// trackd's entry point: parse the command line, load the config, run one command.
// Everything that can fail at start-up throws; this file turns that into one line and exit 1.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "trackd/config/config.hpp"
#include "trackd/core/error.hpp"
#include "trackd/core/log.hpp"
#include "trackd/core/version.hpp"
#include "trackd/db/connection.hpp"
#include "trackd/db/migrations.hpp"
#include "trackd/pipeline/ingest.hpp"

namespace {

constexpr std::string_view kUsage = R"(usage: trackd <command> [--config FILE]

commands:
  run            ingest from Kafka into PostGIS and serve the HTTP API
  migrate        apply the missing SQL migrations to the database
  check-config   print the effective configuration (secrets masked) and exit
  version        print the version and the schema version this build expects

Every setting can also be given as an environment variable TRACKD_<SECTION>_<KEY>,
e.g. TRACKD_KAFKA_BROKERS, TRACKD_KAFKA_TOPIC, TRACKD_PG_DSN, TRACKD_HTTP_LISTEN.
)";

struct Args {
    std::string command;
    std::string config_file;
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
        } else {
            throw trackd::core::ConfigError(v[i], "unknown argument (see trackd --help)");
        }
    }
    return args;
}

trackd::db::Connection connect(const trackd::config::Config& config, const char* role) {
    return trackd::db::Connection(config.pg.dsn, std::string("trackd ") + role,
                                  config.pg.connect_timeout_s);
}

int cmd_migrate(const trackd::config::Config& config) {
    auto conn = connect(config, "migrate");
    const auto report = trackd::db::migrate(conn);
    for (const auto& f : report.applied) trackd::core::log::info("applied", {{"file", f}});
    if (report.applied.empty()) {
        fmt::print("schema is up to date at version {}\n", report.version_after);
    } else {
        fmt::print("schema migrated from version {} to {} ({} file(s) applied)\n",
                   report.version_before, report.version_after, report.applied.size());
    }
    return 0;
}

std::atomic<bool> g_stop{false};

extern "C" void on_signal(int /*signal*/) { g_stop.store(true); }

int cmd_run(const trackd::config::Config& config) {
    {
        auto conn = connect(config, "run");
        trackd::db::check_schema(conn);
    }
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGINT, &sa, nullptr);
    trackd::core::log::info("trackd starting", {{"version", std::string(trackd::core::version())},
                                                {"topic", config.kafka.topic},
                                                {"group", config.kafka.group}});
    trackd::pipeline::run_ingest(config, g_stop);
    trackd::core::log::info("trackd stopped");
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        const Args args = parse_args(argc, argv);
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
        throw trackd::core::ConfigError(args.command, "unknown command (see trackd --help)");
    } catch (const trackd::core::ConfigError& e) {
        fmt::print(stderr, "trackd: configuration error: {}\n", e.what());
    } catch (const std::exception& e) {
        fmt::print(stderr, "trackd: {}\n", e.what());
    }
    return 1;
}
