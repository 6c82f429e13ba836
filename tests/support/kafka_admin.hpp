// Topics for the tests, through librdkafka's Admin API on the test broker (kafka_brokers()).
// Same behaviour as `scripts/kafka.sh create-topic/delete-topic` (which kafka_roundtrip_test.cpp
// tests), without starting a JVM per call: a test's topic costs milliseconds, not two seconds
// of CPU on a machine the other tests share.
#pragma once

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include <librdkafka/rdkafka.h>

#include "support/services.hpp"

namespace trackd::test {

class KafkaAdmin {
  public:
    explicit KafkaAdmin(const std::string& brokers = kafka_brokers()) {
        rd_kafka_conf_t* conf = rd_kafka_conf_new();
        char err[512];
        if (rd_kafka_conf_set(conf, "bootstrap.servers", brokers.c_str(), err, sizeof err) !=
            RD_KAFKA_CONF_OK) {
            rd_kafka_conf_destroy(conf);
            throw std::runtime_error(std::string("kafka admin: ") + err);
        }
        rk_.reset(rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err));
        if (!rk_) throw std::runtime_error(std::string("kafka admin: ") + err);
    }

    // Idempotent: a topic that exists keeps its partitions, or gets more if it has fewer.
    void create_topic(const std::string& name, int partitions) {
        char err[512];
        rd_kafka_NewTopic_t* t =
            rd_kafka_NewTopic_new(name.c_str(), partitions, 1, err, sizeof err);
        if (t == nullptr) throw std::runtime_error("kafka admin: topic " + name + ": " + err);
        auto ev = run(rd_kafka_CreateTopics, &t, RD_KAFKA_EVENT_CREATETOPICS_RESULT);
        rd_kafka_NewTopic_destroy(t);
        const auto code = topic_result(ev.get(), rd_kafka_event_CreateTopics_result(ev.get()),
                                       rd_kafka_CreateTopics_result_topics, "create " + name);
        if (code == RD_KAFKA_RESP_ERR_NO_ERROR) return wait_for_metadata(name, partitions);
        if (code != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
            throw std::runtime_error("kafka admin: create " + name + ": " + rd_kafka_err2str(code));
        }
        rd_kafka_NewPartitions_t* p =
            rd_kafka_NewPartitions_new(name.c_str(), partitions, err, sizeof err);
        if (p == nullptr) throw std::runtime_error("kafka admin: topic " + name + ": " + err);
        auto pev = run(rd_kafka_CreatePartitions, &p, RD_KAFKA_EVENT_CREATEPARTITIONS_RESULT);
        rd_kafka_NewPartitions_destroy(p);
        const auto pcode =
            topic_result(pev.get(), rd_kafka_event_CreatePartitions_result(pev.get()),
                         rd_kafka_CreatePartitions_result_topics, "raise partitions of " + name);
        // INVALID_PARTITIONS: it already has that many or more.
        if (pcode != RD_KAFKA_RESP_ERR_NO_ERROR && pcode != RD_KAFKA_RESP_ERR_INVALID_PARTITIONS) {
            throw std::runtime_error("kafka admin: raise partitions of " + name + ": " +
                                     rd_kafka_err2str(pcode));
        }
        wait_for_metadata(name, partitions);
    }

    // Idempotent: a topic that is not there is fine.
    void delete_topic(const std::string& name) {
        rd_kafka_DeleteTopic_t* t = rd_kafka_DeleteTopic_new(name.c_str());
        auto ev = run(rd_kafka_DeleteTopics, &t, RD_KAFKA_EVENT_DELETETOPICS_RESULT);
        rd_kafka_DeleteTopic_destroy(t);
        const auto code = topic_result(ev.get(), rd_kafka_event_DeleteTopics_result(ev.get()),
                                       rd_kafka_DeleteTopics_result_topics, "delete " + name);
        if (code != RD_KAFKA_RESP_ERR_NO_ERROR && code != RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) {
            throw std::runtime_error("kafka admin: delete " + name + ": " + rd_kafka_err2str(code));
        }
    }

  private:
    // The controller answers before every broker's metadata has the topic; a producer that
    // asks at once (trackd-fleet checks the topic) would be told it does not exist. Waits, at
    // most 30 s, until the broker lists the topic with `partitions` partitions.
    void wait_for_metadata(const std::string& name, int partitions) {
        rd_kafka_topic_t* t = rd_kafka_topic_new(rk_.get(), name.c_str(), nullptr);
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (std::chrono::steady_clock::now() < until) {
            const rd_kafka_metadata_t* md = nullptr;
            if (rd_kafka_metadata(rk_.get(), 0, t, &md, 2000) == RD_KAFKA_RESP_ERR_NO_ERROR) {
                const bool ready = md->topic_cnt == 1 &&
                                   md->topics[0].err == RD_KAFKA_RESP_ERR_NO_ERROR &&
                                   md->topics[0].partition_cnt >= partitions;
                rd_kafka_metadata_destroy(md);
                if (ready) {
                    rd_kafka_topic_destroy(t);
                    return;
                }
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        rd_kafka_topic_destroy(t);
        throw std::runtime_error("kafka admin: topic " + name + " not in the metadata after 30 s");
    }

    struct EventFree {
        void operator()(rd_kafka_event_t* e) const { rd_kafka_event_destroy(e); }
    };
    using Event = std::unique_ptr<rd_kafka_event_t, EventFree>;

    // Sends one admin request (`call` with the one object `*obj`) and waits for its result
    // event; the broker's operation timeout (30 s) bounds how long the controller may take.
    template <typename Call, typename Obj>
    Event run(Call call, Obj** obj, rd_kafka_event_type_t want) {
        rd_kafka_queue_t* q = rd_kafka_queue_new(rk_.get());
        rd_kafka_AdminOptions_t* opts = rd_kafka_AdminOptions_new(rk_.get(), RD_KAFKA_ADMIN_OP_ANY);
        char err[512];
        rd_kafka_AdminOptions_set_request_timeout(opts, 60000, err, sizeof err);
        rd_kafka_AdminOptions_set_operation_timeout(opts, 30000, err, sizeof err);
        call(rk_.get(), obj, 1, opts, q);
        Event ev(rd_kafka_queue_poll(q, 90000));
        rd_kafka_AdminOptions_destroy(opts);
        rd_kafka_queue_destroy(q);
        if (!ev || rd_kafka_event_type(ev.get()) != want) {
            throw std::runtime_error("kafka admin: no answer from the broker");
        }
        return ev;
    }

    // The request's own error, else the one topic's.
    template <typename Result, typename Topics>
    static rd_kafka_resp_err_t topic_result(rd_kafka_event_t* ev, const Result* res, Topics topics,
                                            const std::string& what) {
        if (rd_kafka_event_error(ev) != RD_KAFKA_RESP_ERR_NO_ERROR) {
            throw std::runtime_error("kafka admin: " + what + ": " +
                                     rd_kafka_event_error_string(ev));
        }
        size_t n = 0;
        const rd_kafka_topic_result_t** r = topics(res, &n);
        if (n != 1) throw std::runtime_error("kafka admin: " + what + ": no topic in the answer");
        return rd_kafka_topic_result_error(r[0]);
    }

    struct HandleFree {
        void operator()(rd_kafka_t* rk) const { rd_kafka_destroy(rk); }
    };
    std::unique_ptr<rd_kafka_t, HandleFree> rk_;
};

}  // namespace trackd::test
