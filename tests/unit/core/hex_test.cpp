#include "trackd/core/hex.hpp"

#include <array>
#include <string_view>

#include <gtest/gtest.h>

namespace trackd::core {
namespace {

TEST(Hex, DigitValues) {
    constexpr std::string_view kLower = "0123456789abcdef";
    constexpr std::string_view kUpper = "0123456789ABCDEF";
    for (int c = -128; c < 128; ++c) {
        const auto ch = static_cast<char>(c);
        const auto lower = kLower.find(ch);
        const auto upper = kUpper.find(ch);
        const int expected = lower != std::string_view::npos   ? static_cast<int>(lower)
                             : upper != std::string_view::npos ? static_cast<int>(upper)
                                                               : -1;
        EXPECT_EQ(hex_digit_value(ch), expected) << c;
    }
}

TEST(Hex, DecodesPairsEitherCase) {
    std::array<unsigned char, 4> out{};
    ASSERT_TRUE(decode_hex("0aFf7E10", out));
    EXPECT_EQ(out, (std::array<unsigned char, 4>{0x0a, 0xff, 0x7e, 0x10}));
    EXPECT_TRUE(decode_hex("", std::span<unsigned char>{}));
}

TEST(Hex, RefusesOddLengthForeignDigitsAndShortOutput) {
    std::array<unsigned char, 4> out{};
    EXPECT_FALSE(decode_hex("010", out));
    EXPECT_FALSE(decode_hex("0g", out));
    EXPECT_FALSE(decode_hex("01 2", out));
    EXPECT_FALSE(decode_hex("0102030405", out));
}

}  // namespace
}  // namespace trackd::core
