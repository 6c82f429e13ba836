#include "trackd/source/kafka_source.hpp"

#include <algorithm>
#include <cstring>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include <fmt/format.h>
#include <librdkafka/rdkafka.h>

#include "trackd/core/error.hpp"
#include "trackd/core/log.hpp"
#include "trackd/core/metrics.hpp"
#include "trackd/core/pause_point.hpp"

namespace trackd::source {
namespace {

void set(rd_kafka_conf_t* conf, const std::string& key, const std::string& value) {
    char err[512];
    if (rd_kafka_conf_set(conf, key.c_str(), value.c_str(), err, sizeof err) != RD_KAFKA_CONF_OK) {
        rd_kafka_conf_destroy(conf);
        // librdkafka quotes the refused value; never repeat a secret (sasl.password, ...).
        std::string message = err;
        for (const char* word : {"password", "secret", "key", "token", "oauthbearer"}) {
            if (key.find(word) == std::string::npos || value.empty()) continue;
            for (auto pos = message.find(value); pos != std::string::npos;
                 pos = message.find(value, pos + 4)) {
                message.replace(pos, value.size(), "****");
            }
            break;
        }
        throw core::ConfigError("kafka.properties." + key, message);
    }
}

std::vector<std::int32_t> partitions_of(const rd_kafka_topic_partition_list_t* list) {
    std::vector<std::int32_t> out;
    out.reserve(static_cast<size_t>(list->cnt));
    for (int i = 0; i < list->cnt; ++i) out.push_back(list->elems[i].partition);
    return out;
}

constexpr std::string_view kLagName = "trackd_kafka_consumer_lag_messages";
constexpr std::string_view kLagHelp =
    "Messages in the partition after this consumer's position (high watermark minus position)";
constexpr std::string_view kLagRateName = "trackd_kafka_consumer_lag_change_messages_per_second";
constexpr std::string_view kLagRateHelp =
    "Rate of change of the consumer lag over the last 30 s: above 0 the partition falls behind";
// The rate of change is the slope between the newest and the oldest sample of this window.
constexpr std::chrono::seconds kLagWindow{30};
constexpr int kWatermarkQueryTimeoutMs = 200;
constexpr int kLogStartQueryTimeoutMs = 2000;
constexpr std::chrono::milliseconds kConsumerCloseTimeout{10000};
constexpr std::chrono::milliseconds kCallbackWaitOnAbandon{2000};
constexpr std::string_view kRedeliveredName = "trackd_kafka_messages_redelivered_total";
constexpr std::string_view kRedeliveredHelp =
    "Messages librdkafka delivered again within one assignment, dropped by trackd";
constexpr std::string_view kLostName = "trackd_kafka_messages_lost_total";
constexpr std::string_view kLostHelp = "Messages Kafka deleted (retention) before trackd read them";

core::metrics::Labels partition_label(std::int32_t p) { return {{"partition", std::to_string(p)}}; }

std::string join(const std::vector<std::int32_t>& v) {
    std::string s;
    for (const auto p : v) s += (s.empty() ? "" : ",") + std::to_string(p);
    return s;
}

}  // namespace

KafkaSource::KafkaSource(const config::KafkaConfig& config, PartitionOwner& owner)
    : config_(config), owner_(owner) {
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    // Defaults first, so that [kafka.properties] can override them.
    set(conf, "auto.offset.reset", "earliest");
    set(conf, "fetch.wait.max.ms", "100");
    // librdkafka 2.0 stops fetching for a whole second once its pre-fetch queue holds
    // queued.min.messages or queued.max.messages.kbytes (2.1 made that pause a setting,
    // fetch.queue.backoff.ms). The queue must therefore hold more than a second of a backlog,
    // or the writers wait for Kafka: with 100,000 messages and 8 MiB, trackd read a backlog at
    // about 90,000 messages/s in bursts a second apart and its writers were idle a third of the
    // time (docs/ingest.md). The byte bound is librdkafka's default; the count binds first only
    // for messages under 64 bytes.
    set(conf, "queued.min.messages", "1000000");
    set(conf, "queued.max.messages.kbytes", "65536");
    set(conf, "statistics.interval.ms", "0");
    // Incremental rebalancing: members keep the partitions that do not move, and only the
    // moving ones pause (librdkafka's default, eager, stops every member for every change).
    set(conf, "partition.assignment.strategy", "cooperative-sticky");
    for (const auto& [k, v] : config.properties) set(conf, k, v);
    set(conf, "bootstrap.servers", config.brokers);
    set(conf, "group.id", config.group);
    set(conf, "client.id", config.client_id);
    // Static membership: a restart within session.timeout.ms moves no partition.
    if (!config.instance_id.empty()) set(conf, "group.instance.id", config.instance_id);
    set(conf, "enable.auto.commit", "false");
    set(conf, "enable.auto.offset.store", "false");
    auto reset = config.properties.find("auto.offset.reset");
    const auto strategy = config.properties.find("partition.assignment.strategy");
    cooperative_ = strategy == config.properties.end() ||
                   strategy->second.find("cooperative") != std::string::npos;
    start_at_end_ =
        reset != config.properties.end() &&
        (reset->second == "latest" || reset->second == "largest" || reset->second == "end");
    target_ = std::make_shared<CallbackTarget>();
    target_->source = this;
    rd_kafka_conf_set_opaque(conf, target_.get());
    rd_kafka_conf_set_rebalance_cb(
        conf,
        [](rd_kafka_t* rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t* partitions,
           void* opaque) { rebalance_cb(rk, static_cast<int>(err), partitions, opaque); });

    char err[512];
    rk_ = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    if (rk_ == nullptr) throw core::StartupError(fmt::format("kafka: {}", err));
    rd_kafka_poll_set_consumer(rk_);
    rd_kafka_topic_partition_list_t* topics = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(topics, config.topic.c_str(), RD_KAFKA_PARTITION_UA);
    const auto rc = rd_kafka_subscribe(rk_, topics);
    rd_kafka_topic_partition_list_destroy(topics);
    if (rc != RD_KAFKA_RESP_ERR_NO_ERROR) {
        rd_kafka_destroy(rk_);
        throw core::StartupError(
            fmt::format("kafka: cannot subscribe to {}: {}", config.topic, rd_kafka_err2str(rc)));
    }
}

KafkaSource::~KafkaSource() {
    try {
        close();
    } catch (...) {  // NOLINT(bugprone-empty-catch): destructor
    }
    // After an abandoned close the handle stays: destroying it would wait for that close.
    if (!close_abandoned_) rd_kafka_destroy(rk_);
}

// Leaving the group is bounded. librdkafka 2.0.2's rd_kafka_consumer_close() can wait for good
// when it is called right after an assignment (cooperative rebalancing): twice in CI a trackd
// sent SIGTERM just after it had been assigned its partitions never exited, once asking for the
// group's protocol from the revoke callback (no longer asked, see handle_rebalance), once after
// the revocation had been logged. Everything it had read was committed to the database or abandoned
// before this point (the offsets there are the truth), so after kConsumerCloseTimeout trackd stops
// without a clean leave; the group hands the partitions on once session.timeout.ms has passed
// without a heartbeat. The close runs on a thread of its own for that (the revoke callback
// runs there, while this thread only waits).
void KafkaSource::close() {
    if (closed_) return;
    release_message();
    closing_ = true;
    std::promise<void> returned;
    auto done = returned.get_future();
    // `target`: the callback's state lives as long as this thread may run the callback.
    std::thread closer([rk = rk_, target = target_, returned = std::move(returned)]() mutable {
        // The delivery tests stop a close here, as the hang does (docs/reliability.md).
        static core::PausePoint pause("TRACKD_TEST_INGEST_PAUSE_AT", "ingest");
        pause.at("in-consumer-close");
        rd_kafka_consumer_close(rk);  // runs the revoke callback
        returned.set_value();
    });
    if (done.wait_for(kConsumerCloseTimeout) == std::future_status::ready) {
        closer.join();
        // No poll() follows to rethrow what the close's revoke callback threw: said here.
        if (callback_error_) {
            try {
                std::rethrow_exception(std::exchange(callback_error_, nullptr));
            } catch (const std::exception& e) {
                core::log::error("kafka: the revocation when leaving the group failed",
                                 {{"error", e.what()}});
            } catch (...) {
                core::log::error("kafka: the revocation when leaving the group failed");
            }
        }
    } else {
        closer.detach();
        close_abandoned_ = true;
        core::log::warn(
            "kafka: leaving the consumer group did not finish in time; stopping without it (the "
            "group reassigns the partitions after kafka.properties' session.timeout.ms)",
            {{"waited_ms", std::to_string(kConsumerCloseTimeout.count())}});
        // From here on a late callback must not reach this source or its owner. A callback
        // running now is waited for, within a bound: one stuck inside librdkafka for good
        // never comes back to them either.
        if (target_->mutex.try_lock_for(kCallbackWaitOnAbandon)) {
            target_->source = nullptr;
            target_->cooperative = cooperative_;
            target_->mutex.unlock();
        } else {
            core::log::warn("kafka: a rebalance callback of the abandoned close is still running");
        }
    }
    closed_ = true;
}

void KafkaSource::release_message() {
    if (current_ != nullptr) {
        rd_kafka_message_destroy(current_);
        current_ = nullptr;
    }
}

void KafkaSource::rebalance_cb(rd_kafka_s* rk, int err, void* partitions, void* opaque) {
    auto& target = *static_cast<CallbackTarget*>(opaque);
    const std::lock_guard lock(target.mutex);
    if (target.source != nullptr) {
        target.source->on_rebalance(err, partitions);
        return;
    }
    // After an abandoned close: what librdkafka waits for, nothing else (no log, no metric:
    // the process may be ending).
    auto* list = static_cast<rd_kafka_topic_partition_list_t*>(partitions);
    const bool assign = err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS;
    if (target.cooperative) {
        rd_kafka_error_t* e = assign ? rd_kafka_incremental_assign(rk, list)
                                     : rd_kafka_incremental_unassign(rk, list);
        if (e != nullptr) rd_kafka_error_destroy(e);
    } else {
        rd_kafka_assign(rk, assign ? list : nullptr);
    }
}

void KafkaSource::on_rebalance(int err, void* raw) {
    // No exception may cross librdkafka's C frames: keep it for poll() to rethrow.
    try {
        handle_rebalance(err, raw);
    } catch (...) {
        if (!callback_error_) callback_error_ = std::current_exception();
    }
}

void KafkaSource::handle_rebalance(int err, void* raw) {
    auto* given = static_cast<rd_kafka_topic_partition_list_t*>(raw);
    // Only kafka.topic's partitions: a static member that comes back within its session
    // timeout gets its previous assignment, which after a change of kafka.topic (same group)
    // names the old topic's partitions; claiming those numbers for this topic would be wrong.
    rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(given->cnt);
    const std::unique_ptr<rd_kafka_topic_partition_list_t,
                          decltype(&rd_kafka_topic_partition_list_destroy)>
        owned(list, &rd_kafka_topic_partition_list_destroy);
    for (int i = 0; i < given->cnt; ++i) {
        if (config_.topic == given->elems[i].topic) {
            rd_kafka_topic_partition_list_add(list, given->elems[i].topic,
                                              given->elems[i].partition);
        } else {
            core::log::warn(
                "ignored a partition of another topic in the group's assignment "
                "(change kafka.group together with kafka.topic)",
                {{"topic", given->elems[i].topic},
                 {"partition", std::to_string(given->elems[i].partition)}});
        }
    }
    // The group's protocol, asked of librdkafka except while the consumer closes: then the
    // last answer holds. Asked from the revoke callback that rd_kafka_consumer_close() runs,
    // librdkafka can answer NULL (passed to strcmp, that crashed trackd twice in a CI run) or
    // never answer at all (librdkafka issue 4041: a CI run saw `trackd` hang on SIGTERM, its
    // main thread waiting in rd_kafka_rebalance_protocol() under rd_kafka_consumer_close()).
    if (!closing_) {
        if (const char* protocol = rd_kafka_rebalance_protocol(rk_); protocol != nullptr) {
            cooperative_ = std::strcmp(protocol, "COOPERATIVE") == 0;
        }
    }
    const bool cooperative = cooperative_;
    const auto parts = partitions_of(list);
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        delivered_.forget(parts);
        std::map<std::int32_t, std::optional<std::int64_t>> starts;
        try {
            starts = owner_.on_assigned(parts);
        } catch (...) {
            // librdkafka still waits for an assign call (a close would wait out its bound): it
            // gets one that reads none of these partitions; poll() rethrows the owner's error.
            rd_kafka_topic_partition_list_t* none = rd_kafka_topic_partition_list_new(0);
            if (cooperative) {
                if (rd_kafka_error_t* e = rd_kafka_incremental_assign(rk_, none)) {
                    rd_kafka_error_destroy(e);
                }
            } else {
                rd_kafka_assign(rk_, none);
            }
            rd_kafka_topic_partition_list_destroy(none);
            throw;
        }
        for (int i = 0; i < list->cnt; ++i) {
            auto it = starts.find(list->elems[i].partition);
            const bool stored = it != starts.end() && it->second.has_value();
            list->elems[i].offset =
                stored ? *it->second
                       : (start_at_end_ ? RD_KAFKA_OFFSET_END : RD_KAFKA_OFFSET_BEGINNING);
            if (stored) awaiting_first_[list->elems[i].partition] = *it->second;
        }
        resolve_log_edges(list);
        for (int i = 0; i < list->cnt; ++i) {
            start_offsets_[list->elems[i].partition] = list->elems[i].offset;
        }
        core::log::info("partitions assigned", {{"partitions", join(parts)}});
        if (cooperative) {
            rd_kafka_error_t* e = rd_kafka_incremental_assign(rk_, list);
            if (e != nullptr) {
                core::log::error("incremental assign failed",
                                 {{"error", rd_kafka_error_string(e)}});
                rd_kafka_error_destroy(e);
            }
        } else {
            rd_kafka_assign(rk_, list);
        }
        // A partition assigned while paused for backpressure starts paused too.
        if (paused_) rd_kafka_pause_partitions(rk_, list);
    } else {
        release_message();
        // The owner's error comes out of poll() (or close()) after the partitions are given
        // back: librdkafka waits for the unassign call (a close would wait out its bound).
        std::exception_ptr owner_error;
        try {
            owner_.on_revoked(parts);
        } catch (...) {
            owner_error = std::current_exception();
        }
        forget_lag(parts);
        delivered_.forget(parts);
        for (const auto p : parts) awaiting_first_.erase(p);
        core::log::info("partitions revoked", {{"partitions", join(parts)}});
        // librdkafka keeps a partition's pause across its revocation, and resume() reaches only
        // the partitions assigned then: one revoked while paused for backpressure and assigned
        // back later would never be fetched again (seen in the fault suite: a partition stalled
        // for good). It leaves unpaused; the next assignment pauses it again if need be.
        if (paused_) rd_kafka_resume_partitions(rk_, list);
        if (cooperative) {
            rd_kafka_error_t* e = rd_kafka_incremental_unassign(rk_, list);
            if (e != nullptr) rd_kafka_error_destroy(e);
        } else {
            rd_kafka_assign(rk_, nullptr);
        }
        if (owner_error) std::rethrow_exception(owner_error);
    }
}

// Partitions with no stored offset start at the log's start (or end, kafka.properties'
// auto.offset.reset = latest). Their exact offsets are asked of the broker here, all in one
// request, instead of handing librdkafka the logical BEGINNING/END: librdkafka 2.0 looks a
// logical offset up only once it knows the partition's leader, and right after the group's
// assignment it does not yet, so it retried after 500 ms. That was half of a new group's time
// from launch to its first batch (bench/RESULTS.md, 2026-12-05). Without an answer the logical
// offsets stay, as before.
void KafkaSource::resolve_log_edges(rd_kafka_topic_partition_list_s* list) {
    rd_kafka_topic_partition_list_t* query = rd_kafka_topic_partition_list_new(list->cnt);
    const std::unique_ptr<rd_kafka_topic_partition_list_t,
                          decltype(&rd_kafka_topic_partition_list_destroy)>
        owned(query, &rd_kafka_topic_partition_list_destroy);
    for (int i = 0; i < list->cnt; ++i) {
        const auto offset = list->elems[i].offset;
        if (offset != RD_KAFKA_OFFSET_BEGINNING && offset != RD_KAFKA_OFFSET_END) continue;
        // A ListOffsets "timestamp" of -2 / -1 asks for the earliest / latest offset.
        rd_kafka_topic_partition_list_add(query, list->elems[i].topic, list->elems[i].partition)
            ->offset = offset;
    }
    if (query->cnt == 0) return;
    const auto rc = rd_kafka_offsets_for_times(rk_, query, kLogStartQueryTimeoutMs);
    if (rc != RD_KAFKA_RESP_ERR_NO_ERROR) {
        core::log::info("partitions without a stored offset start at librdkafka's lookup",
                        {{"error", rd_kafka_err2str(rc)}});
        return;
    }
    for (int i = 0; i < query->cnt; ++i) {
        const auto& answer = query->elems[i];
        if (answer.err != RD_KAFKA_RESP_ERR_NO_ERROR || answer.offset < 0) continue;
        for (int j = 0; j < list->cnt; ++j) {
            if (list->elems[j].partition == answer.partition) list->elems[j].offset = answer.offset;
        }
    }
}

std::optional<Message> KafkaSource::poll(std::chrono::milliseconds timeout) {
    release_message();
    // The lag is refreshed every second; the clock is read after an empty poll and every 1,024
    // messages (at 100,000 messages/s, every 10 ms): read on every poll, it was 2% of the poll
    // thread's CPU.
    if (++polls_since_clock_ >= 1024) {
        polls_since_clock_ = 0;
        if (const auto now = std::chrono::steady_clock::now(); now >= next_lag_refresh_) {
            next_lag_refresh_ = now + std::chrono::seconds(1);
            refresh_lag();
        }
    }
    // Without waiting first: librdkafka reads the clock four times in a poll that may wait and
    // once in one that may not, which was 8% of the poll thread's CPU on a backlog. Only when
    // nothing is there does the poll wait, up to `timeout`.
    rd_kafka_message_t* m = rd_kafka_consumer_poll(rk_, 0);
    if (m == nullptr && !callback_error_ && timeout.count() > 0) {
        m = rd_kafka_consumer_poll(rk_, static_cast<int>(timeout.count()));
    }
    if (m == nullptr) polls_since_clock_ = 1024;
    if (callback_error_) {
        if (m != nullptr) rd_kafka_message_destroy(m);
        std::rethrow_exception(std::exchange(callback_error_, nullptr));
    }
    if (m == nullptr) return std::nullopt;
    if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            core::log::warn("kafka consumer error", {{"error", rd_kafka_message_errstr(m)}});
        }
        const bool fatal = m->err == RD_KAFKA_RESP_ERR__FATAL;
        rd_kafka_message_destroy(m);
        if (fatal) throw core::StartupError("kafka: fatal consumer error");
        return std::nullopt;
    }
    if (redelivered(m->partition, m->offset)) {
        rd_kafka_message_destroy(m);
        return std::nullopt;
    }
    current_ = m;
    if (!awaiting_first_.empty()) check_start(m->partition, m->offset);
    Message out;
    out.partition = m->partition;
    out.offset = m->offset;
    rd_kafka_timestamp_type_t type{};
    out.timestamp_ms = rd_kafka_message_timestamp(m, &type);
    out.key = std::string_view(static_cast<const char*>(m->key), m->key_len);
    out.payload = std::string_view(static_cast<const char*>(m->payload), m->len);
    return out;
}

bool KafkaSource::redelivered(std::int32_t partition, std::int64_t offset) {
    const std::int64_t expected = delivered_.next(partition);
    const auto seen = delivered_.see(partition, offset);
    if (seen == DeliveredOffsets::Seen::first) {
        if (expected >= 0 && offset > expected) check_gap(partition, expected, offset);
        return false;
    }
    core::metrics::counter(kRedeliveredName, kRedeliveredHelp, partition_label(partition)).inc();
    if (seen == DeliveredOffsets::Seen::again_first) {
        core::log::warn(
            "librdkafka delivered messages again that this assignment had read; dropped "
            "(trackd_kafka_messages_redelivered_total counts them)",
            {{"partition", std::to_string(partition)},
             {"offset", std::to_string(offset)},
             {"next_offset", std::to_string(delivered_.next(partition))}});
    }
    return true;
}

// The first message of a partition after its assignment starts later than the stored offset:
// transaction markers and compaction leave such gaps legitimately, but when the log now starts
// above the stored offset, Kafka deleted messages (retention) before trackd read them, and
// auto.offset.reset moved the position on. That is data loss: said loudly and counted.
void KafkaSource::check_start(std::int32_t partition, std::int64_t offset) {
    const auto it = awaiting_first_.find(partition);
    if (it == awaiting_first_.end()) return;
    const std::int64_t stored = it->second;
    awaiting_first_.erase(it);
    if (offset < stored) {
        core::log::warn(
            "partition starts below the stored offset (topic recreated, or offsets "
            "reset by hand?)",
            {{"partition", std::to_string(partition)},
             {"stored_offset", std::to_string(stored)},
             {"first_offset", std::to_string(offset)}});
        return;
    }
    if (offset == stored) return;
    std::int64_t low = 0;
    std::int64_t high = 0;
    const auto rc = rd_kafka_query_watermark_offsets(rk_, config_.topic.c_str(), partition, &low,
                                                     &high, kLogStartQueryTimeoutMs);
    if (rc != RD_KAFKA_RESP_ERR_NO_ERROR) {
        core::log::warn("cannot tell a gap after the stored offset from data loss",
                        {{"partition", std::to_string(partition)},
                         {"stored_offset", std::to_string(stored)},
                         {"first_offset", std::to_string(offset)},
                         {"error", rd_kafka_err2str(rc)}});
        return;
    }
    if (low > stored) report_loss(partition, stored, offset, low);
}

// A gap between two messages of one assignment: the same question as check_start's, for a
// position Kafka's retention overtook while trackd ran (the fetch was out of range and
// auto.offset.reset moved it to the log's start). Transaction markers leave a gap per
// transaction, so the log's start is taken from the last fetch's answer, which librdkafka
// keeps (no round trip); the broker is asked only when librdkafka has none.
void KafkaSource::check_gap(std::int32_t partition, std::int64_t expected, std::int64_t offset) {
    std::int64_t low = -1;
    std::int64_t high = -1;
    if (rd_kafka_get_watermark_offsets(rk_, config_.topic.c_str(), partition, &low, &high) !=
            RD_KAFKA_RESP_ERR_NO_ERROR ||
        low < 0) {
        if (rd_kafka_query_watermark_offsets(rk_, config_.topic.c_str(), partition, &low, &high,
                                             kLogStartQueryTimeoutMs) !=
            RD_KAFKA_RESP_ERR_NO_ERROR) {
            return;
        }
    }
    if (low > expected) report_loss(partition, expected, offset, low);
}

// Kafka deleted [from, to) before trackd read it: said loudly and counted.
void KafkaSource::report_loss(std::int32_t partition, std::int64_t from, std::int64_t to,
                              std::int64_t log_start) {
    const std::int64_t lost = to - from;
    core::metrics::counter(kLostName, kLostHelp, partition_label(partition))
        .inc(static_cast<std::uint64_t>(lost));
    core::log::error(
        "data loss: Kafka deleted messages before trackd read them (the log now starts above the "
        "offset trackd was to read next; see auto.offset.reset in docs/operations.md)",
        {{"topic", config_.topic},
         {"partition", std::to_string(partition)},
         {"lost_from_offset", std::to_string(from)},
         {"lost_to_offset", std::to_string(to - 1)},
         {"messages", std::to_string(lost)},
         {"log_start_offset", std::to_string(log_start)}});
}

void KafkaSource::pause() {
    if (paused_) return;
    rd_kafka_topic_partition_list_t* list = nullptr;
    if (rd_kafka_assignment(rk_, &list) == RD_KAFKA_RESP_ERR_NO_ERROR) {
        rd_kafka_pause_partitions(rk_, list);
        rd_kafka_topic_partition_list_destroy(list);
    }
    paused_ = true;
}

void KafkaSource::resume() {
    if (!paused_) return;
    rd_kafka_topic_partition_list_t* list = nullptr;
    if (rd_kafka_assignment(rk_, &list) == RD_KAFKA_RESP_ERR_NO_ERROR) {
        rd_kafka_resume_partitions(rk_, list);
        rd_kafka_topic_partition_list_destroy(list);
    }
    paused_ = false;
}

void KafkaSource::commit_async(const std::map<std::int32_t, std::int64_t>& next_offsets) {
    if (next_offsets.empty() || closed_) return;
    rd_kafka_topic_partition_list_t* list =
        rd_kafka_topic_partition_list_new(static_cast<int>(next_offsets.size()));
    for (const auto& [p, next] : next_offsets) {
        rd_kafka_topic_partition_list_add(list, config_.topic.c_str(), p)->offset = next;
    }
    // Failures only make the lag metric stale; the database holds the real offsets.
    rd_kafka_commit(rk_, list, 1);
    rd_kafka_topic_partition_list_destroy(list);
}

// Position: the offset after the last message poll() returned (or where the partition starts).
// High watermark: librdkafka's cached value from fetch responses (no broker round trip); while
// paused for backpressure nothing is fetched and that value stands still, so then it is asked
// from the partition leader (a short round trip per partition, once a second, while paused).
void KafkaSource::refresh_lag() {
    rd_kafka_topic_partition_list_t* list = nullptr;
    if (rd_kafka_assignment(rk_, &list) != RD_KAFKA_RESP_ERR_NO_ERROR) return;
    if (rd_kafka_position(rk_, list) == RD_KAFKA_RESP_ERR_NO_ERROR) {
        const auto now = std::chrono::steady_clock::now();
        for (int i = 0; i < list->cnt; ++i) {
            const auto& tp = list->elems[i];
            std::int64_t low = 0;
            std::int64_t high = 0;
            const auto rc =
                paused_ ? rd_kafka_query_watermark_offsets(rk_, tp.topic, tp.partition, &low, &high,
                                                           kWatermarkQueryTimeoutMs)
                        : rd_kafka_get_watermark_offsets(rk_, tp.topic, tp.partition, &low, &high);
            if (rc != RD_KAFKA_RESP_ERR_NO_ERROR || high < 0) {
                continue;  // not fetched yet: unknown, not zero
            }
            // No position yet (nothing consumed since assignment): where the partition started.
            std::int64_t position = tp.offset;
            if (position < 0) {
                const auto start = start_offsets_.find(tp.partition);
                if (start == start_offsets_.end()) continue;
                position = start->second == RD_KAFKA_OFFSET_BEGINNING ? low
                           : start->second == RD_KAFKA_OFFSET_END     ? high
                                                                      : start->second;
                if (position < 0) continue;
            }
            const std::int64_t lag = std::max<std::int64_t>(0, high - position);
            auto& samples = lag_samples_[tp.partition];
            samples.push_back({now, lag});
            while (samples.size() > 2 && now - samples.front().at > kLagWindow) {
                samples.pop_front();
            }
            const auto labels = partition_label(tp.partition);
            core::metrics::gauge(kLagName, kLagHelp, labels).set(static_cast<double>(lag));
            const double dt =
                std::chrono::duration<double>(samples.back().at - samples.front().at).count();
            core::metrics::gauge(kLagRateName, kLagRateHelp, labels)
                .set(dt > 0 ? static_cast<double>(samples.back().lag - samples.front().lag) / dt
                            : 0.0);
        }
    }
    rd_kafka_topic_partition_list_destroy(list);
}

void KafkaSource::forget_lag(const std::vector<std::int32_t>& partitions) {
    for (const auto p : partitions) {
        lag_samples_.erase(p);
        start_offsets_.erase(p);
        core::metrics::registry().remove(kLagName, partition_label(p));
        core::metrics::registry().remove(kLagRateName, partition_label(p));
    }
}

std::vector<std::int32_t> KafkaSource::assignment() const {
    std::vector<std::int32_t> out;
    rd_kafka_topic_partition_list_t* list = nullptr;
    if (rd_kafka_assignment(rk_, &list) == RD_KAFKA_RESP_ERR_NO_ERROR) {
        out = partitions_of(list);
        rd_kafka_topic_partition_list_destroy(list);
    }
    return out;
}

}  // namespace trackd::source
