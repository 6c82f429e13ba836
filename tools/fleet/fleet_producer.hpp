// Sends the fleet's messages to Kafka with librdkafka and accounts for every delivery report.
//
// Contract: one producer per run, used from one thread (the delivery-report and error callbacks
// run inside produce()/poll()/flush() on that thread). Messages are keyed by vehicle id and
// partitioned with murmur2 (as the Java client does), with enable.idempotence=true, so each
// vehicle's messages land on one partition in send order. Every produced message ends in
// exactly one Tally count (delivered or failed) and, when delivered, one manifest line.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <librdkafka/rdkafka.h>

#include "fleet_generator.hpp"
#include "manifest_writer.hpp"
#include "tally.hpp"

namespace trackd::fleet {

struct ProducerConfig {
    std::string brokers;
    std::string topic;
    // librdkafka properties applied after the fleet's own (-X key=value).
    std::vector<std::pair<std::string, std::string>> properties;
};

class FleetProducer {
  public:
    // Connects and checks that the topic exists; throws std::runtime_error otherwise.
    FleetProducer(const ProducerConfig& config, const std::vector<std::string>& vehicle_ids,
                  Tally& tally, ManifestWriter* manifest);
    ~FleetProducer();
    FleetProducer(const FleetProducer&) = delete;
    FleetProducer& operator=(const FleetProducer&) = delete;

    [[nodiscard]] int partition_count() const { return partitions_; }

    // Queues one message (librdkafka copies it); while the queue is full, serves delivery
    // reports until there is room. A message librdkafka refuses outright counts as failed.
    void produce(const Message& message);

    // Serves pending delivery reports without waiting.
    void poll();

    // Waits up to timeout for the delivery reports of everything queued; returns how many
    // messages are still outstanding.
    std::uint64_t flush(std::chrono::milliseconds timeout);

    // Gives up on everything still queued (they are reported as failed).
    void purge();

    [[nodiscard]] std::uint64_t in_flight() const { return slots_.size() - free_.size(); }

    // Messages librdkafka reported delivered without an offset (RD_KAFKA_OFFSET_INVALID; seen with
    // the idempotent producer of librdkafka 2.0 right after the topic was made). Their manifest
    // line says offset -1001: where, or whether, they are in the log is not known.
    [[nodiscard]] std::uint64_t delivered_without_offset() const {
        return delivered_without_offset_;
    }

    // The producer hit a fatal (idempotence) error and can send nothing more.
    [[nodiscard]] const std::optional<std::string>& fatal_error() const { return fatal_; }

  private:
    struct InFlight {
        std::int64_t recorded_at_ms = 0;
        std::uint32_t vehicle = 0;
        KindId kind = 0;
        bool has_recorded_at = false;
    };

    static void on_delivery(rd_kafka_t* rk, const rd_kafka_message_t* message, void* opaque);
    static void on_error(rd_kafka_t* rk, int err, const char* reason, void* opaque);
    void report_failure(const InFlight& rec, const char* what);

    const std::vector<std::string>& vehicle_ids_;
    Tally& tally_;
    ManifestWriter* manifest_;
    rd_kafka_t* rk_ = nullptr;
    rd_kafka_topic_t* rkt_ = nullptr;
    int partitions_ = 0;
    std::vector<InFlight> slots_;
    std::vector<std::uint32_t> free_;
    std::uint64_t failures_reported_ = 0;
    std::uint64_t delivered_without_offset_ = 0;
    std::optional<std::string> fatal_;
};

}  // namespace trackd::fleet
