// Fakes for running the ingest pipeline (pipeline::run_ingest) in unit tests: a scripted
// source, a recording sink over an in-memory "database" that keeps the sink contract
// (include/trackd/sink/sink.hpp: the offsets update conditional on epoch and start offset), and
// a fake clock. The test thread scripts and inspects; the pipeline's threads call in; all state
// is under one mutex per object.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "trackd/db/connection.hpp"
#include "trackd/sink/sink.hpp"
#include "trackd/source/source.hpp"

namespace trackd::test {

// Waits until `pred` holds (checked every 2 ms) or `timeout` passes; returns pred().
template <class Pred>
bool eventually(Pred&& pred, std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (!pred()) {
        if (std::chrono::steady_clock::now() >= until) return pred();
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return true;
}

// A monotonic clock that moves only when told to.
class FakeClock {
  public:
    std::chrono::steady_clock::time_point now() const {
        const std::lock_guard lock(mutex_);
        return now_;
    }
    void advance(std::chrono::milliseconds d) {
        const std::lock_guard lock(mutex_);
        now_ += d;
    }

  private:
    mutable std::mutex mutex_;
    std::chrono::steady_clock::time_point now_{std::chrono::hours(1)};
};

// Partitions of messages (offset = index) delivered to the pipeline in poll(), and group events
// (assign, revoke) run inside poll() as librdkafka runs its rebalance callback.
class ScriptedSource final : public source::Source {
  public:
    explicit ScriptedSource(source::PartitionOwner& owner) : owner_(owner) {}

    // --- the test's side
    void add(std::int32_t partition, std::string payload) {
        const std::lock_guard lock(mutex_);
        log_[partition].push_back(std::move(payload));
    }
    void assign(std::vector<std::int32_t> partitions) { event(Event{true, std::move(partitions)}); }
    void revoke(std::vector<std::int32_t> partitions) {
        event(Event{false, std::move(partitions)});
    }
    [[nodiscard]] std::size_t delivered() const {
        const std::lock_guard lock(mutex_);
        return delivered_;
    }
    [[nodiscard]] bool events_done() const {
        const std::lock_guard lock(mutex_);
        return events_.empty();
    }
    [[nodiscard]] int pauses() const {
        const std::lock_guard lock(mutex_);
        return pauses_;
    }
    [[nodiscard]] int resumes() const {
        const std::lock_guard lock(mutex_);
        return resumes_;
    }
    [[nodiscard]] bool is_paused() const {
        const std::lock_guard lock(mutex_);
        return paused_;
    }

    // --- the pipeline's side
    std::optional<source::Message> poll(std::chrono::milliseconds timeout) override {
        std::unique_lock lock(mutex_);
        while (!events_.empty()) {
            const Event e = events_.front();
            lock.unlock();  // the owner may call commit_async() and friends
            if (e.assign) {
                const auto starts = owner_.on_assigned(e.partitions);
                lock.lock();
                for (const auto p : e.partitions) {
                    const auto it = starts.find(p);
                    position_[p] = it != starts.end() && it->second ? *it->second : 0;
                }
            } else {
                owner_.on_revoked(e.partitions);
                lock.lock();
                for (const auto p : e.partitions) position_.erase(p);
            }
            events_.pop_front();
        }
        if (!paused_) {
            for (auto& [p, next] : position_) {
                auto& log = log_[p];
                if (next < static_cast<std::int64_t>(log.size())) {
                    source::Message m;
                    m.partition = p;
                    m.offset = next;
                    m.timestamp_ms = -1;
                    m.payload = log[static_cast<std::size_t>(next)];
                    ++next;
                    ++delivered_;
                    return m;
                }
            }
        }
        lock.unlock();
        std::this_thread::sleep_for(std::min(timeout, std::chrono::milliseconds(2)));
        return std::nullopt;
    }
    void pause() override {
        const std::lock_guard lock(mutex_);
        paused_ = true;
        ++pauses_;
    }
    void resume() override {
        const std::lock_guard lock(mutex_);
        paused_ = false;
        ++resumes_;
    }
    [[nodiscard]] bool paused() const override { return is_paused(); }
    void commit_async(const std::map<std::int32_t, std::int64_t>& /*next_offsets*/) override {}
    void close() override {
        std::vector<std::int32_t> all;
        {
            const std::lock_guard lock(mutex_);
            for (const auto& [p, next] : position_) all.push_back(p);
            position_.clear();
        }
        if (!all.empty()) owner_.on_revoked(all);
    }

  private:
    struct Event {
        bool assign = true;
        std::vector<std::int32_t> partitions;
    };
    void event(Event e) {
        const std::lock_guard lock(mutex_);
        events_.push_back(std::move(e));
    }

    source::PartitionOwner& owner_;
    mutable std::mutex mutex_;
    std::map<std::int32_t, std::deque<std::string>> log_;  // deque: payload views stay valid
    std::map<std::int32_t, std::int64_t> position_;        // assigned partitions: next offset
    std::deque<Event> events_;
    std::size_t delivered_ = 0;
    bool paused_ = false;
    int pauses_ = 0;
    int resumes_ = 0;
};

// The database the recording sinks share: stored offsets with owner epochs, and every row and
// dead letter committed, by (partition, offset). Faults are scripted here.
class FakeDatabase {
  public:
    enum class Fault {
        lost_before_commit,  // the connection breaks before COMMIT: nothing is stored
        lost_reply,          // COMMIT is applied, then the connection breaks before the reply
        fatal,               // the commit fails with an error no retry mends, even when down
    };

    // --- the test's side
    void inject(Fault f) {
        const std::lock_guard lock(mutex_);
        faults_.push_back(f);
    }
    // Every commit fails with a lost connection (the database is away) until set back.
    void set_down(bool down) {
        const std::lock_guard lock(mutex_);
        down_ = down;
    }
    // Commits wait here until released (a slow database).
    void hold(bool on) {
        {
            const std::lock_guard lock(mutex_);
            held_ = on;
        }
        cv_.notify_all();
    }
    [[nodiscard]] int waiting() const {
        const std::lock_guard lock(mutex_);
        return waiting_;
    }
    // Another instance claims the partition: its epoch moves on.
    void claim_elsewhere(std::int32_t partition) {
        const std::lock_guard lock(mutex_);
        ++offsets_[partition].epoch;
    }
    [[nodiscard]] std::int64_t next_offset(std::int32_t partition) const {
        const std::lock_guard lock(mutex_);
        const auto it = offsets_.find(partition);
        return it == offsets_.end() ? -1 : it->second.next;
    }
    // How many times each stored (partition, offset) was written, rows and dead letters.
    [[nodiscard]] std::map<std::pair<std::int32_t, std::int64_t>, int> stored() const {
        const std::lock_guard lock(mutex_);
        return stored_;
    }
    [[nodiscard]] int commits() const {
        const std::lock_guard lock(mutex_);
        return commits_;
    }
    [[nodiscard]] int reconnects() const {
        const std::lock_guard lock(mutex_);
        return reconnects_;
    }

    // --- the sinks' side
    std::map<std::int32_t, sink::Claim> claim(const std::vector<std::int32_t>& partitions) {
        const std::lock_guard lock(mutex_);
        std::map<std::int32_t, sink::Claim> out;
        for (const auto p : partitions) {
            auto& row = offsets_[p];
            ++row.epoch;
            out[p] = sink::Claim{row.epoch, row.next >= 0 ? std::optional(row.next) : std::nullopt};
        }
        return out;
    }

    sink::CommitResult commit(const batch::Batch& b,
                              const std::map<std::int32_t, sink::Fence>& fences) {
        std::unique_lock lock(mutex_);
        ++waiting_;
        cv_.wait(lock, [&] { return !held_; });
        --waiting_;
        if (!faults_.empty() && faults_.front() == Fault::fatal) {
            faults_.pop_front();
            throw db::DbError("relation \"trackd.kafka_offsets\" does not exist", "42P01");
        }
        if (down_) throw db::DbError("server closed the connection unexpectedly", "08006");
        if (!faults_.empty() && faults_.front() == Fault::lost_before_commit) {
            faults_.pop_front();
            throw db::DbError("server closed the connection unexpectedly", "08006");
        }
        // The sink contract: the offsets update first, conditional on epoch and start offset.
        sink::CommitResult result;
        std::size_t in_already = 0;
        for (const auto& [p, next] : b.next_offsets) {
            const auto f = fences.find(p);
            const auto& row = offsets_[p];
            if (f == fences.end() || row.epoch != f->second.epoch) {
                result.fenced.insert(p);
            } else if (row.next == next) {
                ++in_already;
            } else if (row.next != f->second.expected_offset) {
                throw sink::OffsetConflict("stored offset moved");
            }
        }
        if (!result.fenced.empty()) return result;
        if (in_already == b.next_offsets.size()) {
            result.already_committed = true;
            return result;
        }
        for (const auto& [p, next] : b.next_offsets) offsets_[p].next = next;
        for (const auto& r : b.rows) ++stored_[{r.partition, r.offset}];
        for (const auto& d : b.dead_letters) ++stored_[{d.partition, d.offset}];
        ++commits_;
        result.ingest_batch_id = commits_;
        if (!faults_.empty() && faults_.front() == Fault::lost_reply) {
            faults_.pop_front();
            throw db::DbError("server closed the connection unexpectedly", "08006");
        }
        return result;
    }

    void reconnected() {
        const std::lock_guard lock(mutex_);
        ++reconnects_;
    }

  private:
    struct OffsetRow {
        std::int64_t epoch = 0;
        std::int64_t next = -1;
    };
    mutable std::mutex mutex_;
    std::condition_variable cv_;
    std::map<std::int32_t, OffsetRow> offsets_;
    std::map<std::pair<std::int32_t, std::int64_t>, int> stored_;
    std::deque<Fault> faults_;
    bool down_ = false;
    bool held_ = false;
    int waiting_ = 0;
    int commits_ = 0;
    int reconnects_ = 0;
};

// One session of the FakeDatabase, as PostgisSink is one session of PostgreSQL.
class RecordingSink final : public sink::Sink {
  public:
    explicit RecordingSink(FakeDatabase& db) : db_(db) {}
    std::map<std::int32_t, sink::Claim> claim(const std::vector<std::int32_t>& p) override {
        return db_.claim(p);
    }
    int end_stuck_writers() override { return 0; }
    void check_group() override {}
    sink::CommitResult commit(const batch::Batch& b,
                              const std::map<std::int32_t, sink::Fence>& fences) override {
        return db_.commit(b, fences);
    }
    std::unordered_map<std::string, sink::LatestPosition> load_latest_positions(
        const std::vector<std::int32_t>& /*partitions*/) override {
        return {};
    }
    void reconnect() override { db_.reconnected(); }

  private:
    FakeDatabase& db_;
};

}  // namespace trackd::test
