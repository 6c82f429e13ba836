// Samples trackd.kafka_offsets (next offset and owner epoch of every partition of a topic) every
// 100 ms on a thread of its own while a fault test runs, and answers questions about the
// samples afterwards: when did partitions move on, what was the longest window with no commit.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "trackd/db/connection.hpp"

namespace trackd::test {

struct OffsetRow {
    std::int64_t next = -1;  // -1: claimed, nothing stored yet
    std::int64_t epoch = 0;
};

struct OffsetsSample {
    std::chrono::steady_clock::time_point at;
    std::map<int, OffsetRow> rows;
    // Stored messages: the sum of next offsets (of `partitions` only, when given).
    [[nodiscard]] std::int64_t sum(const std::set<int>* partitions = nullptr) const {
        std::int64_t s = 0;
        for (const auto& [p, r] : rows) {
            if (partitions == nullptr || partitions->count(p) != 0)
                s += std::max<std::int64_t>(r.next, 0);
        }
        return s;
    }
};

// The longest window with no commit (see OffsetsSampler::longest_stall).
struct Stall {
    std::chrono::milliseconds length{0};
    std::chrono::steady_clock::time_point from;  // the last commit before it
};

class OffsetsSampler {
  public:
    // `waiting(stored)`: whether messages wait to be committed when `stored` are (e.g. fewer
    // than the fleet sends while it sends at a steady rate). Time when nothing waits is never
    // counted as a stall.
    OffsetsSampler(std::string dsn, std::string topic, std::string group,
                   std::function<bool(std::int64_t)> waiting,
                   std::chrono::milliseconds interval = std::chrono::milliseconds(100))
        : dsn_(std::move(dsn)),
          topic_(std::move(topic)),
          group_(std::move(group)),
          waiting_(std::move(waiting)),
          interval_(interval),
          thread_([this] { loop(); }) {}
    ~OffsetsSampler() { stop(); }
    OffsetsSampler(const OffsetsSampler&) = delete;
    OffsetsSampler& operator=(const OffsetsSampler&) = delete;

    void stop() {
        stop_ = true;
        if (thread_.joinable()) thread_.join();
    }

    [[nodiscard]] std::vector<OffsetsSample> samples() const {
        const std::lock_guard lock(mutex_);
        return samples_;
    }
    [[nodiscard]] OffsetsSample latest() const {
        const std::lock_guard lock(mutex_);
        return samples_.empty() ? OffsetsSample{} : samples_.back();
    }
    // The first sample at or after `from` for which `pred` holds.
    [[nodiscard]] std::optional<OffsetsSample> first(
        std::chrono::steady_clock::time_point from,
        const std::function<bool(const OffsetsSample&)>& pred) const {
        const std::lock_guard lock(mutex_);
        for (const auto& s : samples_) {
            if (s.at >= from && pred(s)) return s;
        }
        return std::nullopt;
    }

    // The longest window in [from, to] during which the stored sum (of `partitions`, or of all)
    // did not rise while messages were waiting: from the last sample that saw a commit (or
    // since messages began to wait) to the next one that saw one (or `to`). Resolution: the
    // sampling interval.
    [[nodiscard]] Stall longest_stall(std::chrono::steady_clock::time_point from,
                                      std::chrono::steady_clock::time_point to,
                                      const std::set<int>* partitions = nullptr) const {
        const std::lock_guard lock(mutex_);
        Stall best;
        std::optional<std::chrono::steady_clock::time_point> since;
        std::int64_t prev = -1;
        std::chrono::steady_clock::time_point last_at;
        for (std::size_t i = 0; i < samples_.size(); ++i) {
            const auto& s = samples_[i];
            if (s.at < from || s.at > to) continue;
            const auto sum = s.sum(partitions);
            last_at = s.at;
            const bool rose = prev >= 0 && sum > prev;
            if (since && (rose || !waiting_at_[i])) {
                consider(best, *since, s.at);
                since.reset();
            }
            if (waiting_at_[i] && !since) since = s.at;
            prev = sum;
        }
        if (since) consider(best, *since, last_at);
        return best;
    }

  private:
    static void consider(Stall& best, std::chrono::steady_clock::time_point a,
                         std::chrono::steady_clock::time_point b) {
        const auto len = std::chrono::duration_cast<std::chrono::milliseconds>(b - a);
        if (len > best.length) best = Stall{len, a};
    }

    void loop() {
        std::unique_ptr<db::Connection> conn;
        while (!stop_.load()) {
            const auto next = std::chrono::steady_clock::now() + interval_;
            try {
                if (!conn) conn = std::make_unique<db::Connection>(dsn_, "trackd test sampler");
                auto r = conn->query(
                    "SELECT kafka_partition, next_offset, owner_epoch FROM trackd.kafka_offsets "
                    "WHERE topic = $1 AND consumer_group = $2",
                    {topic_, group_});
                OffsetsSample s;
                s.at = std::chrono::steady_clock::now();
                for (int i = 0; i < r.rows(); ++i) {
                    s.rows[std::stoi(r.at(i, 0))] = {std::stoll(r.at(i, 1)),
                                                     std::stoll(r.at(i, 2))};
                }
                const bool waiting = waiting_(s.sum());
                const std::lock_guard lock(mutex_);
                samples_.push_back(std::move(s));
                waiting_at_.push_back(waiting);
            } catch (const std::exception&) {
                conn.reset();  // the next turn reconnects
            }
            std::this_thread::sleep_until(next);
        }
    }

    std::string dsn_;
    std::string topic_;
    std::string group_;
    std::function<bool(std::int64_t)> waiting_;
    std::chrono::milliseconds interval_;
    mutable std::mutex mutex_;
    std::vector<OffsetsSample> samples_;
    std::vector<bool> waiting_at_;
    std::atomic<bool> stop_{false};
    std::thread thread_;  // last: starts once the rest is built
};

}  // namespace trackd::test
