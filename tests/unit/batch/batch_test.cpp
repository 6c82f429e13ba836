#include "trackd/batch/batch.hpp"

#include <gtest/gtest.h>

namespace trackd::batch {
namespace {

using namespace std::chrono_literals;

Row row(const std::string& vehicle, std::int64_t t, std::int32_t partition, std::int64_t offset) {
    Row r;
    r.position.vehicle_id = vehicle;
    r.position.recorded_at_us = t;
    r.partition = partition;
    r.offset = offset;
    return r;
}

TEST(BatchBuilder, FlushesOnRowsBytesAndAge) {
    const auto t0 = BatchBuilder::Clock::time_point{} + 1h;
    BatchBuilder by_rows(Limits{3, 1U << 20U, 1000ms});
    EXPECT_FALSE(by_rows.should_flush(t0));  // empty never flushes
    by_rows.add_row(row("a", 1, 0, 0), 10, t0);
    by_rows.add_row(row("b", 1, 0, 1), 10, t0);
    EXPECT_FALSE(by_rows.should_flush(t0));
    by_rows.add_dead_letter(DeadLetter{0, 2, core::Reason::malformed_json, "x", "{"}, t0);
    EXPECT_TRUE(by_rows.should_flush(t0));

    BatchBuilder by_bytes(Limits{100, 100, 1000ms});
    by_bytes.add_row(row("a", 1, 0, 0), 60, t0);
    EXPECT_FALSE(by_bytes.should_flush(t0));
    by_bytes.add_row(row("a", 2, 0, 1), 60, t0);
    EXPECT_TRUE(by_bytes.should_flush(t0));

    BatchBuilder by_age(Limits{100, 1U << 20U, 500ms});
    by_age.add_row(row("a", 1, 0, 0), 10, t0);
    EXPECT_FALSE(by_age.should_flush(t0 + 499ms));
    EXPECT_TRUE(by_age.should_flush(t0 + 500ms));
}

TEST(BatchBuilder, TakeRecordsNextOffsetsPerPartition) {
    const auto t0 = BatchBuilder::Clock::time_point{};
    BatchBuilder b(Limits{});
    b.add_row(row("a", 1, 0, 10), 5, t0);
    b.add_row(row("b", 1, 1, 7), 5, t0);
    b.add_dead_letter(DeadLetter{0, 11, core::Reason::bad_heading, "", "xyz"}, t0);
    const Batch out = b.take();
    EXPECT_EQ(out.next_offsets, (std::map<std::int32_t, std::int64_t>{{0, 12}, {1, 8}}));
    EXPECT_EQ(out.bytes, 13U);
    EXPECT_EQ(out.messages(), 3U);
    EXPECT_TRUE(b.current().empty());
}

TEST(Batch, DropPartitionRemovesItsRowsAndOffsets) {
    BatchBuilder b(Limits{});
    const auto t0 = BatchBuilder::Clock::time_point{};
    b.add_row(row("a", 1, 0, 1), 5, t0);
    b.add_row(row("b", 1, 1, 1), 5, t0);
    b.add_dead_letter(DeadLetter{1, 2, core::Reason::bad_heading, "", ""}, t0);
    Batch out = b.take();
    out.drop_partition(1);
    ASSERT_EQ(out.rows.size(), 1U);
    EXPECT_EQ(out.rows[0].position.vehicle_id, "a");
    EXPECT_TRUE(out.dead_letters.empty());
    EXPECT_EQ(out.next_offsets.count(1), 0U);
}

TEST(LatestPerVehicle, PicksNewestTimestampThenLaterOffset) {
    Batch b;
    b.rows = {row("v1", 100, 0, 1), row("v1", 300, 0, 2), row("v2", 50, 1, 3),
              row("v1", 200, 0, 4), row("v2", 50, 1, 5),  row("v3", 10, 2, 6)};
    const auto idx = latest_per_vehicle(b);
    ASSERT_EQ(idx.size(), 3U);
    EXPECT_EQ(idx, (std::vector<std::size_t>{1, 4, 5}));
}

}  // namespace
}  // namespace trackd::batch
