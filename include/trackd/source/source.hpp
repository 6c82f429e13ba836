// The ingest path's view of where messages come from: a member of a consumer group that polls
// messages, is assigned and revoked partitions, pauses for backpressure and reports progress.
// source::KafkaSource is the one implementation; the pipeline's unit tests use a scripted fake
// (tests/support/).
//
// Contract: poll() and the owner callbacks run on the one thread that calls poll(); the
// PartitionOwner is told of an assignment (and says where each partition starts) before the
// first message of it, and of a revocation before the partition goes. commit_async() may be
// called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string_view>
#include <vector>

namespace trackd::source {

// A message as read; the views stay valid until the next poll().
struct Message {
    std::int32_t partition = 0;
    std::int64_t offset = 0;
    std::int64_t timestamp_ms = 0;  // the broker's or producer's timestamp, -1 if none
    std::string_view key;
    std::string_view payload;
};

class PartitionOwner {
  public:
    virtual ~PartitionOwner() = default;
    // Called for newly assigned partitions; returns where each starts: the stored next offset,
    // or nullopt for "nothing stored" (the start of the partition, or its end when
    // kafka.properties auto.offset.reset is latest).
    virtual std::map<std::int32_t, std::optional<std::int64_t>> on_assigned(
        const std::vector<std::int32_t>& partitions) = 0;
    // Called before partitions are taken away: drop what is pending for them.
    virtual void on_revoked(const std::vector<std::int32_t>& partitions) = 0;
};

class Source {
  public:
    virtual ~Source() = default;

    // The next message, or nullopt after `timeout` (rebalance callbacks run inside).
    virtual std::optional<Message> poll(std::chrono::milliseconds timeout) = 0;

    // Backpressure: stop and restart fetching on every assigned partition.
    virtual void pause() = 0;
    virtual void resume() = 0;
    [[nodiscard]] virtual bool paused() const = 0;

    // Reports offsets the database committed (for lag monitoring only).
    virtual void commit_async(const std::map<std::int32_t, std::int64_t>& next_offsets) = 0;

    // Leaves the group (revoking partitions through the owner) and stops.
    virtual void close() = 0;
};

}  // namespace trackd::source
