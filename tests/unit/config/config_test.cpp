#include "trackd/config/config.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

#include "trackd/core/error.hpp"

#include "support/process.hpp"

namespace trackd::config {
namespace {

using core::ConfigError;

std::string error_of(const std::string& toml, const Environment& env = {}) {
    try {
        load_from_string(toml, "test.toml", env);
    } catch (const ConfigError& e) {
        return e.what();
    }
    return "(no error)";
}

// pg.dsn as check-config prints it: the TOML string, quotes included.
std::string printed_dsn(const std::string& dsn) {
    const auto text = to_masked_toml(load_from_string("", "test.toml", {{"TRACKD_PG_DSN", dsn}}));
    const auto start = text.find("\ndsn = ") + 7;
    return text.substr(start, text.find('\n', start) - start);
}

TEST(Config, DefaultsAreValid) {
    const auto c = load_from_string("", "test.toml", {});
    EXPECT_EQ(c.kafka.topic, "vehicle-positions");
    EXPECT_EQ(c.batch.max_rows, 20000);
    EXPECT_EQ(c.batch.min_ms, 50);
    EXPECT_EQ(c.postgis.partition_interval, "day");
}

TEST(Config, FileValuesAreRead) {
    const auto c = load_from_string(R"(
[kafka]
brokers = "k1:9092,k2:9092"
topic = "positions"
[kafka.properties]
"security.protocol" = "SASL_SSL"
"sasl.password" = "hunter2"
"fetch.wait.max.ms" = 50
[batch]
max_rows = 5000
[validate]
max_speed_kmh = 200
)",
                                    "test.toml", {});
    EXPECT_EQ(c.kafka.brokers, "k1:9092,k2:9092");
    EXPECT_EQ(c.kafka.topic, "positions");
    EXPECT_EQ(c.kafka.properties.at("security.protocol"), "SASL_SSL");
    EXPECT_EQ(c.kafka.properties.at("fetch.wait.max.ms"), "50");
    EXPECT_EQ(c.batch.max_rows, 5000);
    EXPECT_DOUBLE_EQ(c.validate.max_speed_kmh, 200.0);
}

TEST(Config, EnvironmentWinsOverFile) {
    const auto c = load_from_string("[kafka]\ntopic = \"from-file\"\n", "test.toml",
                                    {{"TRACKD_KAFKA_TOPIC", "from-env"},
                                     {"TRACKD_BATCH_MAX_MS", "250"},
                                     {"TRACKD_HTTP_ENABLED", "false"},
                                     {"TRACKD_KAFKA_PROPERTIES_SASL_MECHANISM", "PLAIN"}});
    EXPECT_EQ(c.kafka.topic, "from-env");
    EXPECT_EQ(c.batch.max_ms, 250);
    EXPECT_FALSE(c.http.enabled);
    EXPECT_EQ(c.kafka.properties.at("sasl.mechanism"), "PLAIN");
}

TEST(Config, TheFiveBasicVariablesSufficeWithoutAFile) {
    const auto c = load("", {{"TRACKD_KAFKA_BROKERS", "b:1"},
                             {"TRACKD_KAFKA_TOPIC", "t"},
                             {"TRACKD_KAFKA_GROUP", "g"},
                             {"TRACKD_PG_DSN", "postgresql://u@h/d"},
                             {"TRACKD_HTTP_LISTEN", "0.0.0.0:9000"}});
    EXPECT_EQ(c.kafka.brokers, "b:1");
    EXPECT_EQ(c.kafka.group, "g");
    EXPECT_EQ(c.pg.dsn, "postgresql://u@h/d");
    EXPECT_EQ(c.http.listen, "0.0.0.0:9000");
}

TEST(Config, ErrorsNameTheKey) {
    EXPECT_EQ(error_of("[kafka]\ntopik = \"x\"\n"), "kafka.topik: unknown key");
    EXPECT_NE(error_of("[kafkaa]\n").find("kafkaa: unknown section"), std::string::npos);
    EXPECT_EQ(error_of("[batch]\nmax_rows = \"many\"\n"), "batch.max_rows: expected an integer");
    EXPECT_EQ(error_of("[batch]\nmax_rows = 0\n"), "batch.max_rows: must be at least 1");
    EXPECT_EQ(error_of("[batch]\nmin_ms = -1\n"),
              "batch.min_ms: must be between 0 and 600000 (above batch.max_ms it acts as "
              "batch.max_ms)");
    EXPECT_NE(error_of("[postgis]\npartition_interval = \"fortnight\"\n")
                  .find("postgis.partition_interval: 'fortnight' is not one of"),
              std::string::npos);
    EXPECT_NE(error_of("[http]\nlisten = \"nowhere\"\n").find("http.listen:"), std::string::npos);
    EXPECT_NE(error_of("[kafka.properties]\n\"enable.auto.commit\" = \"true\"\n")
                  .find("kafka.properties.enable.auto.commit: must stay false"),
              std::string::npos);
    EXPECT_NE(error_of("[kafka\n").find("test.toml:1:"), std::string::npos);
}

TEST(Config, DeferredHistoryIndexes) {
    const auto d = trackd::config::load_from_string("", "test.toml", {});
    EXPECT_FALSE(d.postgis.defer_indexes);
    EXPECT_EQ(d.postgis.index_grace_s, 300);
    EXPECT_EQ(d.postgis.index_check_interval_s, 5);
    const auto c = trackd::config::load_from_string(
        "[postgis]\ndefer_indexes = true\nindex_grace_s = 0\nindex_check_interval_s = 60\n",
        "test.toml", {});
    EXPECT_TRUE(c.postgis.defer_indexes);
    EXPECT_EQ(c.postgis.index_grace_s, 0);
    EXPECT_EQ(c.postgis.index_check_interval_s, 60);
    EXPECT_EQ(error_of("[postgis]\nindex_grace_s = -1\n"),
              "postgis.index_grace_s: must not be negative");
    EXPECT_EQ(error_of("[postgis]\nindex_check_interval_s = 0\n"),
              "postgis.index_check_interval_s: must be at least 1");
}

TEST(Config, SessionLimitsAndStaticMembership) {
    const auto c = trackd::config::load_from_string(
        "[kafka]\ninstance_id = \"host-a\"\n[pg]\nlock_timeout_ms = 2500\n"
        "idle_in_transaction_timeout_ms = 0\nkeepalives_idle_s = 4\n"
        "[postgis]\nddl_lock_timeout_ms = 200\n",
        "test.toml", {});
    EXPECT_EQ(c.kafka.instance_id, "host-a");
    EXPECT_EQ(c.pg.lock_timeout_ms, 2500);
    EXPECT_EQ(c.pg.idle_in_transaction_timeout_ms, 0);
    EXPECT_EQ(c.pg.keepalives_idle_s, 4);
    EXPECT_EQ(c.pg.keepalives_interval_s, 5);
    EXPECT_EQ(c.postgis.ddl_lock_timeout_ms, 200);
    EXPECT_EQ(error_of("[pg]\nlock_timeout_ms = -1\n"),
              "pg.lock_timeout_ms: must be between 0 (no limit) and 3600000");
    EXPECT_EQ(error_of("[pg]\nidle_in_transaction_timeout_ms = 10\n"),
              "pg.idle_in_transaction_timeout_ms: must be 0 (no limit) or between 1000 and "
              "3600000");
    EXPECT_EQ(error_of("[postgis]\nddl_lock_timeout_ms = 0\n"),
              "postgis.ddl_lock_timeout_ms: must be between 10 and 600000");
    // Properties trackd sets from its own keys would be ignored: each names its key.
    EXPECT_EQ(error_of("[kafka.properties]\n\"group.instance.id\" = \"x\"\n"),
              "kafka.properties.group.instance.id: set it with kafka.instance_id instead");
    EXPECT_EQ(error_of("[kafka.properties]\n\"client.id\" = \"x\"\n"),
              "kafka.properties.client.id: set it with kafka.client_id instead");
    EXPECT_EQ(error_of("", {{"TRACKD_KAFKA_PROPERTIES_BOOTSTRAP_SERVERS", "h:1"}}),
              "kafka.properties.bootstrap.servers: set it with kafka.brokers instead");
}

TEST(Config, EnvironmentErrorsNameTheVariable) {
    EXPECT_EQ(error_of("", {{"TRACKD_KAFKA_TOPIC", ""}}), "kafka.topic: must not be empty");
    EXPECT_EQ(error_of("", {{"TRACKD_KAFKA_TOPC", "x"}}),
              "TRACKD_KAFKA_TOPC: unknown setting in section [kafka]");
    EXPECT_EQ(error_of("", {{"TRACKD_BATCH_MAX_ROWS", "lots"}}),
              "batch.max_rows (from TRACKD_BATCH_MAX_ROWS): expected an integer, got 'lots'");
    // Variables of sections trackd does not have belong to other tools.
    EXPECT_EQ(error_of("", {{"TRACKD_LOCAL_DIR", "/tmp"}}), "(no error)");
}

TEST(Config, MaskedOutputHidesSecrets) {
    const auto c = load_from_string(R"(
[pg]
dsn = "postgresql://trackd:s3cret@db:5432/trackd"
[kafka.properties]
"sasl.password" = "hunter2"
"client.rack" = "r1"
)",
                                    "test.toml", {});
    const auto text = to_masked_toml(c);
    EXPECT_EQ(text.find("s3cret"), std::string::npos);
    EXPECT_EQ(text.find("hunter2"), std::string::npos);
    EXPECT_NE(text.find("postgresql://trackd:****@db:5432/trackd"), std::string::npos);
    EXPECT_NE(text.find("\"client.rack\" = \"r1\""), std::string::npos);
    // The printed config is itself a valid config that loads to the same values.
    const auto again = load_from_string(text, "printed.toml", {});
    EXPECT_EQ(again.kafka.topic, c.kafka.topic);
    EXPECT_EQ(again.batch.inflight_bytes, c.batch.inflight_bytes);
}

// libpq reads "key = value" with spaces around '=', and single-quoted values with \' and \\ in
// them: check-config masks the whole password in each, as in a URI's userinfo and parameters.
TEST(Config, DsnPasswordsAreMaskedInEveryFormLibpqReads) {
    EXPECT_EQ(printed_dsn("host=db password=hunter2 dbname=trackd"),
              "\"host=db password=**** dbname=trackd\"");
    EXPECT_EQ(printed_dsn("host=db password = hunter2 dbname=trackd"),
              "\"host=db password = **** dbname=trackd\"");
    EXPECT_EQ(printed_dsn("host=db password= hunter2"), "\"host=db password= ****\"");
    EXPECT_EQ(printed_dsn("host=db password ='hunter 2 x' user=u"),
              "\"host=db password =**** user=u\"");
    EXPECT_EQ(printed_dsn(R"(password='it\'s a \\ secret' host=db)"), "\"password=**** host=db\"");
    EXPECT_EQ(printed_dsn(R"(password=hunter\ 2 host=db)"), "\"password=**** host=db\"");
    EXPECT_EQ(printed_dsn("host=db sslpassword = 'key pass' sslmode=require"),
              "\"host=db sslpassword = **** sslmode=require\"");
    EXPECT_EQ(printed_dsn("host=db password='never closed"), "\"host=db password=****\"");
    EXPECT_EQ(printed_dsn("host=db passfile=/etc/trackd/pgpass user=u"),
              "\"host=db passfile=/etc/trackd/pgpass user=u\"");
    EXPECT_EQ(
        printed_dsn("postgresql://trackd:s3cret@db:5432/trackd?sslpassword=kp&sslmode=require"),
        "\"postgresql://trackd:****@db:5432/trackd?sslpassword=****&sslmode=require\"");
    EXPECT_EQ(printed_dsn("postgresql://db?user=u&password=pw"),
              "\"postgresql://db?user=u&password=****\"");
    EXPECT_EQ(printed_dsn("postgresql://db/trackd?%70assword=pw"),
              "\"postgresql://db/trackd?%70assword=****\"");
    EXPECT_EQ(printed_dsn("postgresql://u:p?w#d@db/trackd"), "\"postgresql://u:****@db/trackd\"");
    // The printed configuration still loads.
    const auto spaced =
        load_from_string("", "test.toml", {{"TRACKD_PG_DSN", "host=db password = 'a b' user=u"}});
    EXPECT_EQ(load_from_string(to_masked_toml(spaced), "printed.toml", {}).pg.dsn,
              "host=db password = **** user=u");
}

// The binary itself: `trackd check-config` exits non-zero naming the key.
TEST(CheckConfigCommand, EmptyTopicFromEnvironment) {
    const auto r =
        test::run_command("env TRACKD_KAFKA_TOPIC= " + test::trackd_binary() + " check-config");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.output.find("kafka.topic"), std::string::npos) << r.output;
}

TEST(CheckConfigCommand, UnknownKeyInFile) {
    const std::string path = ::testing::TempDir() + "trackd_bad.toml";
    {
        std::FILE* f = std::fopen(path.c_str(), "w");
        ASSERT_NE(f, nullptr);
        std::fputs("[batch]\nmax_rowz = 10\n", f);
        std::fclose(f);
    }
    const auto r = test::run_command(test::trackd_binary() + " check-config --config " + path);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.output.find("batch.max_rowz: unknown key"), std::string::npos) << r.output;
}

TEST(CheckConfigCommand, PrintsEffectiveConfigMasked) {
    const auto r =
        test::run_command("env TRACKD_PG_DSN=postgresql://u:pw@h/d TRACKD_KAFKA_TOPIC=abc " +
                          test::trackd_binary() + " check-config");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("topic = \"abc\""), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("postgresql://u:****@h/d"), std::string::npos) << r.output;
}

TEST(CheckConfigCommand, MasksSpacedAndQuotedDsnPasswords) {
    const auto r = test::run_command(
        "env 'TRACKD_PG_DSN=host=db password = hunter2' "
        "\"TRACKD_HTTP_PG_DSN=host=replica password='hunter 3'\" " +
        test::trackd_binary() + " check-config");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(r.output.find("hunter"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("dsn = \"host=db password = ****\""), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("pg_dsn = \"host=replica password=****\""), std::string::npos)
        << r.output;
}

TEST(ArchiveConfig, DefaultsFileAndEnvironment) {
    const auto d = load_from_string("", "test.toml", {});
    EXPECT_FALSE(d.archive.enabled);
    EXPECT_EQ(d.archive.namespace_, "trackd");
    EXPECT_EQ(d.archive.table, "vehicle_positions");
    EXPECT_EQ(d.archive.target_file_bytes, 128LL << 20);
    EXPECT_EQ(d.archive.commit_interval_s, 120);
    EXPECT_TRUE(d.postgis.retention.empty());

    const auto c = load_from_string(
        R"(
[archive]
enabled = true
warehouse = "/data/wh"
namespace = "fleet"
table = "positions"
target_file_bytes = 1048576
snapshot_max_age_s = 3600
[postgis]
retention = "30 days"
)",
        "test.toml",
        {{"TRACKD_ARCHIVE_COMMIT_INTERVAL_S", "15"}, {"TRACKD_ARCHIVE_MAX_MANIFESTS", "3"}});
    EXPECT_TRUE(c.archive.enabled);
    EXPECT_EQ(c.archive.warehouse, "/data/wh");
    EXPECT_EQ(c.archive.namespace_, "fleet");
    EXPECT_EQ(c.archive.table, "positions");
    EXPECT_EQ(c.archive.target_file_bytes, 1048576);
    EXPECT_EQ(c.archive.snapshot_max_age_s, 3600);
    EXPECT_EQ(c.archive.commit_interval_s, 15);
    EXPECT_EQ(c.archive.max_manifests, 3);
    EXPECT_EQ(c.postgis.retention, "30 days");
}

TEST(ArchiveConfig, RestCatalogKeysAndMaskedSecrets) {
    const auto d = load_from_string("", "test.toml", {});
    EXPECT_EQ(d.archive.catalog_type, "jdbc");
    EXPECT_EQ(d.archive.partition, "day");
    EXPECT_EQ(d.archive.rest_scope, "catalog");
    const auto c = load_from_string(R"(
[archive]
catalog_type = "rest"
rest_uri = "http://polaris:8181/api/catalog"
rest_warehouse = "fleet"
rest_credential = "trackd-archiver:s3cret-value"
rest_scope = "PRINCIPAL_ROLE:ALL"
warehouse = ""
partition = "hour"
)",
                                    "test.toml", {{"TRACKD_ARCHIVE_REST_TIMEOUT_MS", "5000"}});
    EXPECT_EQ(c.archive.catalog_type, "rest");
    EXPECT_EQ(c.archive.rest_uri, "http://polaris:8181/api/catalog");
    EXPECT_EQ(c.archive.rest_warehouse, "fleet");
    EXPECT_EQ(c.archive.rest_scope, "PRINCIPAL_ROLE:ALL");
    EXPECT_EQ(c.archive.rest_timeout_ms, 5000);
    EXPECT_EQ(c.archive.partition, "hour");
    EXPECT_TRUE(c.archive.warehouse.empty());
    auto text = to_masked_toml(c);
    EXPECT_EQ(text.find("s3cret-value"), std::string::npos) << text;
    EXPECT_NE(text.find("rest_credential = \"trackd-archiver:****\""), std::string::npos) << text;
    const auto t = load_from_string("", "test.toml",
                                    {{"TRACKD_ARCHIVE_CATALOG_TYPE", "rest"},
                                     {"TRACKD_ARCHIVE_REST_URI", "http://cat:8181"},
                                     {"TRACKD_ARCHIVE_REST_TOKEN", "bearer-secret"}});
    text = to_masked_toml(t);
    EXPECT_EQ(text.find("bearer-secret"), std::string::npos) << text;
    EXPECT_NE(text.find("rest_token = \"****\""), std::string::npos) << text;
}

TEST(ArchiveConfig, ErrorsNameTheKey) {
    EXPECT_EQ(error_of("[archive]\ntable = \"a.b\"\n"),
              "archive.table: 'a.b' must be 1..255 characters of A-Z a-z 0-9 _ -");
    EXPECT_EQ(error_of("[archive]\ntarget_file_bytes = 10\n"),
              "archive.target_file_bytes: must be between 1024 and 8589934592");
    EXPECT_EQ(error_of("[archive]\ncommit_interval_s = 0\n"),
              "archive.commit_interval_s: must be between 1 and 86400");
    EXPECT_EQ(error_of("[archive]\nmin_snapshots_to_keep = 0\n"),
              "archive.min_snapshots_to_keep: must be at least 1");
    EXPECT_EQ(error_of("[archive]\nwarehouse = \"\"\n"),
              "archive.warehouse: must not be empty with the JDBC catalog (only a REST catalog "
              "chooses a location)");
    EXPECT_EQ(error_of("[archive]\ncatalog_type = \"hive\"\n"),
              "archive.catalog_type: 'hive' is not one of jdbc, rest");
    EXPECT_EQ(error_of("[archive]\ncatalog_type = \"rest\"\n"),
              "archive.rest_uri: must be set when archive.catalog_type = \"rest\"");
    EXPECT_EQ(error_of("[archive]\ncatalog_type = \"rest\"\nrest_uri = \"ftp://cat\"\n"),
              "archive.rest_uri: 'ftp://cat' is not an http:// or https:// URI");
    EXPECT_EQ(error_of("[archive]\ncatalog_type = \"rest\"\nrest_uri = \"http://cat\"\n"
                       "rest_oauth2_uri = \"cat/token\"\n"),
              "archive.rest_oauth2_uri: 'cat/token' is not an http:// or https:// URI");
    EXPECT_EQ(error_of("[archive]\ncatalog_type = \"rest\"\nrest_uri = \"http://cat\"\n"
                       "rest_credential = \"nocolon\"\n"),
              "archive.rest_credential: must be \"client_id:client_secret\"");
    EXPECT_EQ(error_of("[archive]\ncatalog_type = \"rest\"\nrest_uri = \"http://cat\"\n"
                       "rest_credential = \"a:b\"\nrest_token = \"t\"\n"),
              "archive.rest_token: set either archive.rest_token or archive.rest_credential, not "
              "both");
    EXPECT_EQ(error_of("[archive]\npartition = \"week\"\n"),
              "archive.partition: 'week' is not one of day, hour");
    EXPECT_EQ(error_of("[archive]\nbogus = 1\n"), "archive.bogus: unknown key");
    EXPECT_EQ(error_of("", {{"TRACKD_POSTGIS_RETENTION", "forever"}}),
              "postgis.retention: 'forever' is not '<N> hours', '<N> days', '<N> weeks' or "
              "'<N> months'");
    EXPECT_EQ(error_of("", {{"TRACKD_ARCHIVE_ENABLED", "maybe"}}),
              "archive.enabled (from TRACKD_ARCHIVE_ENABLED): expected true or false, got 'maybe'");
}

TEST(ArchiveConfig, ObjectStorageKeysAndMaskedSecrets) {
    const auto d = load_from_string("", "test.toml", {});
    EXPECT_TRUE(d.archive.s3_endpoint.empty());
    EXPECT_FALSE(d.archive.s3_path_style);
    EXPECT_EQ(d.archive.s3_retry_attempts, 6);
    EXPECT_EQ(d.archive.s3_retry_base_delay_ms, 100);
    EXPECT_EQ(d.archive.s3_timeout_ms, 30000);
    const auto c =
        load_from_string(R"(
[archive]
warehouse = "s3://fleet-archive/trackd/prod"
s3_endpoint = "http://127.0.0.1:9000"
s3_region = "eu-central-1"
s3_path_style = true
s3_access_key_id = "AKIDEXAMPLE"
s3_retry_attempts = 3
s3_timeout_ms = 2000
)",
                         "test.toml",
                         {{"TRACKD_ARCHIVE_S3_SECRET_ACCESS_KEY", "wJalrXUtnFEMI-secret"},
                          {"TRACKD_ARCHIVE_S3_SESSION_TOKEN", "session-secret"}});
    EXPECT_EQ(c.archive.warehouse, "s3://fleet-archive/trackd/prod");
    EXPECT_EQ(c.archive.s3_endpoint, "http://127.0.0.1:9000");
    EXPECT_EQ(c.archive.s3_region, "eu-central-1");
    EXPECT_TRUE(c.archive.s3_path_style);
    EXPECT_EQ(c.archive.s3_secret_access_key, "wJalrXUtnFEMI-secret");
    EXPECT_EQ(c.archive.s3_retry_attempts, 3);
    EXPECT_EQ(c.archive.s3_timeout_ms, 2000);
    const auto text = to_masked_toml(c);
    EXPECT_EQ(text.find("wJalrXUtnFEMI-secret"), std::string::npos) << text;
    EXPECT_EQ(text.find("session-secret"), std::string::npos) << text;
    EXPECT_NE(text.find("s3_secret_access_key = \"****\""), std::string::npos) << text;
    EXPECT_NE(text.find("s3_access_key_id = \"AKIDEXAMPLE\""), std::string::npos) << text;
}

TEST(ArchiveConfig, ObjectStorageErrorsNameTheKey) {
    EXPECT_EQ(error_of("[archive]\nwarehouse = \"s3://\"\n"),
              "archive.warehouse: 's3://' is not a local path, a file:// URI or "
              "s3://bucket/prefix (a bucket name is 3..63 characters of a-z 0-9 . -)");
    EXPECT_EQ(error_of("[archive]\nwarehouse = \"s3://Bad_Bucket/x\"\n"),
              "archive.warehouse: 's3://Bad_Bucket/x' is not a local path, a file:// URI or "
              "s3://bucket/prefix (a bucket name is 3..63 characters of a-z 0-9 . -)");
    EXPECT_EQ(error_of("[archive]\nwarehouse = \"gs://bucket/x\"\n"),
              "archive.warehouse: 'gs://bucket/x' is not a local path, a file:// URI or "
              "s3://bucket/prefix (a bucket name is 3..63 characters of a-z 0-9 . -)");
    EXPECT_EQ(error_of("[archive]\ns3_endpoint = \"127.0.0.1:9000\"\n"),
              "archive.s3_endpoint: '127.0.0.1:9000' is not http://host[:port] or "
              "https://host[:port]");
    EXPECT_EQ(error_of("[archive]\ns3_access_key_id = \"AKID\"\n"),
              "archive.s3_secret_access_key: set both archive.s3_access_key_id and "
              "archive.s3_secret_access_key, or neither");
    EXPECT_EQ(error_of("[archive]\ns3_session_token = \"t\"\n"),
              "archive.s3_session_token: needs archive.s3_access_key_id and "
              "archive.s3_secret_access_key");
    EXPECT_EQ(error_of("[archive]\ns3_retry_attempts = 0\n"),
              "archive.s3_retry_attempts: must be between 1 and 20");
    EXPECT_EQ(error_of("[archive]\ns3_retry_base_delay_ms = 0\n"),
              "archive.s3_retry_base_delay_ms: must be between 1 and 10000");
    EXPECT_EQ(error_of("[archive]\ns3_timeout_ms = 5\n"),
              "archive.s3_timeout_ms: must be between 100 and 600000");
    EXPECT_EQ(error_of("", {{"TRACKD_ARCHIVE_S3_PATH_STYLE", "yes"}}),
              "archive.s3_path_style (from TRACKD_ARCHIVE_S3_PATH_STYLE): expected true or false, "
              "got 'yes'");
}

// The archiver takes the ages in milliseconds, and in nanoseconds from the storage's clock: a
// value whose product wraps would put the cut-off at about now, and maintenance would expire
// every snapshot, delete every unreferenced file and abort every upload. 100 years at most.
TEST(ArchiveConfig, AgesAreAtMost100Years) {
    const auto c =
        load_from_string("[archive]\nsnapshot_max_age_s = 3155760000\norphan_min_age_s = 0\n",
                         "test.toml", {{"TRACKD_ARCHIVE_ORPHAN_MIN_AGE_S", "3155760000"}});
    EXPECT_EQ(c.archive.snapshot_max_age_s, 3155760000);
    EXPECT_EQ(c.archive.orphan_min_age_s, 3155760000);
    for (const std::string key : {"snapshot_max_age_s", "orphan_min_age_s"}) {
        const std::string problem =
            "archive." + key + ": must be between 0 and 3155760000 (100 years)";
        for (const char* value : {"3155760001", "15000000000", "9223372036854775807", "-1"}) {
            EXPECT_EQ(error_of("[archive]\n" + key + " = " + value + "\n"), problem) << value;
        }
    }
    EXPECT_EQ(error_of("", {{"TRACKD_ARCHIVE_SNAPSHOT_MAX_AGE_S", "9223372036854775807"}}),
              "archive.snapshot_max_age_s: must be between 0 and 3155760000 (100 years)");
}

// now() - retention must stay after 4713 BC, PostgreSQL's earliest timestamp, or every
// maintenance run fails: 1000 years at most, in each unit.
TEST(ArchiveConfig, RetentionIsAtMost1000Years) {
    for (const char* ok :
         {"999999 hours", "365250 days", "52178 weeks", "12000 months", "1 month"}) {
        EXPECT_EQ(
            load_from_string("", "test.toml", {{"TRACKD_POSTGIS_RETENTION", ok}}).postgis.retention,
            ok);
    }
    EXPECT_EQ(error_of("[postgis]\nretention = \"12001 months\"\n"),
              "postgis.retention: '12001 months' is more than 1000 years (at most 12000 months)");
    EXPECT_EQ(error_of("[postgis]\nretention = \"999999 months\"\n"),
              "postgis.retention: '999999 months' is more than 1000 years (at most 12000 months)");
    EXPECT_EQ(error_of("[postgis]\nretention = \"52179 weeks\"\n"),
              "postgis.retention: '52179 weeks' is more than 1000 years (at most 52178 weeks)");
    EXPECT_EQ(error_of("", {{"TRACKD_POSTGIS_RETENTION", "365251 day"}}),
              "postgis.retention: '365251 day' is more than 1000 years (at most 365250 days)");
}

// With the JDBC catalog a REST catalog's key would do nothing: start-up stops naming it. A key
// with a default counts as set when it differs from it, so check-config's output still loads.
TEST(ArchiveConfig, RestKeysNeedTheRestCatalog) {
    for (const auto& [key, value] : std::vector<std::pair<std::string, std::string>>{
             {"rest_uri", "\"http://cat:8181\""},
             {"rest_warehouse", "\"fleet\""},
             {"rest_token", "\"bearer-secret\""},
             {"rest_credential", "\"id:secret\""},
             {"rest_oauth2_uri", "\"https://idp.example/token\""},
             {"rest_scope", "\"PRINCIPAL_ROLE:ALL\""},
             {"rest_timeout_ms", "5000"}}) {
        EXPECT_EQ(error_of("[archive]\n" + key + " = " + value + "\n"),
                  "archive." + key + ": is only used with archive.catalog_type = \"rest\"");
    }
    EXPECT_EQ(error_of("", {{"TRACKD_ARCHIVE_REST_URI", "http://cat:8181"}}),
              "archive.rest_uri: is only used with archive.catalog_type = \"rest\"");
    EXPECT_EQ(error_of("[archive]\ncatalog_type = \"jdbc\"\nrest_token = \"t\"\n"),
              "archive.rest_token: is only used with archive.catalog_type = \"rest\"");
    EXPECT_EQ(error_of("[archive]\nrest_uri = \"\"\nrest_scope = \"catalog\"\n"
                       "rest_timeout_ms = 30000\n"),
              "(no error)");
    const auto c = load_from_string(R"(
[archive]
catalog_type = "rest"
rest_uri = "http://cat:8181"
rest_warehouse = "fleet"
rest_token = "bearer-secret"
rest_oauth2_uri = "https://idp.example/token"
rest_scope = "PRINCIPAL_ROLE:ALL"
rest_timeout_ms = 5000
)",
                                    "test.toml", {});
    EXPECT_EQ(c.archive.rest_uri, "http://cat:8181");
    EXPECT_EQ(c.archive.rest_warehouse, "fleet");
    EXPECT_EQ(c.archive.rest_token, "bearer-secret");
    EXPECT_EQ(c.archive.rest_oauth2_uri, "https://idp.example/token");
    EXPECT_EQ(c.archive.rest_scope, "PRINCIPAL_ROLE:ALL");
    EXPECT_EQ(c.archive.rest_timeout_ms, 5000);
}

TEST(HttpConfig, LimitsAndTokensFromFileAndEnvironment) {
    const auto c = load_from_string(R"(
[http]
max_body_bytes = 2048
statement_timeout_ms = 250
open_landing_pages = false
[http.tokens]
dashboard = "read:dash-0123456789abcdef"
)",
                                    "test.toml",
                                    {{"TRACKD_HTTP_TOKENS_OPS_TEAM", "write:ops-0123456789abcdef"},
                                     {"TRACKD_HTTP_POOL_SIZE", "8"}});
    EXPECT_EQ(c.http.max_body_bytes, 2048);
    EXPECT_EQ(c.http.statement_timeout_ms, 250);
    EXPECT_EQ(c.http.pool_size, 8);
    EXPECT_FALSE(c.http.open_landing_pages);
    ASSERT_EQ(c.http.tokens.size(), 2U);
    EXPECT_EQ(c.http.tokens.at("dashboard").scope, "read");
    EXPECT_EQ(c.http.tokens.at("dashboard").secret, "dash-0123456789abcdef");
    EXPECT_EQ(c.http.tokens.at("ops_team").scope, "write");
    EXPECT_EQ(c.http.tokens.at("ops_team").secret, "ops-0123456789abcdef");
}

// A token set in the environment replaces the file's token it spells (upper case, '_' for '-'),
// so that rotating a secret leaves the old one working nowhere.
TEST(HttpConfig, AnEnvironmentTokenReplacesTheFileTokenItSpells) {
    const auto c = load_from_string(
        R"(
[http.tokens]
Ops-Team = "write:old-0123456789abcdef"
Dashboard = "read:dash-0123456789abcdef"
)",
        "test.toml", {{"TRACKD_HTTP_TOKENS_OPS_TEAM", "write:new-0123456789abcdef"}});
    ASSERT_EQ(c.http.tokens.size(), 2U);
    EXPECT_EQ(c.http.tokens.at("Ops-Team").secret, "new-0123456789abcdef");
    EXPECT_EQ(c.http.tokens.at("Dashboard").secret, "dash-0123456789abcdef");
    EXPECT_EQ(error_of("[http.tokens]\nops-team = \"read:a-0123456789abcdef\"\n"
                       "ops_team = \"read:b-0123456789abcdef\"\n",
                       {{"TRACKD_HTTP_TOKENS_OPS_TEAM", "write:new-0123456789abcdef"}}),
              "TRACKD_HTTP_TOKENS_OPS_TEAM: spells both [http.tokens] ops-team and ops_team; "
              "rename one of them");
}

TEST(HttpConfig, ErrorsNameTheKey) {
    EXPECT_EQ(error_of("[http]\nmax_limit = 0\n"), "http.max_limit: must be between 1 and 1000000");
    EXPECT_EQ(error_of("[http]\nstatement_timeout_ms = 5\n"),
              "http.statement_timeout_ms: must be between 10 and 600000");
    EXPECT_EQ(error_of("[http]\nmax_header_bytes = 100\n"),
              "http.max_header_bytes: must be between 1024 and 1048576");
    EXPECT_EQ(error_of("[http]\npool_size = \"many\"\n"), "http.pool_size: expected an integer");
    EXPECT_EQ(error_of("[http.tokens]\nx = \"admin:0123456789abcdefgh\"\n"),
              "http.tokens.x: scope 'admin' is not read or write");
    EXPECT_EQ(error_of("[http.tokens]\nx = \"read:short\"\n"),
              "http.tokens.x: the token must be at least 16 characters");
    EXPECT_EQ(error_of("[http.tokens]\nx = \"0123456789abcdefgh\"\n"),
              "http.tokens.x: expected \"read:<token>\" or \"write:<token>\"");
    EXPECT_EQ(error_of("[http.tokens]\nx = \"read:0123456789 abcdefgh\"\n"),
              "http.tokens.x: the token may hold only A-Z a-z 0-9 - . _ ~ + / =");
    EXPECT_EQ(error_of("[http.tokens]\nx = 5\n"),
              "http.tokens.x: expected a string \"scope:token\"");
    EXPECT_EQ(error_of("[http.tokens]\na = \"read:0123456789abcdefgh\"\n"
                       "b = \"write:0123456789abcdefgh\"\n"),
              "http.tokens.b: the same token is configured under another name");
    EXPECT_EQ(error_of("", {{"TRACKD_HTTP_TOKENS_X", "read:tiny"}}),
              "http.tokens.x: the token must be at least 16 characters");
    EXPECT_EQ(error_of("", {{"TRACKD_HTTP_MAX_LIMT", "5"}}),
              "TRACKD_HTTP_MAX_LIMT: unknown setting in section [http]");
}

TEST(HttpConfig, ReadReplica) {
    const auto none = load_from_string("", "test.toml", {});
    EXPECT_EQ(none.http.pg_dsn, "");  // reads from pg.dsn
    EXPECT_EQ(none.http.replica_max_lag_ms, 30000);
    const auto c = load_from_string(
        "[http]\npg_dsn = \"postgresql://api:s3cret@replica:5432/trackd\"\n"
        "replica_max_lag_ms = 5000\n",
        "test.toml", {{"TRACKD_HTTP_REPLICA_MAX_LAG_MS", "0"}});
    EXPECT_EQ(c.http.pg_dsn, "postgresql://api:s3cret@replica:5432/trackd");
    EXPECT_EQ(c.http.replica_max_lag_ms, 0);  // the environment wins
    const auto text = to_masked_toml(c);
    EXPECT_EQ(text.find("s3cret"), std::string::npos) << text;
    EXPECT_NE(text.find("pg_dsn = \"postgresql://api:****@replica:5432/trackd\""),
              std::string::npos)
        << text;
    EXPECT_EQ(error_of("[http]\nreplica_max_lag_ms = -1\n"),
              "http.replica_max_lag_ms: must be between 0 (no check) and 86400000");
    EXPECT_EQ(error_of("[http]\npg_dsn = \"  \"\n"),
              "http.pg_dsn: must be a libpq DSN or empty (reads from pg.dsn)");
    EXPECT_EQ(load_from_string("", "t", {{"TRACKD_HTTP_PG_DSN", "host=r port=5433"}}).http.pg_dsn,
              "host=r port=5433");
}

TEST(HttpConfig, TokensAreMaskedWhenPrinted) {
    const auto c = load_from_string("[http.tokens]\ndashboard = \"read:s3cr3t-0123456789abcdef\"\n",
                                    "test.toml", {});
    const auto text = to_masked_toml(c);
    EXPECT_EQ(text.find("s3cr3t"), std::string::npos) << text;
    EXPECT_NE(text.find("[http.tokens]\n\"dashboard\" = \"read:****\""), std::string::npos) << text;
    EXPECT_NE(text.find("max_limit = 10000"), std::string::npos) << text;
}

TEST(CheckConfigCommand, MasksHttpTokensFromEnvironment) {
    const auto r = test::run_command("env TRACKD_HTTP_TOKENS_DASH=write:topsecret-0123456789 " +
                                     test::trackd_binary() + " check-config");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(r.output.find("topsecret"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("\"dash\" = \"write:****\""), std::string::npos) << r.output;
}

TEST(MetricsConfig, ListenFromFileAndEnvironment) {
    EXPECT_EQ(load_from_string("", "test.toml", {}).metrics.listen, "");
    EXPECT_EQ(
        load_from_string("[metrics]\nlisten = \"0.0.0.0:9464\"\n", "test.toml", {}).metrics.listen,
        "0.0.0.0:9464");
    EXPECT_EQ(load_from_string("", "test.toml", {{"TRACKD_METRICS_LISTEN", "127.0.0.1:9464"}})
                  .metrics.listen,
              "127.0.0.1:9464");
    EXPECT_EQ(error_of("[metrics]\nlisten = \"9464\"\n"),
              "metrics.listen: '9464' is not host:port with a port in 1..65535 (or empty)");
    EXPECT_EQ(error_of("[metrics]\nlisten = \"127.0.0.1:8080\"\n"),
              "metrics.listen: must differ from http.listen (leave it empty to serve /metrics "
              "there)");
    EXPECT_EQ(error_of("[metrics]\npath = \"/m\"\n"), "metrics.path: unknown key");
}

// trackd's output when it cannot start (both log formats, debug level) never holds the DSN's
// password, a bearer token or a secret librdkafka property.
TEST(Logs, NoSecretInOutput) {
    for (const char* format : {"text", "json"}) {
        const auto r = test::run_command(
            std::string("env TRACKD_LOG_LEVEL=debug TRACKD_LOG_FORMAT=") + format +
            " TRACKD_PG_DSN=postgresql://trackd:hunter2-pw@127.0.0.1:1/trackd"
            " TRACKD_PG_CONNECT_TIMEOUT_S=1"
            " TRACKD_HTTP_TOKENS_DASH=read:tok-0123456789abcdef"
            " TRACKD_KAFKA_PROPERTIES_SASL_PASSWORD=kafka-pw-0123 " +
            test::trackd_binary() + " run 2>&1");
        EXPECT_NE(r.exit_code, 0) << r.output;
        EXPECT_NE(r.output.find("127.0.0.1"), std::string::npos) << r.output;  // it did say why
        for (const char* secret : {"hunter2", "tok-0123", "kafka-pw"}) {
            EXPECT_EQ(r.output.find(secret), std::string::npos) << format << ": " << r.output;
        }
    }
}

// docs/operations.md is the configuration reference: every key of the fields table (as
// check-config prints them) must be in it.
TEST(Config, EveryKeyIsDocumentedInOperations) {
    std::ifstream in(std::string(TRACKD_SOURCE_DIR) + "/docs/operations.md");
    ASSERT_TRUE(in.good());
    std::ostringstream doc;
    doc << in.rdbuf();
    std::istringstream printed(to_masked_toml(load_from_string("", "test.toml", {})));
    std::string section;
    int keys = 0;
    for (std::string line; std::getline(printed, line);) {
        if (line.empty()) continue;
        if (line.front() == '[') {
            section = line.substr(1, line.size() - 2);
            if (section == "http.tokens" || section == "kafka.properties") {
                EXPECT_NE(doc.str().find("`[" + section + "]`"), std::string::npos) << section;
                section.clear();
            }
            continue;
        }
        if (section.empty()) continue;
        const std::string key = section + "." + line.substr(0, line.find(' '));
        ++keys;
        EXPECT_NE(doc.str().find("`" + key + "`"), std::string::npos)
            << key << " is missing from docs/operations.md";
    }
    EXPECT_GT(keys, 40);
}

}  // namespace
}  // namespace trackd::config

namespace trackd::config {
namespace {

TEST(KafkaFormatConfig, FormatAndRegistryFromFileAndEnvironment) {
    const auto d = load_from_string("", "test.toml", {});
    EXPECT_EQ(d.kafka.format, "json");
    EXPECT_EQ(d.kafka.schema_registry_url, "");
    EXPECT_EQ(d.kafka.schema_registry_timeout_ms, 5000);
    EXPECT_EQ(d.kafka.schema_registry_unknown_retry_s, 60);
    const auto c = load_from_string(
        "[kafka]\nformat = \"auto\"\nschema_registry_url = "
        "\"http://127.0.0.1:58081/apis/ccompat/v7\"\nschema_registry_user = \"ingest\"\n",
        "test.toml",
        {{"TRACKD_KAFKA_SCHEMA_REGISTRY_PASSWORD", "pw"},
         {"TRACKD_KAFKA_SCHEMA_REGISTRY_TIMEOUT_MS", "250"},
         {"TRACKD_KAFKA_SCHEMA_REGISTRY_UNKNOWN_RETRY_S", "5"}});
    EXPECT_EQ(c.kafka.format, "auto");
    EXPECT_EQ(c.kafka.schema_registry_url, "http://127.0.0.1:58081/apis/ccompat/v7");
    EXPECT_EQ(c.kafka.schema_registry_user, "ingest");
    EXPECT_EQ(c.kafka.schema_registry_password, "pw");
    EXPECT_EQ(c.kafka.schema_registry_timeout_ms, 250);
    EXPECT_EQ(c.kafka.schema_registry_unknown_retry_s, 5);
}

TEST(KafkaFormatConfig, ErrorsNameTheKey) {
    EXPECT_EQ(error_of("[kafka]\nformat = \"avro\"\n"),
              "kafka.format: 'avro' is not one of json, protobuf, auto");
    EXPECT_EQ(error_of("[kafka]\nformat = \"protobuf\"\nschema_registry_url = \"ftp://x\"\n"),
              "kafka.schema_registry_url: 'ftp://x' is not http[s]://host[:port][/path]");
    EXPECT_EQ(error_of("[kafka]\nschema_registry_url = \"http://r:8081\"\n"),
              "kafka.schema_registry_url: is only used with kafka.format = protobuf or auto");
    EXPECT_EQ(error_of("[kafka]\nformat = \"protobuf\"\nschema_registry_url = \"http://r\"\n"
                       "schema_registry_token = \"t\"\nschema_registry_user = \"u\"\n"),
              "kafka.schema_registry_token: set either a bearer token or schema_registry_user + "
              "schema_registry_password");
    EXPECT_EQ(error_of("[kafka]\nschema_registry_password = \"p\"\n"),
              "kafka.schema_registry_user: must be set when schema_registry_password is");
    EXPECT_EQ(error_of("[kafka]\nformat = \"protobuf\"\nschema_registry_user = \"u\"\n"),
              "kafka.schema_registry_user: is only used with kafka.schema_registry_url");
    EXPECT_EQ(error_of("[kafka]\nformat = \"protobuf\"\nschema_registry_token = \"t\"\n"),
              "kafka.schema_registry_token: is only used with kafka.schema_registry_url");
    EXPECT_EQ(
        error_of("[kafka]\nformat = \"protobuf\"\n"
                 "schema_registry_url = \"http://a:b@r:8081\"\nschema_registry_token = \"t\"\n"),
        "kafka.schema_registry_url: has user:password@ as well as schema_registry_user or "
        "schema_registry_token; keep one of them");
    EXPECT_EQ(error_of("[kafka]\nschema_registry_timeout_ms = 5\n"),
              "kafka.schema_registry_timeout_ms: must be between 100 and 600000");
    EXPECT_EQ(error_of("[kafka]\nschema_registry_unknown_retry_s = 0\n"),
              "kafka.schema_registry_unknown_retry_s: must be between 1 and 86400");
}

// https for the REST catalog and the registry, and their CA files: checked at start-up, so a
// path that is wrong stops trackd naming the key, not the first request an hour later.
TEST(TlsConfig, HttpsUrisAndCaFilesAreCheckedAtStartUp) {
    const std::string dir = ::testing::TempDir() + "trackd-tls-config-" + std::to_string(getpid());
    std::filesystem::create_directories(dir);
    const std::string pem = dir + "/ca.pem";
    std::ofstream(pem) << "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
    const std::string not_pem = dir + "/ca.txt";
    std::ofstream(not_pem) << "not a certificate\n";
    const std::string rest = "[archive]\ncatalog_type = \"rest\"\n";

    const auto c = load_from_string(rest +
                                        "rest_uri = \"https://polaris.example/api/catalog\"\n"
                                        "rest_oauth2_uri = \"https://idp.example/token\"\n"
                                        "rest_ca_file = \"" +
                                        pem +
                                        "\"\n"
                                        "[kafka]\nformat = \"protobuf\"\n"
                                        "schema_registry_url = \"https://registry.example\"\n",
                                    "test.toml", {{"TRACKD_KAFKA_SCHEMA_REGISTRY_CA_FILE", pem}});
    EXPECT_EQ(c.archive.rest_uri, "https://polaris.example/api/catalog");
    EXPECT_EQ(c.archive.rest_ca_file, pem);
    EXPECT_EQ(c.kafka.schema_registry_url, "https://registry.example");
    EXPECT_EQ(c.kafka.schema_registry_ca_file, pem);
    // The system's trust store when no CA file is set.
    EXPECT_EQ(load_from_string(rest + "rest_uri = \"https://cat\"\n", "test.toml", {})
                  .archive.rest_ca_file,
              "");

    EXPECT_EQ(
        error_of(rest + "rest_uri = \"https://cat\"\nrest_ca_file = \"" + dir + "/missing.pem\"\n"),
        "archive.rest_ca_file: '" + dir + "/missing.pem' does not exist");
    EXPECT_EQ(error_of(rest + "rest_uri = \"https://cat\"\nrest_ca_file = \"" + dir + "\"\n"),
              "archive.rest_ca_file: '" + dir + "' is not a file (a PEM file of CA certificates)");
    EXPECT_EQ(error_of(rest + "rest_uri = \"https://cat\"\nrest_ca_file = \"" + not_pem + "\"\n"),
              "archive.rest_ca_file: '" + not_pem +
                  "' holds no PEM certificate (-----BEGIN CERTIFICATE-----)");
    EXPECT_EQ(error_of(rest + "rest_uri = \"http://cat\"\nrest_ca_file = \"" + pem + "\"\n"),
              "archive.rest_ca_file: is only used with an https:// archive.rest_uri or "
              "archive.rest_oauth2_uri");
    EXPECT_EQ(error_of("[archive]\nrest_ca_file = \"" + pem + "\"\n"),
              "archive.rest_ca_file: is only used with archive.catalog_type = \"rest\"");
    EXPECT_EQ(error_of("[kafka]\nformat = \"protobuf\"\nschema_registry_url = \"https://r\"\n",
                       {{"TRACKD_KAFKA_SCHEMA_REGISTRY_CA_FILE", dir + "/missing.pem"}}),
              "kafka.schema_registry_ca_file: '" + dir + "/missing.pem' does not exist");
    EXPECT_EQ(error_of("[kafka]\nformat = \"protobuf\"\nschema_registry_url = \"http://r\"\n"
                       "schema_registry_ca_file = \"" +
                       pem + "\"\n"),
              "kafka.schema_registry_ca_file: is only used with an https:// "
              "kafka.schema_registry_url");
    std::filesystem::remove_all(dir);
}

// The URLs of the services trackd calls need a host, and a port in 1..65535 when they name one:
// checked at start-up, not found out by every request of the archiver or the registry client.
TEST(Config, ServiceUrlsNeedAHostAndAPortIn1To65535) {
    const std::string rest = "[archive]\ncatalog_type = \"rest\"\n";
    EXPECT_EQ(error_of(rest + "rest_uri = \"https://:8181/api\"\n"),
              "archive.rest_uri: 'https://:8181/api' has no host");
    EXPECT_EQ(error_of(rest + "rest_uri = \"http:///catalog\"\n"),
              "archive.rest_uri: 'http:///catalog' has no host");
    EXPECT_EQ(error_of(rest + "rest_uri = \"http://trackd@/catalog\"\n"),
              "archive.rest_uri: 'http://trackd@/catalog' has no host");
    EXPECT_EQ(error_of(rest + "rest_uri = \"http://cat:/api\"\n"),
              "archive.rest_uri: 'http://cat:/api' has no port after ':'");
    EXPECT_EQ(error_of(rest + "rest_uri = \"http://cat:0/api\"\n"),
              "archive.rest_uri: 'http://cat:0/api' has port '0', not one in 1..65535");
    EXPECT_EQ(error_of(rest + "rest_uri = \"http://cat:65536\"\n"),
              "archive.rest_uri: 'http://cat:65536' has port '65536', not one in 1..65535");
    EXPECT_EQ(error_of(rest + "rest_uri = \"http://cat:8181x/api\"\n"),
              "archive.rest_uri: 'http://cat:8181x/api' has port '8181x', not one in 1..65535");
    EXPECT_EQ(
        error_of(rest + "rest_uri = \"http://cat\"\nrest_oauth2_uri = \"https://:9443/token\"\n"),
        "archive.rest_oauth2_uri: 'https://:9443/token' has no host");
    EXPECT_EQ(
        error_of(rest +
                 "rest_uri = \"http://cat\"\nrest_oauth2_uri = \"https://idp:99999/token\"\n"),
        "archive.rest_oauth2_uri: 'https://idp:99999/token' has port '99999', not one in 1..65535");
    EXPECT_EQ(error_of("[archive]\ns3_endpoint = \"http://127.0.0.1:0\"\n"),
              "archive.s3_endpoint: 'http://127.0.0.1:0' has port '0', not one in 1..65535");
    EXPECT_EQ(error_of("", {{"TRACKD_ARCHIVE_S3_ENDPOINT", "http://minio:65536"}}),
              "archive.s3_endpoint: 'http://minio:65536' has port '65536', not one in 1..65535");
    EXPECT_EQ(error_of("[kafka]\nformat = \"protobuf\"\n"
                       "schema_registry_url = \"http://u:pw@r:70000/x\"\n"),
              "kafka.schema_registry_url: 'http://u:****@r:70000/x' has port '70000', not one in "
              "1..65535");
    EXPECT_EQ(error_of("[kafka]\nformat = \"protobuf\"\nschema_registry_url = \"http://r:0\"\n"),
              "kafka.schema_registry_url: 'http://r:0' has port '0', not one in 1..65535");
    // Ports 1 and 65535, an IPv6 address, and no port (the scheme's) are taken.
    const auto c = load_from_string(rest +
                                        "rest_uri = \"https://[::1]:65535/api\"\n"
                                        "rest_oauth2_uri = \"http://idp:1/token\"\n"
                                        "s3_endpoint = \"http://127.0.0.1:65535\"\n"
                                        "[kafka]\nformat = \"auto\"\n"
                                        "schema_registry_url = \"https://u:pw@registry.example\"\n",
                                    "test.toml", {});
    EXPECT_EQ(c.archive.rest_uri, "https://[::1]:65535/api");
    EXPECT_EQ(c.archive.rest_oauth2_uri, "http://idp:1/token");
    EXPECT_EQ(c.archive.s3_endpoint, "http://127.0.0.1:65535");
    EXPECT_EQ(c.kafka.schema_registry_url, "https://u:pw@registry.example");
}

// Vended credentials are a REST catalog's; anything but "vended-credentials" is refused by name
// (remote signing is not supported).
TEST(ArchiveConfig, AccessDelegationIsVendedCredentialsWithARestCatalogOnly) {
    const std::string rest = "[archive]\ncatalog_type = \"rest\"\nrest_uri = \"http://cat\"\n";
    EXPECT_EQ(load_from_string(rest, "test.toml", {}).archive.rest_access_delegation, "");
    EXPECT_EQ(load_from_string(rest, "test.toml",
                               {{"TRACKD_ARCHIVE_REST_ACCESS_DELEGATION", "vended-credentials"}})
                  .archive.rest_access_delegation,
              "vended-credentials");
    EXPECT_EQ(error_of(rest + "rest_access_delegation = \"remote-signing\"\n"),
              "archive.rest_access_delegation: 'remote-signing' is not \"vended-credentials\" (or "
              "empty: trackd's own S3 credentials)");
    EXPECT_EQ(error_of("[archive]\nrest_access_delegation = \"vended-credentials\"\n"),
              "archive.rest_access_delegation: is only used with archive.catalog_type = \"rest\"");
}

TEST(KafkaFormatConfig, RegistrySecretsAreMaskedWhenPrinted) {
    const auto in_url = to_masked_toml(load_from_string(
        "[kafka]\nformat = \"protobuf\"\nschema_registry_url = \"http://u:urlsecret@r:8081/x\"\n",
        "test.toml", {}));
    EXPECT_EQ(in_url.find("urlsecret"), std::string::npos) << in_url;
    EXPECT_NE(in_url.find("schema_registry_url = \"http://u:****@r:8081/x\""), std::string::npos)
        << in_url;
    const auto token = to_masked_toml(load_from_string(
        "[kafka]\nformat = \"protobuf\"\nschema_registry_url = \"http://r:8081/x\"\n"
        "schema_registry_token = \"tokensecret\"\n",
        "test.toml", {}));
    EXPECT_EQ(token.find("tokensecret"), std::string::npos) << token;
    EXPECT_NE(token.find("schema_registry_token = \"****\""), std::string::npos) << token;
    EXPECT_NE(token.find("schema_registry_password = \"\""), std::string::npos) << token;
}

}  // namespace
}  // namespace trackd::config
