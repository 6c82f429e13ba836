#include "trackd/core/time.hpp"

#include <chrono>
#include <cstdint>
#include <string_view>

#include <gtest/gtest.h>

namespace trackd::core {
namespace {

constexpr std::int64_t kSecond = 1'000'000;

// 2024-05-01T11:59:30Z
constexpr std::int64_t kT = 1714564770 * kSecond;

struct Parsed {
    Rfc3339Status status;
    std::int64_t us;
};

Parsed parse(std::string_view text, Rfc3339Rules rules = {}) {
    std::int64_t us = -42;
    const auto status = parse_rfc3339(text, us, rules);
    return {status, us};
}

TEST(Calendar, DaysFromCivilAndBackAgree) {
    // Every day from about 220 BC to 9999-12-31.
    for (std::int64_t days = -800'000; days <= 2'932'896; ++days) {
        const CivilDate c = civil_from_days(days);
        ASSERT_GE(c.month, 1U);
        ASSERT_LE(c.month, 12U);
        ASSERT_GE(c.day, 1U);
        ASSERT_LE(c.day, days_in_month(c.year, c.month));
        ASSERT_EQ(days_from_civil(c.year, c.month, c.day), days) << c.year << "-" << c.month;
    }
}

TEST(Calendar, KnownDates) {
    EXPECT_EQ(days_from_civil(1970, 1, 1), 0);
    EXPECT_EQ(days_from_civil(2024, 5, 1), 19844);
    EXPECT_EQ(days_from_civil(1, 1, 1), -719162);
    EXPECT_EQ(civil_from_days(19844), (CivilDate{2024, 5, 1}));
    EXPECT_EQ(civil_from_days(-719162), (CivilDate{1, 1, 1}));
    EXPECT_EQ(civil_from_days(days_from_civil(2000, 2, 29)), (CivilDate{2000, 2, 29}));
}

TEST(Calendar, LeapYears) {
    EXPECT_TRUE(is_leap_year(2000));
    EXPECT_TRUE(is_leap_year(2024));
    EXPECT_FALSE(is_leap_year(1900));
    EXPECT_FALSE(is_leap_year(2023));
    EXPECT_TRUE(is_leap_year(0));
    EXPECT_EQ(days_in_month(2024, 2), 29U);
    EXPECT_EQ(days_in_month(2100, 2), 28U);
    EXPECT_EQ(days_in_month(2023, 4), 30U);
    EXPECT_EQ(days_in_month(2023, 12), 31U);
}

TEST(Calendar, CivilTimeRoundsDown) {
    const CivilTime t = civil_time_from_us(kT + 123456);
    EXPECT_EQ(t.date, (CivilDate{2024, 5, 1}));
    EXPECT_EQ(t.hour, 11U);
    EXPECT_EQ(t.minute, 59U);
    EXPECT_EQ(t.second, 30U);
    EXPECT_EQ(t.microsecond, 123456U);

    const CivilTime before = civil_time_from_us(-1);  // 1969-12-31T23:59:59.999999Z
    EXPECT_EQ(before.date, (CivilDate{1969, 12, 31}));
    EXPECT_EQ(before.hour, 23U);
    EXPECT_EQ(before.minute, 59U);
    EXPECT_EQ(before.second, 59U);
    EXPECT_EQ(before.microsecond, 999999U);

    const CivilTime midnight = civil_time_from_us(-86400 * kSecond);
    EXPECT_EQ(midnight.date, (CivilDate{1969, 12, 31}));
    EXPECT_EQ(midnight.hour + midnight.minute + midnight.second + midnight.microsecond, 0U);
}

TEST(Rfc3339, Accepts) {
    EXPECT_EQ(parse("2024-05-01T11:59:30Z").us, kT);
    EXPECT_EQ(parse("2024-05-01 11:59:30z").us, kT);
    EXPECT_EQ(parse("2024-05-01t13:29:30+01:30").us, kT);
    EXPECT_EQ(parse("2024-04-30T23:59:30-12:00").us, kT);
    EXPECT_EQ(parse("2024-05-01T11:59:30.9Z").us, kT + 900000);
    EXPECT_EQ(parse("2024-05-01T11:59:30.000042Z").us, kT + 42);
    EXPECT_EQ(parse("2024-05-01T11:59:30.999999999Z").us, kT + 999999);  // truncated
    EXPECT_EQ(parse("1969-12-31T23:59:59.25Z").us, -750000);
    EXPECT_EQ(parse("0001-01-01T00:00:00Z").us, -719162LL * 86400 * kSecond);
    EXPECT_EQ(parse("2024-05-01T11:59:30Z").status, Rfc3339Status::ok);
}

TEST(Rfc3339, SyntaxBeforeRanges) {
    for (const std::string_view bad :
         {"", "2024-05-01", "2024-05-01T11:59:30", "2024-05-01T11:59Z", "2024/05/01T11:59:30Z",
          "2024-05-01T11:59:30.Z", "2024-05-01T11:59:30.1234567891Z", "2024-05-01T11:59:30+0100",
          "2024-05-01T11:59:30+01:00:00", "2024-05-01T11:59:30ZZ", " 2024-05-01T11:59:30Z",
          "2024-05-01_11:59:30Z", "2024-05-0111:59:30Z", "-024-05-01T11:59:30Z",
          "2024-99-99T99:99:99"}) {
        const Parsed p = parse(bad);
        EXPECT_EQ(p.status, Rfc3339Status::syntax) << bad;
        EXPECT_EQ(p.us, -42) << bad;
    }
}

TEST(Rfc3339, ImpossibleFields) {
    for (const std::string_view bad :
         {"2024-00-01T00:00:00Z", "2024-13-01T00:00:00Z", "2024-06-31T00:00:00Z",
          "2100-02-29T00:00:00Z", "2024-05-01T24:00:00Z", "2024-05-01T23:60:00Z",
          "2024-05-01T23:59:61Z", "2024-05-01T00:00:00+24:00", "2024-05-01T00:00:00-00:60"}) {
        EXPECT_EQ(parse(bad).status, Rfc3339Status::out_of_range) << bad;
    }
}

TEST(Rfc3339, RulesForLeapSecondsAndYearZero) {
    // By default (the decoder's rules) both are read as PostgreSQL reads them.
    EXPECT_EQ(parse("2016-12-31T23:59:60Z").us, 1483228800 * kSecond);
    EXPECT_EQ(parse("0000-01-01T00:00:00Z").us, -719528LL * 86400 * kSecond);

    EXPECT_EQ(parse("2016-12-31T23:59:60Z", {.leap_second = false}).status,
              Rfc3339Status::out_of_range);
    EXPECT_EQ(parse("2016-12-31T23:59:59Z", {.leap_second = false}).status, Rfc3339Status::ok);
    EXPECT_EQ(parse("0000-12-31T23:00:00-02:00", {.year_zero = false}).status,
              Rfc3339Status::out_of_range);
    EXPECT_EQ(parse("0001-01-01T00:00:00Z", {.year_zero = false}).status, Rfc3339Status::ok);
}

TEST(Clock, NowIsTheSystemClock) {
    const auto before = std::chrono::duration_cast<std::chrono::microseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
    const std::int64_t now = now_us();
    EXPECT_GE(now, before);
    EXPECT_LT(now - before, 60 * kSecond);
}

}  // namespace
}  // namespace trackd::core
