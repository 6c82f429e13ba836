// Producing hand-made positions to a test topic: keyed JSON messages, all to partition 0 (the
// tests that use it have one partition, so Kafka order is the order given).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>

#include "support/services.hpp"

namespace trackd::test {

struct TestPosition {
    std::string vehicle;
    std::int64_t time_ms = 0;  // the message's `timestamp` (epoch milliseconds)
    double lon = 0;
    double lat = 0;
};

// Sends them in order to partition 0 of `topic` and waits until the broker has them all.
inline void produce_positions(const std::string& topic, const std::vector<TestPosition>& msgs) {
    char err[512];
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "bootstrap.servers", kafka_brokers().c_str(), err, sizeof err);
    rd_kafka_t* producer = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    ASSERT_NE(producer, nullptr) << err;
    rd_kafka_topic_t* t = rd_kafka_topic_new(producer, topic.c_str(), nullptr);
    for (const auto& m : msgs) {
        char payload[256];
        const int n = std::snprintf(
            payload, sizeof payload,
            R"({"vehicle_id":"%s","timestamp":%lld,"latitude":%.7f,"longitude":%.7f})",
            m.vehicle.c_str(), static_cast<long long>(m.time_ms), m.lat, m.lon);
        ASSERT_EQ(rd_kafka_produce(t, 0, RD_KAFKA_MSG_F_COPY, payload, static_cast<size_t>(n),
                                   m.vehicle.data(), m.vehicle.size(), nullptr),
                  0);
    }
    ASSERT_EQ(rd_kafka_flush(producer, 10000), RD_KAFKA_RESP_ERR_NO_ERROR);
    rd_kafka_topic_destroy(t);
    rd_kafka_destroy(producer);
}

}  // namespace trackd::test
