#include "trackd/core/log.hpp"

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

}  // namespace
}  // namespace trackd::core::log
