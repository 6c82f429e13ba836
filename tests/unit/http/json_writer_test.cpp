// The JSON writer: escaping and number formatting.
#include "json_writer.hpp"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace trackd::http {
namespace {

TEST(JsonWriter, EscapesAndNumbers) {
    JsonWriter w;
    w.begin_object().key("s").value("a\"b\\c\n\x01").key("n").value(0.1).key("i").value(-3);
    w.key("nan").value(std::numeric_limits<double>::quiet_NaN()).key("t").number_text("1e-05");
    w.key("bad").number_text("NaN").key("arr").begin_array().value(true).null().end_array();
    w.end_object();
    EXPECT_EQ(w.str(), R"({"s":"a\"b\\c\n\u0001","n":0.1,"i":-3,"nan":null,"t":1e-05,"bad":null,)"
                       R"("arr":[true,null]})");
    EXPECT_TRUE(is_json_number("-0.5e+3"));
    EXPECT_FALSE(is_json_number("01"));
    EXPECT_FALSE(is_json_number("Infinity"));
}

// Floats as PostgreSQL prints them: the shortest text that reads back as the same value, a
// real as a real (12.3, not 12.300000190734863).
TEST(JsonWriter, FloatsInTheirShortestExactText) {
    JsonWriter w;
    w.begin_array().value(12.3F).value(0.1).value(1e-05).value(13.404954).value(-0.0);
    w.value(1e300).value(std::numeric_limits<float>::infinity()).value(INT64_MIN);
    w.end_array();
    EXPECT_EQ(w.str(), "[12.3,0.1,1e-05,13.404954,-0,1e+300,null,-9223372036854775808]");
}

// trackd writes floats from Dragonbox's digits itself; the text is fmt's "{}" (what earlier
// versions sent, and what the tests and clients saw), on the notation's edges and on random bit
// patterns of both widths.
TEST(JsonWriter, FloatsAreWrittenAsFmtWritesThem) {
    const auto expect_as_fmt = [](auto v) {
        if (!std::isfinite(v)) return;  // null, above
        std::string ours;
        append_json_number(ours, v);
        ASSERT_EQ(ours, fmt::format("{}", v)) << "bits " << std::bit_cast<std::uint64_t>(double(v));
    };
    for (const double d :
         {1.0, 10.0, 1e15, 9.999999999999998e15, 1e16, 1.5e16, 123456789012345680.0, 1e-4, 1.5e-4,
          9.99e-5, 1e-5, 0.001234, 12.34, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308,
          47.75888165437984, -9.908273243213019, -0.0}) {
        expect_as_fmt(d);
        expect_as_fmt(static_cast<float>(d));
    }
    std::mt19937_64 rng(20261205);
    for (int i = 0; i < 200000; ++i) {
        const auto bits = rng();
        const auto d = std::bit_cast<double>(bits);
        const auto f = std::bit_cast<float>(static_cast<std::uint32_t>(bits));
        expect_as_fmt(d);
        expect_as_fmt(f);
        expect_as_fmt(static_cast<double>(bits % 100000000) / 1e6);  // coordinates and speeds
        expect_as_fmt(static_cast<float>(bits % 100000) / 100.0F);
    }
}

TEST(JsonWriter, CommasAtEveryDepthAndKeysThatNeedEscaping) {
    JsonWriter w;
    w.begin_object().key("a").begin_array().begin_array().end_array().value(1).begin_object();
    w.key("q\"uote").value(2).key("b").begin_object().end_object().end_object().end_array();
    w.key("c").value("d").end_object();
    EXPECT_EQ(w.str(), R"({"a":[[],1,{"q\"uote":2,"b":{}}],"c":"d"})");

    JsonWriter deep;
    for (int i = 0; i < 64; ++i) deep.begin_array();
    EXPECT_THROW(deep.begin_array(), std::logic_error);
}

}  // namespace
}  // namespace trackd::http
