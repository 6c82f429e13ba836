#include "trackd/pipeline/ingest.hpp"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>

#include "trackd/batch/batch.hpp"
#include "trackd/core/log.hpp"
#include "trackd/core/metrics.hpp"
#include "trackd/core/pause_point.hpp"
#include "trackd/core/string_table.hpp"
#include "trackd/core/time.hpp"
#include "trackd/db/connection.hpp"
#include "trackd/decode/payload_decoder.hpp"
#include "trackd/registry/schema_registry.hpp"
#include "trackd/sink/postgis/postgis_sink.hpp"
#include "trackd/sink/sink.hpp"
#include "trackd/source/kafka_source.hpp"
#include "trackd/source/source.hpp"
#include "trackd/validate/validator.hpp"

namespace trackd::pipeline {
namespace {

using Clock = std::chrono::steady_clock;
using sink::Sink;

// Errors worth retrying the batch for: DbError::retryable() (the connection is gone, or the
// server asks to try again), or a partition attached while the batch wrote rows of its range
// to the DEFAULT partition.
bool retryable(const db::DbError& e) {
    return e.retryable() || sink::postgis::default_partition_race(e);
}

// A batch on its way to the database, with the fence of each of its partitions as it was
// read: the owner epoch (a batch read before a partition was re-claimed is fenced by the
// database) and the stored offset the batch starts from (a batch is never stored twice).
struct PendingBatch {
    batch::Batch batch;
    std::map<std::int32_t, sink::Fence> fences;
};

// One per writer connection: the partitions it commits and the batches waiting for it.
struct Shard {
    explicit Shard(batch::Limits limits) : builder(limits) {}
    batch::BatchBuilder builder;     // poll thread only
    std::deque<PendingBatch> queue;  // under the pipeline's mutex
    bool committing = false;         // under the pipeline's mutex
    // queue non-empty or committing: written under the pipeline's mutex, read without it by
    // the poll thread, which asks on every turn once a batch is batch.min_ms old (taking the
    // mutex for that was 3% of its CPU).
    std::atomic<bool> busy{false};
};

// The ingest metrics (docs/operations.md lists them): looked up once, updated lock-free.
struct Metrics {
    using M = core::metrics::Labels;
    core::metrics::Counter& consumed =
        core::metrics::counter("trackd_messages_consumed_total", "Messages read from Kafka");
    core::metrics::Counter& accepted = core::metrics::counter(
        "trackd_messages_accepted_total", "Messages that passed decoding and validation");
    // By reason code (core/rejection.hpp), indexed by the Reason's value.
    std::vector<core::metrics::Counter*> rejected = [] {
        std::vector<core::metrics::Counter*> out;
        for (const auto& r : core::reasons()) {
            out.push_back(&core::metrics::counter(
                "trackd_messages_rejected_total",
                "Messages refused and written to trackd.dead_letters, by reason code",
                {{"reason", std::string(r.code)}}));
        }
        return out;
    }();
    core::metrics::Counter& rows_written =
        core::metrics::counter("trackd_rows_written_total", "History rows committed to PostGIS");
    core::metrics::Counter& batches =
        core::metrics::counter("trackd_batches_committed_total", "Batches committed to PostGIS");
    core::metrics::Counter& fenced = core::metrics::counter(
        "trackd_fenced_commits_total",
        "Batch commits refused by the owner-epoch fence (partitions taken over elsewhere)");
    // A commit whose connection broke before its reply (outcome unknown), by what the retry
    // found: the batch was in already, or it was not and was committed again.
    core::metrics::Counter& in_doubt_committed = core::metrics::counter(
        "trackd_commits_in_doubt_total",
        "Batch commits whose connection broke before the reply, by the outcome read back",
        M{{"outcome", "committed"}});
    core::metrics::Counter& in_doubt_not_committed = core::metrics::counter(
        "trackd_commits_in_doubt_total",
        "Batch commits whose connection broke before the reply, by the outcome read back",
        M{{"outcome", "not_committed"}});
    core::metrics::Counter& abandoned_on_revoke = core::metrics::counter(
        "trackd_batches_abandoned_on_revoke_total",
        "Queued batches of revoked partitions dropped uncommitted (the new owner reads them)");
    core::metrics::Counter& db_retries = core::metrics::counter(
        "trackd_db_retries_total", "Database operations of the ingest retried after an error");
    core::metrics::Counter& db_errors_retryable = core::metrics::counter(
        "trackd_db_errors_total", "Database errors seen by the ingest", M{{"kind", "retryable"}});
    core::metrics::Counter& db_errors_fatal = core::metrics::counter(
        "trackd_db_errors_total", "Database errors seen by the ingest", M{{"kind", "fatal"}});
    core::metrics::Counter& paused_seconds = core::metrics::counter(
        "trackd_ingest_paused_seconds_total",
        "Time Kafka fetching was paused because batch.inflight_bytes was reached");
    core::metrics::Gauge& waiting_for_schema = core::metrics::gauge(
        "trackd_messages_waiting_for_schema",
        "Messages held until the schema registry answers for their schema id (or for an "
        "earlier message of their partition)");
    core::metrics::Gauge& inflight_bytes = core::metrics::gauge(
        "trackd_ingest_inflight_bytes", "Payload bytes read from Kafka and not yet committed");
    core::metrics::Gauge& last_commit = core::metrics::gauge(
        "trackd_last_commit_timestamp_seconds",
        "Unix time of the last batch committed to PostGIS (0: none since start)");
    core::metrics::Histogram& batch_rows =
        core::metrics::histogram("trackd_batch_rows", "History rows per committed batch",
                                 core::metrics::exponential_buckets(1, 4, 9));  // 1 .. 65536
    core::metrics::Histogram& commit_seconds = core::metrics::histogram(
        "trackd_batch_commit_duration_seconds",
        "Time of one successful batch transaction (COPY, upsert, dead letters, offsets, COMMIT)",
        core::metrics::exponential_buckets(0.001, 2, 15));  // 1 ms .. 16 s
    core::metrics::Histogram& freshness = core::metrics::histogram(
        "trackd_freshness_seconds", "Per row: commit time minus the Kafka message timestamp",
        core::metrics::exponential_buckets(0.01, 2, 16));  // 10 ms .. 5.5 min
};

std::string integer(double v) { return fmt::format("{:.0f}", v); }

class Ingest final : public source::PartitionOwner {
  public:
    Ingest(const config::Config& config, const std::atomic<bool>& stop, const IngestSeams& seams)
        : config_(config),
          stop_(stop),
          seams_(seams),
          decoder_(*decode::parse_format(config.kafka.format),
                   static_cast<std::size_t>(config.validate.max_payload_bytes),
                   !config.kafka.schema_registry_url.empty()),
          registry_(config.kafka.schema_registry_url.empty()
                        ? nullptr
                        : std::make_unique<registry::SchemaRegistry>(config.kafka)),
          validator_(config.validate),
          control_(connect_with_retry("trackd ingest control")) {
        const batch::Limits limits{static_cast<std::size_t>(config.batch.max_rows),
                                   static_cast<std::size_t>(config.batch.max_bytes),
                                   std::chrono::milliseconds(config.batch.max_ms),
                                   std::chrono::milliseconds(config.batch.min_ms)};
        for (int i = 0; i < config.batch.writers; ++i) shards_.emplace_back(limits);
    }

    void run() {
        if (!control_) return;  // stopped before the database came back
        // Before joining the group: a second group on the same topic and database would store
        // every message again; refuse with the other group's name and the fix.
        control_->check_group();
        const auto owned_source = seams_.source(*this);
        auto& source = *owned_source;
        source_ = &source;
        std::vector<std::thread> committers;
        for (std::size_t i = 0; i < shards_.size(); ++i) {
            committers.emplace_back([this, i] { commit_loop(i); });
        }
        anchor_wall_clock();
        auto last_stats = seams_.now();
        auto last_tick = last_stats;
        const auto limit = config_.batch.inflight_bytes;
        try {
            while (!stop_.load() && !failed()) {
                // Backpressure: above the in-flight limit stop fetching, keep polling for
                // group events; resume below three quarters of it.
                const auto inflight = inflight_bytes_.load();
                metrics_.inflight_bytes.set(static_cast<double>(inflight));
                if (!source.paused() && inflight >= limit) {
                    source.pause();
                    core::log::info("paused: in-flight limit reached",
                                    {{"inflight_bytes", std::to_string(inflight)}});
                } else if (source.paused() && inflight < limit / 4 * 3) {
                    source.resume();
                    core::log::info("resumed", {{"inflight_bytes", std::to_string(inflight)}});
                }
                auto m = source.poll(std::chrono::milliseconds(20));
                // One clock read per turn: the message's batch age and validation's wall clock.
                const auto now = seams_.now();
                if (source.paused()) {
                    metrics_.paused_seconds.add(
                        std::chrono::duration<double>(now - last_tick).count());
                }
                last_tick = now;
                if (registry_) release_held(now, wall_clock_us(now));
                if (m) handle(*m, now, wall_clock_us(now));
                for (std::size_t i = 0; i < shards_.size(); ++i) {
                    auto& builder = shards_[i].builder;
                    if (builder.should_flush(now) ||
                        (builder.may_flush_early(now) && writer_idle(i))) {
                        enqueue(i, builder.take());
                    }
                }
                if (now - last_stats >= std::chrono::seconds(10)) {
                    log_stats();
                    last_stats = now;
                }
                if (now - wall_anchor_.steady >= std::chrono::seconds(1)) anchor_wall_clock();
            }
        } catch (...) {
            stop_committers(std::chrono::milliseconds(0));
            for (auto& t : committers) t.join();
            source_ = nullptr;
            throw;
        }
        // Clean stop: commit what was read if the database lets us within a few seconds,
        // otherwise abandon it (it was not committed, so it will be read again).
        for (std::size_t i = 0; i < shards_.size(); ++i) {
            if (!shards_[i].builder.current().empty()) enqueue(i, shards_[i].builder.take());
        }
        stop_committers(seams_.shutdown_grace);
        for (auto& t : committers) t.join();
        source.close();
        source_ = nullptr;
        log_stats();
        if (fatal_) std::rethrow_exception(fatal_);
    }

    std::map<std::int32_t, std::optional<std::int64_t>> on_assigned(
        const std::vector<std::int32_t>& partitions) override {
        std::map<std::int32_t, std::optional<std::int64_t>> starts;
        with_retry(
            "claim partitions",
            [&] {
                std::map<std::int32_t, sink::Claim> claims;
                try {
                    claims = control_->claim(partitions);
                } catch (const db::DbError& e) {
                    // A previous owner holds the offsets rows: frozen between statements, the
                    // server ends it after pg.idle_in_transaction_timeout_ms; frozen inside a
                    // statement, nothing on the server would, so it is ended here.
                    if (e.sqlstate() == "55P03") control_->end_stuck_writers();
                    throw;
                }
                // Reload after claiming: positions committed by a previous owner are visible now
                // and nothing older can commit any more.
                auto latest = control_->load_latest_positions(partitions);
                for (const auto& [p, c] : claims) {
                    epochs_[p] = c.epoch;
                    expected_[p] = c.next_offset.value_or(-1);
                    starts[p] = c.next_offset;
                    core::log::info("claimed partition",
                                    {{"partition", std::to_string(p)},
                                     {"epoch", std::to_string(c.epoch)},
                                     {"next_offset", c.next_offset ? std::to_string(*c.next_offset)
                                                                   : std::string("none")}});
                }
                for (auto& [id, pos] : latest) {
                    latest_.insert_or_assign(
                        id,
                        Latest{{pos.recorded_at_us, pos.longitude, pos.latitude}, pos.partition});
                }
            },
            control_.get());
        return starts;
    }

    void on_revoked(const std::vector<std::int32_t>& partitions) override {
        // Rows not yet handed to the committer are dropped (they were not committed, the next
        // owner reads them again); batches already queued commit only if the epoch still holds.
        const std::set<std::int32_t> revoked(partitions.begin(), partitions.end());
        for (const auto p : partitions) {
            inflight_bytes_ -= static_cast<std::int64_t>(shard_of(p).builder.drop_partition(p));
            epochs_.erase(p);
            expected_.erase(p);
            drop_held(p);
        }
        // Queued batches are abandoned too, so that a rebalance costs at most the batch already
        // in COMMIT, not the queue read ahead: the fence makes dropping them safe (the new
        // owner starts from the stored offset), and committing them would only delay the new
        // owner's claim behind this instance's writers.
        std::size_t abandoned = 0;
        {
            const std::lock_guard lock(mutex_);
            for (auto& shard : shards_) {
                for (auto& pending : shard.queue) {
                    for (const auto p : partitions) {
                        if (pending.batch.next_offsets.count(p) != 0) {
                            pending.batch.drop_partition(p);
                            pending.fences.erase(p);
                            ++abandoned;
                        }
                    }
                }
            }
        }
        if (abandoned > 0) {
            metrics_.abandoned_on_revoke.inc(abandoned);
            core::log::info("abandoned queued batches of revoked partitions",
                            {{"batch_partitions", std::to_string(abandoned)}});
        }
        // Positions read from these partitions may not have been committed: forget them, and
        // reload them from the database if the partitions come back.
        latest_.erase_if(
            [&](const std::string&, const Latest& l) { return revoked.count(l.partition) != 0; });
    }

  private:
    std::unique_ptr<Sink> connect_with_retry(const std::string& name,
                                             const std::atomic<bool>* abandon = nullptr) {
        std::unique_ptr<Sink> out;
        with_retry(
            "connect to PostgreSQL", [&] { out = seams_.sink(name); }, nullptr, abandon);
        return out;
    }

    // Runs `fn` until it succeeds, sleeping with exponential backoff on retryable database
    // errors; rethrows others. Gives up (returns) when trackd is stopping: with `abandon`, once
    // that is set (the writers', when their batches are given up), without it once stop_ is;
    // and either way once another thread failed, so that a fatal error ends trackd at once
    // instead of when the database comes back.
    template <class Fn>
    void with_retry(const char* what, Fn&& fn, Sink* sink = nullptr,
                    const std::atomic<bool>* abandon = nullptr) {
        auto delay = std::chrono::milliseconds(100);
        // An outage is logged when it starts, once a minute while it lasts, and when it ends:
        // a lost connection as the database unavailable, any other retryable error (a lock or
        // statement timeout, a serialization failure, no resources) as the database refusing.
        core::log::Recurring unavailable(core::log::Level::warn, "database unavailable, retrying");
        core::log::Recurring refused(core::log::Level::warn, "database refused, retrying");
        for (;;) {
            try {
                fn();
                unavailable.over("database reachable again", {{"during", what}});
                refused.over("database accepts again", {{"during", what}});
                return;
            } catch (const db::DbError& e) {
                if (!retryable(e)) {
                    metrics_.db_errors_fatal.inc();
                    throw;
                }
                metrics_.db_errors_retryable.inc();
                metrics_.db_retries.inc();
                (e.connection_lost() ? unavailable : refused)
                    .occurred({{"during", what},
                               {"error", e.what()},
                               {"retry_in_ms", std::to_string(delay.count())}});
            }
            const auto until = Clock::now() + delay;
            while (Clock::now() < until) {
                if (failed() || (abandon != nullptr ? abandon->load() : stop_.load())) return;
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
            }
            delay = std::min(delay * 2, std::chrono::milliseconds(5000));
            if (sink != nullptr) {
                try {
                    sink->reconnect();
                } catch (const db::DbError&) {  // NOLINT(bugprone-empty-catch): next round
                }
            }
        }
    }

    [[nodiscard]] bool failed() const { return failed_.load(); }

    // The wall clock validation checks timestamps against, derived from the steady clock read
    // once per poll turn; re-anchored every second, so a stepped system clock shows within 1 s.
    struct WallAnchor {
        Clock::time_point steady;
        std::int64_t unix_us = 0;
    };
    void anchor_wall_clock() { wall_anchor_ = WallAnchor{seams_.now(), core::now_us()}; }
    [[nodiscard]] std::int64_t wall_clock_us(Clock::time_point now) const {
        return wall_anchor_.unix_us +
               std::chrono::duration_cast<std::chrono::microseconds>(now - wall_anchor_.steady)
                   .count();
    }

    void handle(const source::Message& m, Clock::time_point now, std::int64_t now_us) {
        metrics_.consumed.inc();
        inflight_bytes_ += static_cast<std::int64_t>(m.payload.size());
        // Behind a message that waits for its schema, the rest of its partition waits too:
        // offsets commit in order.
        if (!held_.empty()) {
            if (auto it = held_.find(m.partition); it != held_.end()) return hold(it->second, m);
        }
        if (!process(m, now, now_us)) hold(held_[m.partition], m);
    }

    // A message kept until the registry answers (it owns its bytes; the poll's views do not
    // outlive the next poll).
    struct HeldMessage {
        std::int32_t partition = 0;
        std::int64_t offset = 0;
        std::int64_t timestamp_ms = 0;
        std::string key, payload;
        [[nodiscard]] source::Message view() const {
            return source::Message{partition, offset, timestamp_ms, key, payload};
        }
    };

    void hold(std::deque<HeldMessage>& queue, const source::Message& m) {
        queue.push_back(HeldMessage{m.partition, m.offset, m.timestamp_ms, std::string(m.key),
                                    std::string(m.payload)});
        ++held_count_;
        metrics_.waiting_for_schema.set(static_cast<double>(held_count_));
    }

    // Forgets the unknown ids whose time is up, hands the registry's answers to the decoder,
    // then goes on with the held messages whose schemas are known now, in partition order.
    void release_held(Clock::time_point now, std::int64_t now_us) {
        while (!unknown_schemas_.empty() && unknown_schemas_.front().forget_at <= now) {
            decoder_.protobuf().forget_schema(unknown_schemas_.front().schema_id);
            unknown_schemas_.pop_front();
        }
        auto answers = registry_->take_answers();
        if (answers.empty()) return;
        for (auto& a : answers) {
            if (a.found) {
                decoder_.protobuf().add_schema(a.schema_id, a.body);
            } else {
                decoder_.protobuf().add_unknown_schema(a.schema_id, std::move(a.body));
                unknown_schemas_.push_back(
                    {now + std::chrono::seconds(config_.kafka.schema_registry_unknown_retry_s),
                     a.schema_id});
            }
        }
        for (auto it = held_.begin(); it != held_.end();) {
            auto& queue = it->second;
            while (!queue.empty() && process(queue.front().view(), now, now_us)) {
                queue.pop_front();
                --held_count_;
            }
            it = queue.empty() ? held_.erase(it) : std::next(it);
        }
        metrics_.waiting_for_schema.set(static_cast<double>(held_count_));
    }

    void drop_held(std::int32_t partition) {
        const auto it = held_.find(partition);
        if (it == held_.end()) return;
        for (const auto& h : it->second) {
            inflight_bytes_ -= static_cast<std::int64_t>(h.payload.size());
        }
        held_count_ -= it->second.size();
        held_.erase(it);
        metrics_.waiting_for_schema.set(static_cast<double>(held_count_));
    }

    // Decodes, validates and batches one message; false when it needs a schema the registry
    // has not answered for yet (asked for now; nothing else done).
    bool process(const source::Message& m, Clock::time_point now, std::int64_t now_us) {
        auto decoded = decoder_.decode(m.payload);
        if (const auto* need = std::get_if<decode::SchemaNeeded>(&decoded)) {
            registry_->request(need->schema_id);
            return false;
        }
        if (auto* r = std::get_if<core::Rejection>(&decoded)) {
            reject(m, std::move(*r), now);
            return true;
        }
        auto& msg = std::get<decode::DecodedMessage>(decoded);
        Latest* known = latest_.find(msg.vehicle_id);
        const validate::LastPosition* last = known == nullptr ? nullptr : &known->position;
        auto validated = validator_.validate(std::move(msg), last, now_us);
        if (auto* r = std::get_if<core::Rejection>(&validated)) {
            reject(m, std::move(*r), now);
            return true;
        }
        auto& pos = std::get<core::Position>(validated);
        const Latest here{{pos.recorded_at_us, pos.longitude, pos.latitude}, m.partition};
        // trackd's total order is (recorded_at, offset): an equal time read later wins, as in
        // the current-state upsert, whatever the batch size.
        if (known == nullptr) {
            latest_.insert_or_assign(pos.vehicle_id, here);
        } else if (pos.recorded_at_us >= last->recorded_at_us) {
            *known = here;
        }
        metrics_.accepted.inc();
        shard_of(m.partition)
            .builder.add_row(
                batch::Row{std::move(pos), m.partition, m.offset, m.timestamp_ms, known == nullptr},
                m.payload.size(), now);
        return true;
    }

    void reject(const source::Message& m, core::Rejection r, Clock::time_point now) {
        metrics_.rejected[static_cast<std::size_t>(r.reason)]->inc();
        shard_of(m.partition)
            .builder.add_dead_letter(batch::DeadLetter{m.partition, m.offset, r.reason,
                                                       std::move(r.detail), std::string(m.payload)},
                                     now);
    }

    // Partitions are spread over the writers, so that batches of one partition commit in
    // order on one connection while other partitions commit in parallel on others.
    Shard& shard_of(std::int32_t partition) {
        return shards_[static_cast<std::size_t>(partition) % shards_.size()];
    }

    void enqueue(std::size_t shard, batch::Batch b) {
        PendingBatch pending{std::move(b), {}};
        for (const auto& [p, next] : pending.batch.next_offsets) {
            auto it = epochs_.find(p);
            if (it == epochs_.end()) continue;  // not ours: the sink fences it
            // Batches of a partition commit in order on one writer, each from where the one
            // before it ends.
            auto& expected = expected_[p];
            pending.fences[p] = sink::Fence{it->second, expected};
            expected = next;
        }
        {
            const std::lock_guard lock(mutex_);
            shards_[shard].queue.push_back(std::move(pending));
            shards_[shard].busy = true;
        }
        cv_.notify_all();
    }

    // Nothing queued or at COMMIT on the shard's writer (batch.min_ms).
    [[nodiscard]] bool writer_idle(std::size_t shard) const { return !shards_[shard].busy; }

    // Under mutex_.
    [[nodiscard]] std::size_t uncommitted_batches() const {
        std::size_t n = 0;
        for (const auto& shard : shards_) n += shard.queue.size() + (shard.committing ? 1 : 0);
        return n;
    }

    void stop_committers(std::chrono::milliseconds grace) {
        {
            const std::lock_guard lock(mutex_);
            draining_ = true;
        }
        cv_.notify_all();
        std::unique_lock lock(mutex_);
        if (!cv_.wait_for(lock, grace, [this] { return uncommitted_batches() == 0; })) {
            core::log::warn("abandoning uncommitted batches at shutdown",
                            {{"batches", std::to_string(uncommitted_batches())}});
        }
        abandon_ = true;
        cv_.notify_all();
    }

    void commit_loop(std::size_t index) {
        auto& shard = shards_[index];
        std::unique_ptr<Sink> writer;
        try {
            writer = connect_with_retry("trackd ingest writer " + std::to_string(index), &abandon_);
        } catch (...) {
            fail(std::current_exception());
            return;
        }
        if (!writer) return;  // stopped before the database came back
        for (;;) {
            PendingBatch pending;
            {
                std::unique_lock lock(mutex_);
                cv_.wait(lock,
                         [&] { return !shard.queue.empty() || abandon_ || draining_ || failed(); });
                // Abandoned, drained at shutdown, or another writer failed.
                if (abandon_ || failed() || shard.queue.empty()) return;
                pending = std::move(shard.queue.front());
                shard.queue.pop_front();
                shard.committing = true;
            }
            const auto bytes = pending.batch.bytes;
            // The fault suite holds a batch here to make its instance a zombie
            // (docs/reliability.md).
            static core::PausePoint pause("TRACKD_TEST_INGEST_PAUSE_AT", "ingest");
            pause.at("before-commit");
            try {
                commit_one(*writer, pending);
            } catch (...) {
                fail(std::current_exception());
            }
            inflight_bytes_ -= static_cast<std::int64_t>(bytes);
            {
                const std::lock_guard lock(mutex_);
                shard.committing = false;
                shard.busy = !shard.queue.empty();
            }
            cv_.notify_all();
            if (failed()) return;
        }
    }

    void commit_one(Sink& writer, PendingBatch& pending) {
        auto& b = pending.batch;
        // on_revoked() may have emptied it while it was queued.
        while (!b.empty()) {
            sink::CommitResult result;
            bool done = false;
            // A connection lost during the transaction leaves its outcome unknown when COMMIT
            // may have reached the server. It is never guessed: the retry's first statement,
            // the conditional offsets update, finds the batch in or not (the sink's contract).
            bool in_doubt = false;
            with_retry(
                "commit batch",
                [&] {
                    const auto start = Clock::now();
                    try {
                        result = writer.commit(b, pending.fences);
                    } catch (const db::DbError& e) {
                        if (e.connection_lost()) in_doubt = true;
                        throw;
                    }
                    metrics_.commit_seconds.observe(
                        std::chrono::duration<double>(Clock::now() - start).count());
                    done = true;
                },
                &writer, &abandon_);
            if (!done) return;  // abandoned at shutdown
            if (in_doubt && result.fenced.empty()) {
                (result.already_committed ? metrics_.in_doubt_committed
                                          : metrics_.in_doubt_not_committed)
                    .inc();
                core::log::warn(result.already_committed
                                    ? "commit outcome was unknown: the batch was in; not stored "
                                      "again"
                                    : "commit outcome was unknown: the batch was not in; "
                                      "committed now",
                                {{"messages", std::to_string(b.messages())}});
            } else if (result.already_committed) {
                core::log::warn("batch found committed already; not stored again",
                                {{"messages", std::to_string(b.messages())}});
            }
            if (result.fenced.empty()) {
                observe_commit(b);
                if (source_ != nullptr) source_->commit_async(b.next_offsets);
                return;
            }
            metrics_.fenced.inc();
            std::string parts;
            for (const auto p : result.fenced) {
                parts += (parts.empty() ? "" : ",") + std::to_string(p);
                b.drop_partition(p);
            }
            core::log::warn("commit refused by the epoch fence: partitions now owned elsewhere",
                            {{"partitions", parts}});
        }
    }

    void observe_commit(const batch::Batch& b) {
        const auto now_ms = core::now_us() / 1000;
        metrics_.rows_written.inc(b.rows.size());
        metrics_.batches.inc();
        metrics_.batch_rows.observe(static_cast<double>(b.rows.size()));
        metrics_.last_commit.set(static_cast<double>(now_ms) / 1000.0);
        for (const auto& row : b.rows) {
            if (row.kafka_timestamp_ms >= 0) {
                metrics_.freshness.observe(static_cast<double>(now_ms - row.kafka_timestamp_ms) /
                                           1000.0);
            }
        }
    }

    void fail(std::exception_ptr e) {
        {
            const std::lock_guard lock(mutex_);
            if (!fatal_) fatal_ = std::move(e);
        }
        failed_ = true;
        cv_.notify_all();
    }

    [[nodiscard]] double rejected_total() const {
        double n = 0;
        for (const auto* c : metrics_.rejected) n += c->value();
        return n;
    }

    void log_stats() {
        core::log::info("ingest stats",
                        {{"consumed", integer(metrics_.consumed.value())},
                         {"accepted", integer(metrics_.accepted.value())},
                         {"rejected", integer(rejected_total())},
                         {"rows_committed", integer(metrics_.rows_written.value())},
                         {"batches_committed", integer(metrics_.batches.value())},
                         {"fenced_commits", integer(metrics_.fenced.value())},
                         {"db_retries", integer(metrics_.db_retries.value())},
                         {"inflight_bytes", std::to_string(inflight_bytes_.load())}});
    }

    const config::Config& config_;
    const std::atomic<bool>& stop_;
    const IngestSeams& seams_;

    // Poll thread only.
    decode::PayloadDecoder decoder_;
    // With kafka.schema_registry_url: the registry client and, per partition, the messages
    // waiting for its answer (in offset order).
    std::unique_ptr<registry::SchemaRegistry> registry_;
    std::map<std::int32_t, std::deque<HeldMessage>> held_;
    std::size_t held_count_ = 0;
    // Ids the registry did not know, in the order their verdicts expire
    // (kafka.schema_registry_unknown_retry_s): then their next message asks again.
    struct UnknownSchema {
        Clock::time_point forget_at;
        std::uint32_t schema_id = 0;
    };
    std::deque<UnknownSchema> unknown_schemas_;
    validate::Validator validator_;
    std::deque<Shard> shards_;  // a deque: Shard holds an atomic and does not move
    std::unique_ptr<Sink> control_;
    // The latest accepted position per vehicle and the partition it came from.
    struct Latest {
        validate::LastPosition position;
        std::int32_t partition = 0;
    };
    core::StringTable<Latest> latest_;
    std::map<std::int32_t, std::int64_t> epochs_;
    // Per owned partition: the offset the next batch starts from (-1: nothing stored yet).
    std::map<std::int32_t, std::int64_t> expected_;
    WallAnchor wall_anchor_;
    source::Source* source_ = nullptr;

    // Shared with the committer.
    std::mutex mutex_;
    std::condition_variable cv_;
    bool draining_ = false;
    std::atomic<bool> abandon_{false};
    std::atomic<bool> failed_{false};
    std::exception_ptr fatal_;
    std::atomic<std::int64_t> inflight_bytes_{0};
    Metrics metrics_;
};

}  // namespace

IngestSeams production_seams(const config::Config& config) {
    IngestSeams seams;
    seams.source = [&config](source::PartitionOwner& owner) -> std::unique_ptr<source::Source> {
        return std::make_unique<source::KafkaSource>(config.kafka, owner);
    };
    seams.sink = [&config](const std::string& name) -> std::unique_ptr<Sink> {
        return std::make_unique<sink::postgis::PostgisSink>(config, name);
    };
    return seams;
}

void run_ingest(const config::Config& config, const std::atomic<bool>& stop,
                const IngestSeams& seams) {
    Ingest ingest(config, stop, seams);
    ingest.run();
}

}  // namespace trackd::pipeline
