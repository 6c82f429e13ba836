#include "trackd/core/log.hpp"

#include <sstream>
#include <vector>

#include <gtest/gtest.h>

namespace trackd::core::log {
namespace {

constexpr std::string_view kTs = "2026-01-02T03:04:05.678Z";

TEST(Log, TextLineWithPlainAndQuotedValues) {
    EXPECT_EQ(format_line(Level::warn, "database unavailable, retrying",
                          {{"during", "commit batch"}, {"retry_in_ms", "200"}, {"empty", ""}},
                          false, kTs),
              "2026-01-02T03:04:05.678Z warn  database unavailable, retrying "
              "during=\"commit batch\" retry_in_ms=200 empty=\"\"\n");
}

// A libpq error spans lines ("ERROR: ...\nDETAIL: ..."): the event must stay one line.
TEST(Log, TextValuesAreEscapedToOneLine) {
    const auto line =
        format_line(Level::error, "failed\nbadly",
                    {{"error", "ERROR:  x\nDETAIL:  \"y\" = z\\w\t\x01"}}, false, kTs);
    EXPECT_EQ(line,
              "2026-01-02T03:04:05.678Z error failed badly "
              "error=\"ERROR:  x\\nDETAIL:  \\\"y\\\" = z\\\\w\\t\\x01\"\n");
    EXPECT_EQ(line.find('\n'), line.size() - 1);
}

TEST(Log, JsonLineIsOneObject) {
    const auto line = format_line(Level::info, "ingest \"stats\"",
                                  {{"consumed", "10"}, {"error", "a\nb"}}, true, kTs);
    EXPECT_EQ(line,
              "{\"ts\":\"2026-01-02T03:04:05.678Z\",\"level\":\"info\",\"msg\":\"ingest "
              "\\\"stats\\\"\",\"consumed\":\"10\",\"error\":\"a\\nb\"}\n");
    EXPECT_EQ(line.find('\n'), line.size() - 1);
}

// The lines written to stderr while `fn` runs, without their timestamps.
template <class Fn>
std::vector<std::string> logged(Fn&& fn) {
    testing::internal::CaptureStderr();
    fn();
    std::istringstream in(testing::internal::GetCapturedStderr());
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);)
        lines.push_back(line.substr(line.find(' ') + 1));
    return lines;
}

// A loop retrying every 5 s through a 3-minute outage (37 tries, 0 to 180 s) says so 4 times,
// not 37.
TEST(Log, RecurringConditionIsLoggedFirstThenOncePerIntervalThenWhenOver) {
    configure("info", "text");
    Recurring down(Level::warn, "database unavailable, retrying");
    const auto t0 = Recurring::Clock::time_point{} + std::chrono::hours(1);
    const auto lines = logged([&] {
        for (int i = 0; i <= 36; ++i) {
            down.occurred({{"during", "commit batch"}}, t0 + std::chrono::seconds(5 * i));
        }
        down.over("database reachable again", {{"during", "commit batch"}},
                  t0 + std::chrono::seconds(181));
        down.over("database reachable again", {}, t0 + std::chrono::seconds(182));  // nothing
    });
    ASSERT_EQ(lines.size(), 5U);
    EXPECT_EQ(lines[0], "warn  database unavailable, retrying during=\"commit batch\"");
    // 60 s after the first line: the 12 occurrences after it, at 5..60 s.
    EXPECT_EQ(lines[1],
              "warn  database unavailable, retrying during=\"commit batch\" repeats=12 for_s=60");
    EXPECT_EQ(lines[2],
              "warn  database unavailable, retrying during=\"commit batch\" repeats=12 for_s=120");
    EXPECT_EQ(lines[3],
              "warn  database unavailable, retrying during=\"commit batch\" repeats=12 for_s=180");
    EXPECT_EQ(lines[4],
              "info  database reachable again during=\"commit batch\" for_s=181 times=37");
}

// After over(), the next occurrence is a new condition: logged at once, its duration anew.
TEST(Log, RecurringConditionStartsAgainAfterOver) {
    configure("info", "text");
    Recurring down(Level::warn, "history index maintenance cut short; tried again later",
                   std::chrono::seconds(30));
    const auto t0 = Recurring::Clock::time_point{} + std::chrono::hours(1);
    const auto lines = logged([&] {
        down.occurred({{"error", "x"}}, t0);
        down.over("history index maintenance works again", {}, t0 + std::chrono::seconds(5));
        down.occurred({{"error", "y"}}, t0 + std::chrono::seconds(10));
        down.occurred({{"error", "z"}}, t0 + std::chrono::seconds(15));
        down.over("history index maintenance works again", {}, t0 + std::chrono::seconds(17));
    });
    ASSERT_EQ(lines.size(), 4U);
    EXPECT_EQ(lines[0], "warn  history index maintenance cut short; tried again later error=x");
    EXPECT_EQ(lines[1], "info  history index maintenance works again for_s=5 times=1");
    EXPECT_EQ(lines[2], "warn  history index maintenance cut short; tried again later error=y");
    EXPECT_EQ(lines[3], "info  history index maintenance works again for_s=7 times=2");
}

}  // namespace
}  // namespace trackd::core::log
