// trackd's typed configuration: one struct per area, with defaults.
//
// Contract: load() reads an optional TOML file, then environment variables
// TRACKD_<SECTION>_<KEY> (which win over the file), then validates. Any unknown key, wrong type
// or bad value throws core::ConfigError naming the key ("kafka.topic: must not be empty").
// The result is immutable by convention: main() loads it once and passes it by const reference.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace trackd::config {

struct KafkaConfig {
    std::string brokers = "127.0.0.1:59092";
    std::string topic = "vehicle-positions";
    std::string group = "trackd";
    std::string client_id = "trackd";
    // Passed through unchanged to librdkafka (security.protocol, sasl.*, ssl.*, ...).
    std::map<std::string, std::string> properties;
};

struct PgConfig {
    std::string dsn = "postgresql://postgres@127.0.0.1:55432/trackd";
    int connect_timeout_s = 10;
};

struct HttpConfig {
    bool enabled = true;
    std::string listen = "127.0.0.1:8080";
    int threads = 2;
};

struct BatchConfig {
    int max_rows = 20000;
    std::int64_t max_bytes = 16LL << 20;
    int max_ms = 500;
    // Upper bound on bytes read from Kafka but not yet committed; partitions pause above it.
    std::int64_t inflight_bytes = 256LL << 20;
    // Writer connections committing in parallel; partition p goes to writer p % writers.
    int writers = 2;
};

struct ValidateConfig {
    int max_future_skew_s = 300;
    std::int64_t max_age_s = 30LL * 24 * 3600;
    bool reject_null_island = true;
    double max_speed_kmh = 350.0;
    int max_vehicle_id_len = 64;
    int max_payload_bytes = 64 * 1024;
};

struct PostgisConfig {
    std::string partition_interval = "day";  // hour, day, week or month
    int partitions_ahead = 2;                // intervals created ahead of the newest row
};

struct LogConfig {
    std::string level = "info";   // debug, info, warn, error
    std::string format = "text";  // text or json
};

struct Config {
    KafkaConfig kafka;
    PgConfig pg;
    HttpConfig http;
    BatchConfig batch;
    ValidateConfig validate;
    PostgisConfig postgis;
    LogConfig log;
};

// Environment variables by name; injectable so that tests do not touch the process's.
using Environment = std::map<std::string, std::string>;

// The process's variables whose names start with TRACKD_.
Environment process_environment();

// Loads defaults, then `file` (if non-empty), then `env`, then validates.
// A variable TRACKD_<SECTION>_<KEY> whose section is known but whose key is not is an error;
// variables of unknown sections (TRACKD_LOCAL_DIR, ...) belong to other tools and are ignored.
Config load(const std::string& file, const Environment& env);

// Loads from TOML text instead of a file; `source_name` appears in parse errors.
Config load_from_string(const std::string& toml_text, const std::string& source_name,
                        const Environment& env);

// The effective configuration as TOML, with secrets (passwords in the DSN, secret-looking
// librdkafka properties) replaced by "****".
std::string to_masked_toml(const Config& config);

}  // namespace trackd::config
