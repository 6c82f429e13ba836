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
    // group.instance.id (Kafka static membership): a restart with the same id within the
    // session timeout keeps its partitions and causes no rebalance. Empty: dynamic membership.
    std::string instance_id;
    // Passed through unchanged to librdkafka (security.protocol, sasl.*, ssl.*, ...).
    std::map<std::string, std::string> properties;
    // Payload format (docs/ingest.md): "json", "protobuf" (trackd.v1.Position, plain or in the
    // Confluent wire format) or "auto" (Confluent-framed Protobuf when the first byte is 0,
    // JSON otherwise).
    std::string format = "json";
    // A Confluent-compatible schema registry, http[s]://host:port[/path] (Apicurio:
    // .../apis/ccompat/v7). Empty: framed messages are read without looking at their schema id.
    std::string schema_registry_url;
    // PEM file of the CAs an https registry's certificate is checked against (instead of the
    // system's trust store); empty: the system's.
    std::string schema_registry_ca_file;
    // Optional auth: HTTP basic (user + password) or a bearer token, not both.
    std::string schema_registry_user;
    std::string schema_registry_password;  // never logged or printed
    std::string schema_registry_token;     // never logged or printed
    // One registry request (connect, send, answer); a failed request is retried with backoff.
    int schema_registry_timeout_ms = 5000;
    // An id the registry did not know (404) is asked again after this long; meanwhile its
    // messages go to dead letters as unknown_schema.
    int schema_registry_unknown_retry_s = 60;
};

// Every PostgreSQL connection trackd opens gets these session limits, so that no wait on a
// dead or frozen peer is unbounded (docs/reliability.md).
struct PgConfig {
    std::string dsn = "postgresql://postgres@127.0.0.1:55432/trackd";
    int connect_timeout_s = 10;
    // lock_timeout: the longest any statement waits for a lock (0: no limit).
    int lock_timeout_ms = 10000;
    // idle_in_transaction_session_timeout: the server ends a session of trackd's that sits in
    // an open transaction this long (a frozen instance), which frees its locks (0: no limit).
    int idle_in_transaction_timeout_ms = 30000;
    // TCP keepalives on both ends (libpq and the server's tcp_keepalives_*) and the server's
    // tcp_user_timeout: a peer cut off the network is noticed within
    // idle + interval * count seconds.
    int keepalives_idle_s = 10;
    int keepalives_interval_s = 5;
    int keepalives_count = 3;
};

// A bearer token the HTTP API accepts. `write` implies `read`.
struct HttpToken {
    std::string scope;   // "read" or "write"
    std::string secret;  // the bearer token itself; never logged or printed
};

struct HttpConfig {
    bool enabled = true;
    std::string listen = "127.0.0.1:8080";
    // Event loops; a request waits for its query in its loop, not on the thread. On 2 cores
    // the API bench answered as many requests with 2 as with 4 (docs/benchmarks.md).
    int threads = 4;
    int max_header_bytes = 16 * 1024;  // request line + headers; above it: 431
    int max_body_bytes = 1024 * 1024;  // above it: 413
    int read_timeout_ms = 10000;       // from a request's first byte to its last
    int idle_timeout_ms = 60000;       // a keep-alive connection waiting for its next request
    int max_connections = 1000;        // open client connections; above it: 503 and close
    int statement_timeout_ms = 5000;   // per SQL statement (and for waiting on the pool): 503
    int pool_size = 4;                 // PostgreSQL connections of the API
    // Where the API reads (a streaming replica); empty: pg.dsn. Geofence writes always go to
    // pg.dsn, the primary.
    std::string pg_dsn;
    // /readyz answers 503 while the replica of pg_dsn replays more than this far behind what it
    // received (0: never); trackd_http_replica_lag_seconds shows the lag.
    int replica_max_lag_ms = 30000;
    int max_limit = 10000;           // the largest `limit` a request may ask for
    bool open_landing_pages = true;  // /, /conformance, /api, /collections without a token
    // [http.tokens] name = "read:SECRET" / TRACKD_HTTP_TOKENS_<NAME>; the name shows in logs.
    std::map<std::string, HttpToken> tokens;
};

struct BatchConfig {
    int max_rows = 20000;
    std::int64_t max_bytes = 16LL << 20;
    int max_ms = 500;
    int min_ms = 50;
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
    // Partitions older than this ("30 days", "12 hours", ...) are dropped by the archiver once
    // every row in them is in the Iceberg archive; empty keeps the history forever.
    std::string retention;
    // lock_timeout of partition DDL (create/attach, retention's drop): it needs an ACCESS
    // EXCLUSIVE lock, and while it waits every ingest COPY queues behind it. On timeout the DDL
    // is tried again later; rows go to the DEFAULT partition meanwhile.
    int ddl_lock_timeout_ms = 1000;
    // Open partitions get cheaper indexes (trackd.history_hot_indexes(): a hash on vehicle_id
    // instead of the btree, a BRIN on recorded_at) and their rows are written in a spatial
    // order; the btree is built (CREATE INDEX CONCURRENTLY, by trackd run) once a partition's
    // range ended index_grace_s ago (docs/ingest.md, "History index layout").
    bool defer_indexes = false;
    int index_grace_s = 300;
    // How often trackd run looks for partitions to close, summarizes the new BRIN ranges of the
    // partitions being written (V0017) and analyzes a new one (V0020). A time window reads the
    // ranges written since the last summary in full, so this bounds what a window at the tail
    // scans.
    int index_check_interval_s = 5;
};

// The Iceberg archive (docs/archive.md): history rows -> Parquet -> Iceberg v2 table.
struct ArchiveConfig {
    bool enabled = false;  // archive inside `trackd run`
    // Local directory (or file:// URI), or s3://bucket/prefix (object storage). With a REST
    // catalog, empty lets the catalog choose the table's location (its warehouse).
    std::string warehouse = "/var/lib/trackd/warehouse";
    // Object storage (s3:// warehouses, docs/archive.md); each empty string falls back to the
    // usual AWS environment variable (AWS_ENDPOINT_URL_S3/AWS_ENDPOINT_URL, AWS_REGION/
    // AWS_DEFAULT_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN).
    std::string s3_endpoint;           // "http://host:port" of an S3-compatible server
    std::string s3_region;             // default us-east-1
    bool s3_path_style = false;        // http://endpoint/bucket/key, not http://bucket.endpoint/key
    std::string s3_access_key_id;      // with s3_secret_access_key; none: the AWS default chain
    std::string s3_secret_access_key;  // masked in check-config
    std::string s3_session_token;      // masked in check-config
    int s3_retry_attempts = 6;         // per request, the first included
    int s3_retry_base_delay_ms = 100;  // doubled per retry (with jitter), at most 10 s
    int s3_timeout_ms = 30000;         // connect and request timeout of one S3 request
    std::string catalog_type = "jdbc";  // "jdbc" (tables in trackd's PostgreSQL) or "rest"
    std::string catalog = "trackd";     // catalog_name in the JDBC catalog tables
    // The Iceberg REST catalog (catalog_type = "rest"); names as PyIceberg's RestCatalog has them.
    std::string rest_uri;        // uri: "http[s]://host:8181" (the part before /v1)
    std::string rest_warehouse;  // warehouse: sent to GET /v1/config (Polaris: the catalog name)
    std::string rest_token;      // token: a static bearer token
    std::string
        rest_credential;  // credential: "client_id:client_secret" (OAuth2 client credentials)
    std::string rest_oauth2_uri;         // oauth2-server-uri: default <rest_uri>/v1/oauth/tokens
    std::string rest_scope = "catalog";  // scope of the OAuth2 token request
    // PEM file of the CAs an https catalog's (and OAuth2 server's) certificate is checked against,
    // instead of the system's trust store; empty: the system's.
    std::string rest_ca_file;
    // "vended-credentials": ask the catalog for the table's object storage credentials
    // (X-Iceberg-Access-Delegation) and use them instead of archive.s3_* and AWS_*; "": none.
    std::string rest_access_delegation;
    int rest_timeout_ms = 30000;        // one request's limit (connect, send, answer)
    std::string partition = "day";      // day(recorded_at) or hour(recorded_at), at creation
    std::string namespace_ = "trackd";  // [archive] namespace
    std::string table = "vehicle_positions";
    std::int64_t target_file_bytes = 128LL << 20;  // a commit as soon as this much is pending...
    int commit_interval_s = 120;        // ...or when the oldest pending batch is this old
    int poll_interval_ms = 1000;        // how often to look for committed batches
    int maintenance_interval_s = 3600;  // expire/merge/orphans inside `trackd run` (0: never)
    std::int64_t snapshot_max_age_s = 7LL * 24 * 3600;  // expire snapshots older than this...
    int min_snapshots_to_keep = 10;                     // ...but always keep the newest N
    int max_manifests = 8;  // merge the current snapshot's manifests when there are more
    std::int64_t orphan_min_age_s = 3LL * 24 * 3600;  // unreferenced files older than this go
    int metadata_versions_max = 20;                   // old metadata.json files kept
    // Compaction: a partition with at least compact_min_files data files under 3/4 of
    // target_file_bytes has them rewritten into target-sized files, every compaction_interval_s
    // inside the loop (0: only `trackd archive compact`).
    int compaction_interval_s = 3600;
    int compact_min_files = 8;
};

// GET /metrics (Prometheus text format). Empty listen: served on http.listen, unauthenticated;
// "host:port": served there only (with /healthz), e.g. on an address only Prometheus reaches.
struct MetricsConfig {
    std::string listen;
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
    ArchiveConfig archive;
    MetricsConfig metrics;
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
