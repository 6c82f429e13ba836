// A librdkafka produce/consume round trip through the real local broker: proves the broker
// the other integration tests rely on is a real one and speaks the protocol trackd uses.
#include <chrono>
#include <map>
#include <string>

#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>
#include <unistd.h>

#include "support/process.hpp"
#include "support/services.hpp"

namespace trackd::test {
namespace {

rd_kafka_conf_t* make_conf(const std::map<std::string, std::string>& props) {
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    char err[512];
    for (const auto& [k, v] : props) {
        if (rd_kafka_conf_set(conf, k.c_str(), v.c_str(), err, sizeof err) != RD_KAFKA_CONF_OK) {
            ADD_FAILURE() << k << ": " << err;
        }
    }
    return conf;
}

TEST(KafkaBroker, ProduceConsumeRoundTrip) {
    const std::string topic = "trackd-roundtrip-" + std::to_string(getpid());
    const auto created = run_command(std::string(TRACKD_SOURCE_DIR) + "/scripts/kafka.sh " +
                                     "create-topic " + topic + " 3");
    ASSERT_EQ(created.exit_code, 0) << created.output;

    char err[512];
    rd_kafka_t* producer = rd_kafka_new(
        RD_KAFKA_PRODUCER, make_conf({{"bootstrap.servers", kafka_brokers()}, {"linger.ms", "5"}}),
        err, sizeof err);
    ASSERT_NE(producer, nullptr) << err;
    rd_kafka_topic_t* topic_handle = rd_kafka_topic_new(producer, topic.c_str(), nullptr);
    ASSERT_NE(topic_handle, nullptr);
    constexpr int kMessages = 300;
    for (int i = 0; i < kMessages; ++i) {
        const std::string key = "v" + std::to_string(i % 7);
        const std::string value = "message-" + std::to_string(i);
        const int rc = rd_kafka_produce(topic_handle, RD_KAFKA_PARTITION_UA, RD_KAFKA_MSG_F_COPY,
                                        const_cast<char*>(value.data()), value.size(), key.data(),
                                        key.size(), nullptr);
        ASSERT_EQ(rc, 0) << rd_kafka_err2str(rd_kafka_last_error());
    }
    ASSERT_EQ(rd_kafka_flush(producer, 30000), RD_KAFKA_RESP_ERR_NO_ERROR);
    rd_kafka_topic_destroy(topic_handle);
    rd_kafka_destroy(producer);

    rd_kafka_t* consumer = rd_kafka_new(RD_KAFKA_CONSUMER,
                                        make_conf({{"bootstrap.servers", kafka_brokers()},
                                                   {"group.id", topic + "-group"},
                                                   {"auto.offset.reset", "earliest"},
                                                   {"enable.auto.commit", "false"}}),
                                        err, sizeof err);
    ASSERT_NE(consumer, nullptr) << err;
    rd_kafka_poll_set_consumer(consumer);
    rd_kafka_topic_partition_list_t* subs = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(subs, topic.c_str(), RD_KAFKA_PARTITION_UA);
    ASSERT_EQ(rd_kafka_subscribe(consumer, subs), RD_KAFKA_RESP_ERR_NO_ERROR);
    rd_kafka_topic_partition_list_destroy(subs);

    std::map<std::string, int> seen;
    std::map<std::string, int32_t> partition_of_key;
    bool key_on_two_partitions = false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (static_cast<int>(seen.size()) < kMessages &&
           std::chrono::steady_clock::now() < deadline) {
        rd_kafka_message_t* m = rd_kafka_consumer_poll(consumer, 500);
        if (m == nullptr) continue;
        if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
            seen[std::string(static_cast<const char*>(m->payload), m->len)]++;
            const std::string key(static_cast<const char*>(m->key), m->key_len);
            auto [it, inserted] = partition_of_key.emplace(key, m->partition);
            if (!inserted && it->second != m->partition) key_on_two_partitions = true;
        }
        rd_kafka_message_destroy(m);
    }
    rd_kafka_consumer_close(consumer);
    rd_kafka_destroy(consumer);
    run_command(std::string(TRACKD_SOURCE_DIR) + "/scripts/kafka.sh delete-topic " + topic);

    ASSERT_EQ(static_cast<int>(seen.size()), kMessages);
    for (const auto& [value, count] : seen) EXPECT_EQ(count, 1) << value;
    EXPECT_FALSE(key_on_two_partitions) << "one key must map to one partition";
}

}  // namespace
}  // namespace trackd::test
