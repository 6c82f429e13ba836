// Reads the configured topic as a member of a Kafka consumer group (librdkafka).
//
// Contract: Kafka's committed offsets are not the truth; the database is. On every partition
// assignment the source asks its PartitionOwner where to start (the stored offsets) and seeks
// there; on revocation it tells the owner first. poll() and the owner callbacks run on the one
// thread that calls poll(). commit_async() (lag monitoring only) may be called from any thread.
// About once a second poll() also publishes the consumer lag of each assigned partition (high
// watermark minus position) and its rate of change as metrics.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <vector>

#include "trackd/config/config.hpp"
#include "trackd/source/delivered_offsets.hpp"
#include "trackd/source/source.hpp"

struct rd_kafka_s;
struct rd_kafka_message_s;
struct rd_kafka_topic_partition_list_s;

namespace trackd::source {

class KafkaSource final : public Source {
  public:
    KafkaSource(const config::KafkaConfig& config, PartitionOwner& owner);
    ~KafkaSource() override;
    KafkaSource(const KafkaSource&) = delete;
    KafkaSource& operator=(const KafkaSource&) = delete;

    // The next message, or nullopt after `timeout` (rebalance callbacks run inside).
    std::optional<Message> poll(std::chrono::milliseconds timeout) override;

    // Backpressure: stop and restart fetching on every assigned partition.
    void pause() override;
    void resume() override;
    [[nodiscard]] bool paused() const override { return paused_; }

    // Commits offsets to Kafka, after the database commit, for lag monitoring only.
    void commit_async(const std::map<std::int32_t, std::int64_t>& next_offsets) override;

    // Leaves the group (revoking partitions through the owner) and stops.
    void close() override;

    [[nodiscard]] std::vector<std::int32_t> assignment() const;

  private:
    // What librdkafka's rebalance callback reaches (its opaque, fixed at rd_kafka_new): this
    // source while it lives. A close that was abandoned (see close()) may run the callback
    // later, after this source and its owner are gone: the abandoned thread holds this state,
    // whose `source` is then null, and the callback only gives librdkafka the (un)assignment
    // it waits for.
    struct CallbackTarget {
        std::timed_mutex mutex;  // held while the callback runs
        KafkaSource* source = nullptr;
        bool cooperative = true;  // the protocol, for the callback without a source
    };
    std::shared_ptr<CallbackTarget> target_;
    static void rebalance_cb(rd_kafka_s* rk, int err, void* partitions, void* opaque);
    void on_rebalance(int err, void* raw);
    void handle_rebalance(int err, void* raw);
    void check_start(std::int32_t partition, std::int64_t offset);
    void check_gap(std::int32_t partition, std::int64_t expected, std::int64_t offset);
    void report_loss(std::int32_t partition, std::int64_t from, std::int64_t to,
                     std::int64_t log_start);
    void resolve_log_edges(rd_kafka_topic_partition_list_s* list);
    void release_message();
    void refresh_lag();
    void forget_lag(const std::vector<std::int32_t>& partitions);

    const config::KafkaConfig& config_;
    PartitionOwner& owner_;
    rd_kafka_s* rk_ = nullptr;
    rd_kafka_message_s* current_ = nullptr;
    bool paused_ = false;
    std::atomic<bool> closed_{false};
    // rd_kafka_consumer_close() did not return in time: its thread was left to it (see close()).
    bool close_abandoned_ = false;
    // Set before rd_kafka_consumer_close(): the revoke callback it runs must not ask the group
    // anything (see handle_rebalance).
    bool closing_ = false;
    bool start_at_end_ = false;
    // The group's rebalance protocol is COOPERATIVE (from the configured strategy until the
    // group first says).
    bool cooperative_ = true;
    // Lag samples per partition over the last kLagWindow, for the rate of change (poll thread).
    struct LagSample {
        std::chrono::steady_clock::time_point at;
        std::int64_t lag = 0;
    };
    std::map<std::int32_t, std::deque<LagSample>> lag_samples_;
    std::map<std::int32_t, std::int64_t> start_offsets_;  // as assigned (logical if unresolved)
    // Partitions assigned at a stored offset whose first message has not come yet.
    std::map<std::int32_t, std::int64_t> awaiting_first_;
    // Messages librdkafka delivers again within an assignment are dropped (see the type).
    DeliveredOffsets delivered_;
    bool redelivered(std::int32_t partition, std::int64_t offset);
    // An exception of the owner's rebalance callbacks, rethrown by poll().
    std::exception_ptr callback_error_;
    std::chrono::steady_clock::time_point next_lag_refresh_{};
    int polls_since_clock_ = 1024;  // the first poll reads the clock
};

}  // namespace trackd::source
