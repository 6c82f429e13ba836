// Where the integration tests find the real services that scripts/services.sh started.
// Override with TEST_PG_ADMIN_DSN (a superuser DSN; tests create and drop their own databases),
// TEST_KAFKA_BROKERS, TEST_PG_REPLICA_DSN for the streaming replica, TEST_REGISTRY_URL for the
// schema registry, TEST_ICEBERG_REST_URI (Apache Iceberg's REST catalog server,
// scripts/iceberg-rest.sh) and TEST_S3_ENDPOINT (the S3 server, moto, scripts/s3.sh). A service
// that is not there fails the test: it never skips.
#pragma once

#include <cstdlib>
#include <string>

namespace trackd::test {

inline std::string env_or(const char* name, const char* fallback) {
    const char* v = std::getenv(name);
    return (v != nullptr && *v != '\0') ? v : fallback;
}

inline std::string pg_admin_dsn() {
    return env_or("TEST_PG_ADMIN_DSN", "postgresql://postgres@127.0.0.1:55432/postgres");
}

// The streaming replica of that cluster (scripts/pg-replica.sh), read-only: TEST_PG_REPLICA_DSN.
inline std::string pg_replica_admin_dsn() {
    return env_or("TEST_PG_REPLICA_DSN", "postgresql://postgres@127.0.0.1:55433/postgres");
}

inline std::string kafka_brokers() { return env_or("TEST_KAFKA_BROKERS", "127.0.0.1:59092"); }

// The Confluent-compatible API of the schema registry scripts/registry.sh runs (override with
// TEST_REGISTRY_URL; the port follows LOCAL_REGISTRY_PORT like the script).
inline std::string registry_url() {
    return env_or(
        "TEST_REGISTRY_URL",
        ("http://127.0.0.1:" + env_or("LOCAL_REGISTRY_PORT", "58081") + "/apis/ccompat/v7")
            .c_str());
}

inline std::string iceberg_rest_uri() {
    return env_or("TEST_ICEBERG_REST_URI", "http://127.0.0.1:55181");
}

inline std::string s3_endpoint() { return env_or("TEST_S3_ENDPOINT", "http://127.0.0.1:55900"); }

}  // namespace trackd::test
