// Wires the ingest path: Kafka source -> decode -> validate -> batch -> PostGIS sink.
//
// Contract: run() blocks until `stop` becomes true (SIGTERM/SIGINT), then stops fetching,
// commits or abandons what is in flight within a few seconds, leaves the consumer group and
// returns. It returns normally on a clean stop and throws on a fatal error (a database error
// that retrying cannot fix, a fatal Kafka error). PostgreSQL being unreachable is not fatal:
// consumption pauses and the batch is retried with backoff.
#pragma once

#include <atomic>

#include "trackd/config/config.hpp"

namespace trackd::pipeline {

void run_ingest(const config::Config& config, const std::atomic<bool>& stop);

}  // namespace trackd::pipeline
