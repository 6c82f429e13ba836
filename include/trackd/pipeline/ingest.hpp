// The ingest path: source -> decode -> validate -> batch -> sink, with backpressure, retries,
// fencing, revocation and shutdown. pipeline::run (pipeline.hpp) runs it with the production
// source and sink; the seams below let unit tests run the same logic against a scripted source,
// a recording sink and a fake clock.
//
// Contract: run_ingest() blocks until `stop` becomes true (SIGTERM/SIGINT), then stops
// fetching, commits or abandons what is in flight within `shutdown_grace`, leaves the consumer
// group and returns. It returns normally on a clean stop and throws on a fatal error (a
// database error that retrying cannot fix, a fatal Kafka error, a consumer-group conflict).
// PostgreSQL being unreachable is not fatal: consumption pauses and the batch is retried with
// backoff. A batch whose commit outcome is unknown is never re-run blindly (sink/sink.hpp).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "trackd/config/config.hpp"
#include "trackd/sink/sink.hpp"
#include "trackd/source/source.hpp"

namespace trackd::pipeline {

struct IngestSeams {
    // Makes the source; `owner` is told of assignments and revocations.
    std::function<std::unique_ptr<source::Source>(source::PartitionOwner& owner)> source;
    // Makes one sink (one database session) per writer and one for partition claims;
    // `application_name` says which ("trackd ingest writer 0", ...). May throw db::DbError
    // while the database is away (retried).
    std::function<std::unique_ptr<sink::Sink>(const std::string& application_name)> sink;
    // The monotonic clock batch ages are measured with.
    std::function<std::chrono::steady_clock::time_point()> now = [] {
        return std::chrono::steady_clock::now();
    };
    // How long a clean stop waits for queued batches to commit before abandoning them.
    std::chrono::milliseconds shutdown_grace{5000};
};

// The production seams: source::KafkaSource and sink::postgis::PostgisSink.
IngestSeams production_seams(const config::Config& config);

void run_ingest(const config::Config& config, const std::atomic<bool>& stop,
                const IngestSeams& seams);

}  // namespace trackd::pipeline
