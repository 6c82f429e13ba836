#include "fleet_producer.hpp"

#include <stdexcept>

#include <fmt/format.h>

namespace trackd::fleet {
namespace {

// Sized for speed: up to a million messages (or 1 GiB) queued locally.
constexpr std::uint32_t kMaxQueuedMessages = 1'000'000;
constexpr std::uint32_t kSlots = kMaxQueuedMessages + 100'000;
constexpr std::uint64_t kMaxFailuresPrinted = 5;

void set(rd_kafka_conf_t* conf, const std::string& key, const std::string& value) {
    char err[512];
    if (rd_kafka_conf_set(conf, key.c_str(), value.c_str(), err, sizeof err) != RD_KAFKA_CONF_OK) {
        rd_kafka_conf_destroy(conf);
        throw std::runtime_error(fmt::format("kafka property {}={}: {}", key, value, err));
    }
}

}  // namespace

FleetProducer::FleetProducer(const ProducerConfig& config,
                             const std::vector<std::string>& vehicle_ids, Tally& tally,
                             ManifestWriter* manifest)
    : vehicle_ids_(vehicle_ids), tally_(tally), manifest_(manifest) {
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    set(conf, "bootstrap.servers", config.brokers);
    set(conf, "client.id", "trackd-fleet");
    set(conf, "enable.idempotence", "true");  // per-key order holds across retries
    set(conf, "linger.ms", "20");
    set(conf, "batch.size", "1000000");
    set(conf, "batch.num.messages", "100000");
    set(conf, "compression.type", "lz4");
    set(conf, "queue.buffering.max.messages", std::to_string(kMaxQueuedMessages));
    set(conf, "queue.buffering.max.kbytes", "1048576");
    set(conf, "partitioner", "murmur2_random");  // same partition as Java clients for a key
    for (const auto& [key, value] : config.properties) set(conf, key, value);
    rd_kafka_conf_set_opaque(conf, this);
    rd_kafka_conf_set_dr_msg_cb(conf, &FleetProducer::on_delivery);
    rd_kafka_conf_set_error_cb(conf, &FleetProducer::on_error);

    char err[512];
    rk_ = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (rk_ == nullptr) {
        rd_kafka_conf_destroy(conf);
        throw std::runtime_error(fmt::format("cannot create the Kafka producer: {}", err));
    }
    rkt_ = rd_kafka_topic_new(rk_, config.topic.c_str(), nullptr);
    if (rkt_ == nullptr) {
        const std::string why = rd_kafka_err2str(rd_kafka_last_error());
        rd_kafka_destroy(rk_);
        throw std::runtime_error(fmt::format("topic '{}': {}", config.topic, why));
    }

    // Ask for every topic rather than this one, so that nothing is auto-created by asking.
    const rd_kafka_metadata_t* md = nullptr;
    const rd_kafka_resp_err_t merr = rd_kafka_metadata(rk_, 1, nullptr, &md, 15000);
    if (merr != RD_KAFKA_RESP_ERR_NO_ERROR) {
        rd_kafka_topic_destroy(rkt_);
        rd_kafka_destroy(rk_);
        throw std::runtime_error(
            fmt::format("cannot reach Kafka at {}: {}", config.brokers, rd_kafka_err2str(merr)));
    }
    for (int i = 0; i < md->topic_cnt; ++i) {
        if (config.topic == md->topics[i].topic && md->topics[i].err == 0) {
            partitions_ = md->topics[i].partition_cnt;
        }
    }
    rd_kafka_metadata_destroy(md);
    if (partitions_ == 0) {
        rd_kafka_topic_destroy(rkt_);
        rd_kafka_destroy(rk_);
        throw std::runtime_error(fmt::format(
            "topic '{}' does not exist on {} (create it, e.g. scripts/kafka.sh create-topic {} 4)",
            config.topic, config.brokers, config.topic));
    }

    slots_.resize(kSlots);
    free_.reserve(kSlots);
    for (std::uint32_t i = kSlots; i > 0; --i) free_.push_back(i - 1);
}

FleetProducer::~FleetProducer() {
    if (in_flight() > 0) purge();
    rd_kafka_topic_destroy(rkt_);
    rd_kafka_destroy(rk_);
}

void FleetProducer::produce(const Message& message) {
    while (free_.empty()) rd_kafka_poll(rk_, 10);
    const std::uint32_t slot = free_.back();
    free_.pop_back();
    InFlight& rec = slots_[slot];
    rec.kind = message.kind;
    rec.vehicle = message.vehicle;
    rec.has_recorded_at = message.recorded_at_ms.has_value();
    rec.recorded_at_ms = message.recorded_at_ms.value_or(0);
    const std::string& key = vehicle_ids_[message.vehicle];
    for (;;) {
        // librdkafka's C API takes a non-const payload pointer even with F_COPY.
        if (rd_kafka_produce(rkt_, RD_KAFKA_PARTITION_UA, RD_KAFKA_MSG_F_COPY,
                             const_cast<char*>(message.payload.data()), message.payload.size(),
                             key.data(), key.size(), &rec) == 0) {
            return;
        }
        const rd_kafka_resp_err_t err = rd_kafka_last_error();
        if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
            rd_kafka_poll(rk_, 10);
            continue;
        }
        report_failure(rec, rd_kafka_err2str(err));
        free_.push_back(slot);
        return;
    }
}

void FleetProducer::poll() { rd_kafka_poll(rk_, 0); }

std::uint64_t FleetProducer::flush(std::chrono::milliseconds timeout) {
    rd_kafka_flush(rk_, static_cast<int>(timeout.count()));
    rd_kafka_poll(rk_, 0);
    return in_flight();
}

void FleetProducer::purge() {
    rd_kafka_purge(rk_, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
    // Purged messages come back as failed delivery reports.
    for (int i = 0; i < 50 && in_flight() > 0; ++i) rd_kafka_poll(rk_, 100);
}

void FleetProducer::report_failure(const InFlight& rec, const char* what) {
    tally_.count_failed(rec.kind);
    if (++failures_reported_ <= kMaxFailuresPrinted) {
        fmt::print(stderr, "trackd-fleet: delivery failed ({} for {}): {}\n",
                   kinds()[rec.kind].name, vehicle_ids_[rec.vehicle], what);
        if (failures_reported_ == kMaxFailuresPrinted) {
            fmt::print(stderr, "trackd-fleet: (further delivery failures are only counted)\n");
        }
    }
}

void FleetProducer::on_delivery(rd_kafka_t* /*rk*/, const rd_kafka_message_t* message,
                                void* opaque) {
    auto* self = static_cast<FleetProducer*>(opaque);
    auto* rec = static_cast<InFlight*>(message->_private);
    if (message->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        self->report_failure(*rec, rd_kafka_err2str(message->err));
    } else {
        self->tally_.count_delivered(rec->kind);
        if (message->offset < 0 && ++self->delivered_without_offset_ == 1) {
            fmt::print(stderr,
                       "trackd-fleet: librdkafka reported a delivery without an offset "
                       "(partition {}); its manifest line says offset {}\n",
                       message->partition, message->offset);
        }
        if (self->manifest_ != nullptr) {
            self->manifest_->write(message->partition, message->offset, kinds()[rec->kind],
                                   self->vehicle_ids_[rec->vehicle],
                                   rec->has_recorded_at
                                       ? std::optional<std::int64_t>(rec->recorded_at_ms)
                                       : std::nullopt);
        }
    }
    self->free_.push_back(static_cast<std::uint32_t>(rec - self->slots_.data()));
}

void FleetProducer::on_error(rd_kafka_t* rk, int err, const char* reason, void* opaque) {
    auto* self = static_cast<FleetProducer*>(opaque);
    if (err == RD_KAFKA_RESP_ERR__FATAL) {
        char buf[512];
        rd_kafka_fatal_error(rk, buf, sizeof buf);
        self->fatal_ = buf;
        fmt::print(stderr, "trackd-fleet: fatal Kafka error: {}\n", buf);
        return;
    }
    fmt::print(stderr, "trackd-fleet: kafka: {}\n", reason);
}

}  // namespace trackd::fleet
