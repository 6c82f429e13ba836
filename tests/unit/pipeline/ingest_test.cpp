// The ingest pipeline's own logic, without Kafka or PostgreSQL: backpressure, retries after a
// lost connection (and a lost COMMIT reply), fencing, revocation mid-batch and shutdown, run by
// pipeline::run_ingest against a scripted source, a recording sink and a fake clock.
#include "trackd/pipeline/ingest.hpp"

#include <atomic>
#include <thread>

#include <gtest/gtest.h>

#include "support/ingest_fakes.hpp"

namespace trackd::test {
namespace {

using namespace std::chrono_literals;

std::int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

// A valid position of `vehicle` (each call a little later and a few metres further east).
std::string position(const std::string& vehicle, int i) {
    return R"({"vehicle_id":")" + vehicle + R"(","timestamp":)" +
           std::to_string(now_ms() - 600000 + i * 1000) + R"(,"latitude":52.5,"longitude":)" +
           std::to_string(13.4 + 0.0001 * i) + "}";
}

// run_ingest on its own thread with the fakes; stops and joins on destruction.
class Pipeline {
  public:
    explicit Pipeline(config::Config config, std::chrono::milliseconds grace = 5000ms)
        : config_(std::move(config)) {
        seams_.source = [this](source::PartitionOwner& owner) {
            auto s = std::make_unique<ScriptedSource>(owner);
            source_.store(s.get());
            return std::unique_ptr<source::Source>(std::move(s));
        };
        seams_.sink = [this](const std::string& /*name*/) {
            return std::unique_ptr<sink::Sink>(std::make_unique<RecordingSink>(db_));
        };
        seams_.now = [this] { return clock_.now(); };
        seams_.shutdown_grace = grace;
    }
    ~Pipeline() {
        if (thread_.joinable()) stop();
    }

    void start() {
        thread_ = std::thread([this] {
            try {
                pipeline::run_ingest(config_, stop_, seams_);
            } catch (const std::exception& e) {
                error_ = e.what();
            }
            finished_ = true;
        });
        ASSERT_TRUE(eventually([&] { return source_.load() != nullptr; }));
    }
    // Stops it and waits; returns false if run_ingest did not return within `timeout`.
    bool stop(std::chrono::milliseconds timeout = 20000ms) {
        stop_ = true;
        const bool returned = eventually([&] { return finished_.load(); }, timeout);
        if (returned) thread_.join();
        return returned;
    }

    ScriptedSource& source() { return *source_.load(); }
    FakeDatabase& db() { return db_; }
    FakeClock& clock() { return clock_; }
    [[nodiscard]] const std::string& error() const { return error_; }
    [[nodiscard]] bool finished() const { return finished_.load(); }

    // Every offset below `n` of `partition` stored exactly once.
    [[nodiscard]] ::testing::AssertionResult stored_once(std::int32_t partition,
                                                         std::int64_t n) const {
        const auto stored = db_.stored();
        for (std::int64_t o = 0; o < n; ++o) {
            const auto it = stored.find({partition, o});
            const int times = it == stored.end() ? 0 : it->second;
            if (times != 1) {
                return ::testing::AssertionFailure()
                       << "offset " << partition << "/" << o << " stored " << times << " times";
            }
        }
        return ::testing::AssertionSuccess();
    }

  private:
    config::Config config_;
    pipeline::IngestSeams seams_;
    FakeDatabase db_;
    FakeClock clock_;
    std::atomic<ScriptedSource*> source_{nullptr};
    std::atomic<bool> stop_{false};
    std::atomic<bool> finished_{false};
    std::string error_;
    std::thread thread_;
};

config::Config small_batches(int max_rows, int writers = 1) {
    config::Config c;
    c.batch.max_rows = max_rows;
    c.batch.max_ms = 50;
    c.batch.writers = writers;
    return c;
}

TEST(IngestPipeline, PausesFetchingAtTheInflightLimitAndResumesBelowIt) {
    auto config = small_batches(10);
    config.batch.inflight_bytes = 2000;  // about 17 messages of ~120 bytes
    Pipeline p(config);
    p.db().hold(true);
    p.start();
    p.source().assign({0});
    for (int i = 0; i < 100; ++i) p.source().add(0, position("veh-bp", i));
    ASSERT_TRUE(eventually([&] { return p.source().is_paused(); }));
    // Paused: nothing more is read while the database holds the commits.
    const auto read_when_paused = p.source().delivered();
    EXPECT_LT(read_when_paused, 100U);
    EXPECT_GE(read_when_paused * 100, 2000U);  // it did read up to the limit first
    p.db().hold(false);
    ASSERT_TRUE(eventually([&] { return p.db().next_offset(0) == 100; }))
        << "stored next offset " << p.db().next_offset(0);
    EXPECT_GE(p.source().pauses(), 1);
    EXPECT_GE(p.source().resumes(), 1);
    EXPECT_TRUE(p.stored_once(0, 100));
    ASSERT_TRUE(p.stop());
    EXPECT_EQ(p.error(), "");
}

// Rows a revoke drops from the batch being built are no longer in flight: fetching paused on
// them resumes, and the partitions still held go on.
TEST(IngestPipeline, ARevokeReleasesTheInflightBytesOfTheRowsItDrops) {
    auto config = small_batches(1000);  // no flush by count; the test's clock does not move
    config.batch.inflight_bytes = 2000;
    Pipeline p(config);
    p.start();
    p.source().assign({0, 1});
    for (int i = 0; i < 100; ++i) p.source().add(0, position("veh-rv", i));
    ASSERT_TRUE(eventually([&] { return p.source().is_paused(); }));
    EXPECT_EQ(p.db().commits(), 0);
    p.source().revoke({0});
    ASSERT_TRUE(eventually([&] { return !p.source().is_paused(); }))
        << "paused for rows that were dropped";
    const auto before = p.source().delivered();
    for (int i = 0; i < 3; ++i) p.source().add(1, position("veh-kept", i));
    ASSERT_TRUE(eventually([&] { return p.source().delivered() == before + 3; }));
    p.clock().advance(1000ms);
    ASSERT_TRUE(eventually([&] { return p.db().next_offset(1) == 3; }));
    EXPECT_TRUE(p.stored_once(1, 3));
    EXPECT_EQ(p.db().next_offset(0), -1);
    ASSERT_TRUE(p.stop());
    EXPECT_EQ(p.error(), "");
}

// A writer's fatal error ends trackd while another writer retries a database that is away:
// the retry gives up at once instead of holding the exit until the database comes back.
TEST(IngestPipeline, AFatalErrorEndsItWhileAnotherWriterRetries) {
    Pipeline p(small_batches(2, 2));
    p.db().set_down(true);
    p.start();
    p.source().assign({0, 1});
    for (int i = 0; i < 4; ++i) {
        p.source().add(0, position("veh-f0", i));
        p.source().add(1, position("veh-f1", i));
    }
    ASSERT_TRUE(eventually([&] { return p.source().delivered() == 8; }));
    std::this_thread::sleep_for(300ms);  // both writers have met the database away
    p.db().inject(FakeDatabase::Fault::fatal);
    ASSERT_TRUE(eventually([&] { return p.finished(); }, 15000ms))
        << "still waiting for the database to come back";
    EXPECT_NE(p.error().find("does not exist"), std::string::npos) << p.error();
    EXPECT_EQ(p.db().commits(), 0);
    ASSERT_TRUE(p.stop());
}

TEST(IngestPipeline, RetriesALostConnectionAndNeverStoresABatchWhoseReplyWasLostTwice) {
    Pipeline p(small_batches(10));
    // The first commit's connection breaks before COMMIT; the second's after it (the server
    // committed, the reply was lost); then two more lost replies.
    p.db().inject(FakeDatabase::Fault::lost_before_commit);
    p.db().inject(FakeDatabase::Fault::lost_reply);
    p.db().inject(FakeDatabase::Fault::lost_reply);
    p.db().inject(FakeDatabase::Fault::lost_reply);
    p.start();
    p.source().assign({0});
    for (int i = 0; i < 50; ++i) p.source().add(0, position("veh-lost", i));
    ASSERT_TRUE(eventually([&] { return p.db().next_offset(0) == 50; }))
        << "stored next offset " << p.db().next_offset(0);
    EXPECT_TRUE(p.stored_once(0, 50));
    // A new session after each lost connection (the last one may still be on its way).
    EXPECT_TRUE(eventually([&] { return p.db().reconnects() >= 4; }));
    // Each lost reply's batch was found in on the new session: committed once, not twice.
    EXPECT_EQ(p.db().commits(), 5);
    ASSERT_TRUE(p.stop());
    EXPECT_EQ(p.error(), "") << "a lost reply is never fatal";
}

TEST(IngestPipeline, DropsAFencedPartitionAndCommitsTheRest) {
    Pipeline p(small_batches(20));  // one writer: batches hold both partitions
    p.db().hold(true);
    p.start();
    p.source().assign({0, 1});
    for (int i = 0; i < 10; ++i) {
        p.source().add(0, position("veh-a", i));
        p.source().add(1, position("veh-b", i));
    }
    ASSERT_TRUE(eventually([&] { return p.db().waiting() == 1; }));  // a batch is at COMMIT
    p.db().claim_elsewhere(1);  // another instance took partition 1 meanwhile
    p.db().hold(false);
    ASSERT_TRUE(eventually([&] { return p.db().next_offset(0) == 10; }));
    EXPECT_TRUE(p.stored_once(0, 10));
    for (const auto& [coord, times] : p.db().stored()) {
        EXPECT_NE(coord.first, 1) << "a row of the fenced partition was stored: " << coord.second;
    }
    EXPECT_EQ(p.db().next_offset(1), -1);
    ASSERT_TRUE(p.stop());
    EXPECT_EQ(p.error(), "");
}

TEST(IngestPipeline, ARevokeAbandonsTheQueuedBatchesOfThePartition) {
    Pipeline p(small_batches(5));
    p.db().hold(true);
    p.start();
    p.source().assign({0});
    for (int i = 0; i < 40; ++i) p.source().add(0, position("veh-rv", i));
    // All 40 read: one batch of 5 waits at COMMIT, the other 7 are queued behind it.
    ASSERT_TRUE(eventually([&] { return p.source().delivered() == 40 && p.db().waiting() == 1; }));
    p.clock().advance(1000ms);  // the builder's last rows are old enough to flush
    std::this_thread::sleep_for(50ms);
    p.source().revoke({0});
    ASSERT_TRUE(eventually([&] { return p.source().events_done(); }));
    p.db().hold(false);
    // Only the batch already at COMMIT goes in; the queue is dropped, not committed.
    ASSERT_TRUE(eventually([&] { return p.db().commits() == 1; }));
    std::this_thread::sleep_for(200ms);
    EXPECT_EQ(p.db().commits(), 1);
    EXPECT_EQ(p.db().next_offset(0), 5);
    EXPECT_TRUE(p.stored_once(0, 5));
    EXPECT_EQ(p.db().stored().size(), 5U);
    ASSERT_TRUE(p.stop());
    EXPECT_EQ(p.error(), "");
}

TEST(IngestPipeline, ABatchFlushesWhenItsOldestRowReachesMaxMsOnTheClock) {
    auto config = small_batches(1000);
    config.batch.max_ms = 500;
    config.batch.min_ms = 500;  // the age rule alone
    Pipeline p(config);
    p.start();
    p.source().assign({0});
    for (int i = 0; i < 3; ++i) p.source().add(0, position("veh-age", i));
    ASSERT_TRUE(eventually([&] { return p.source().delivered() == 3; }));
    std::this_thread::sleep_for(100ms);  // real time passes; the pipeline's clock does not
    EXPECT_EQ(p.db().commits(), 0);
    p.clock().advance(499ms);
    std::this_thread::sleep_for(100ms);
    EXPECT_EQ(p.db().commits(), 0) << "younger than batch.max_ms";
    p.clock().advance(1ms);
    ASSERT_TRUE(eventually([&] { return p.db().commits() == 1; }));
    EXPECT_EQ(p.db().next_offset(0), 3);
    ASSERT_TRUE(p.stop());
}

TEST(IngestPipeline, AnIdleWritersBatchCommitsAtMinMs) {
    auto config = small_batches(1000);
    config.batch.max_ms = 500;
    config.batch.min_ms = 50;
    Pipeline p(config);
    p.start();
    p.source().assign({0});
    for (int i = 0; i < 3; ++i) p.source().add(0, position("veh-idle", i));
    ASSERT_TRUE(eventually([&] { return p.source().delivered() == 3; }));
    p.clock().advance(49ms);
    std::this_thread::sleep_for(100ms);
    EXPECT_EQ(p.db().commits(), 0) << "younger than batch.min_ms";
    p.clock().advance(1ms);
    ASSERT_TRUE(eventually([&] { return p.db().commits() == 1; }));
    EXPECT_EQ(p.db().next_offset(0), 3);
    ASSERT_TRUE(p.stop());
}

// While a writer commits, its next batch grows past batch.min_ms (what arrives meanwhile
// goes into one batch) and is handed over when the writer is free, or at batch.max_ms.
TEST(IngestPipeline, ABusyWritersBatchGrowsUntilTheWriterIsFreeOrMaxMs) {
    auto config = small_batches(1000);
    config.batch.max_ms = 500;
    config.batch.min_ms = 50;
    Pipeline p(config);
    p.db().hold(true);
    p.start();
    p.source().assign({0});
    int sent = 0;
    auto send3 = [&](const char* vehicle) {
        for (int i = 0; i < 3; ++i) p.source().add(0, position(vehicle, sent + i));
        sent += 3;
        ASSERT_TRUE(eventually([&] { return p.source().delivered() == std::size_t(sent); }));
    };
    send3("veh-a");
    p.clock().advance(50ms);
    ASSERT_TRUE(eventually([&] { return p.db().waiting() == 1; }));  // A at COMMIT
    send3("veh-b");
    p.clock().advance(100ms);
    send3("veh-c");
    p.clock().advance(100ms);  // B is 200 ms old: past min_ms, but its writer is busy
    std::this_thread::sleep_for(100ms);
    p.db().hold(false);
    ASSERT_TRUE(eventually([&] { return p.db().next_offset(0) == 9; }));
    std::this_thread::sleep_for(100ms);
    EXPECT_EQ(p.db().commits(), 2) << "B and C commit as one batch after A";

    p.db().hold(true);
    send3("veh-d");
    p.clock().advance(50ms);
    ASSERT_TRUE(eventually([&] { return p.db().waiting() == 1; }));  // D at COMMIT
    send3("veh-e");
    p.clock().advance(500ms);  // E reaches max_ms: queued behind D although the writer is busy
    std::this_thread::sleep_for(100ms);
    send3("veh-f");
    p.clock().advance(50ms);
    std::this_thread::sleep_for(100ms);
    p.db().hold(false);
    ASSERT_TRUE(eventually([&] { return p.db().next_offset(0) == 18; }));
    std::this_thread::sleep_for(100ms);
    EXPECT_EQ(p.db().commits(), 5) << "D, E and F each a batch";
    EXPECT_TRUE(p.stored_once(0, 18));
    ASSERT_TRUE(p.stop());
    EXPECT_EQ(p.error(), "");
}

TEST(IngestPipeline, ShutdownCommitsWhatWasReadWhenTheDatabaseLetsIt) {
    auto config = small_batches(1000);
    config.batch.max_ms = 60000;  // nothing flushes on its own
    Pipeline p(config);
    p.start();
    p.source().assign({0});
    for (int i = 0; i < 30; ++i) p.source().add(0, position("veh-stop", i));
    ASSERT_TRUE(eventually([&] { return p.source().delivered() == 30; }));
    EXPECT_EQ(p.db().commits(), 0);
    ASSERT_TRUE(p.stop());
    EXPECT_EQ(p.error(), "");
    EXPECT_EQ(p.db().next_offset(0), 30);
    EXPECT_TRUE(p.stored_once(0, 30));
}

TEST(IngestPipeline, ShutdownAbandonsBatchesTheDatabaseRefusesWithinTheGrace) {
    Pipeline p(small_batches(10), 300ms);
    p.db().set_down(true);  // every commit fails: the database is away
    p.start();
    p.source().assign({0});
    for (int i = 0; i < 30; ++i) p.source().add(0, position("veh-down", i));
    ASSERT_TRUE(eventually([&] { return p.source().delivered() == 30; }));
    // Stops within the grace plus one retry back-off, without storing anything or failing.
    ASSERT_TRUE(p.stop(20000ms)) << "run_ingest did not return";
    EXPECT_EQ(p.error(), "");
    EXPECT_EQ(p.db().commits(), 0);
    EXPECT_EQ(p.db().next_offset(0), -1);
}

}  // namespace
}  // namespace trackd::test
