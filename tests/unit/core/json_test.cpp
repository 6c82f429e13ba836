#include "trackd/core/json.hpp"

#include <string>
#include <string_view>

#include <gtest/gtest.h>
#include <simdjson.h>

namespace trackd::core {
namespace {

std::string escaped(std::string_view s) {
    std::string out = "[";
    append_json_escaped(out, s);
    return out;
}

TEST(JsonEscape, EscapesQuotesBackslashesAndControlCharacters) {
    EXPECT_EQ(escaped(""), "[");
    EXPECT_EQ(escaped("veh-000123"), "[veh-000123");
    EXPECT_EQ(escaped(R"(a"b\c)"), R"([a\"b\\c)");
    EXPECT_EQ(escaped("\n\r\t"), R"([\n\r\t)");
    EXPECT_EQ(escaped(std::string_view("x\0y\x1f", 4)), R"([x\u0000y\u001f)");
    EXPECT_EQ(escaped("\"at both ends\""), R"([\"at both ends\")");
    // UTF-8 and DEL pass through unchanged.
    EXPECT_EQ(escaped("Stra\xc3\x9f"
                      "e \x7f"),
              "[Stra\xc3\x9f"
              "e \x7f");
}

// Every byte value, alone and between others: the result read back by a JSON parser is the
// input (bytes of invalid UTF-8 aside, which the parser refuses: they are left out here).
TEST(JsonEscape, EveryAsciiByteRoundTripsThroughAParser) {
    simdjson::dom::parser parser;
    for (int c = 0; c < 128; ++c) {
        const std::string in = std::string("a") + static_cast<char>(c) + "b" + static_cast<char>(c);
        std::string doc = "\"";
        append_json_escaped(doc, in);
        doc += "\"";
        std::string_view back;
        ASSERT_EQ(parser.parse(doc).get(back), simdjson::SUCCESS) << "byte " << c << ": " << doc;
        EXPECT_EQ(back, in) << "byte " << c;
    }
}

// Runs that need no escape are appended at once: every byte that needs an escape (and a few
// that do not, UTF-8 among them) at every place in strings of 1 to 24 bytes, and strings of
// one byte repeated, give what escaping them byte by byte gives.
TEST(JsonEscape, EveryPlaceInAWordAndEveryLengthMatchesByteByByte) {
    const auto one_by_one = [](std::string_view s) {
        std::string out = "[";
        for (const char c : s) append_json_escaped(out, std::string_view(&c, 1));
        return out;
    };
    const std::string special = std::string("\"\\\n\t\x01\x1f ~\x7f\x80\xc3\xff", 12) + '\0';
    for (std::size_t len = 1; len <= 24; ++len) {
        for (std::size_t at = 0; at < len; ++at) {
            for (const char c : special) {
                std::string in(len, 'a');
                in[at] = c;
                ASSERT_EQ(escaped(in), one_by_one(in)) << "length " << len << ", byte " << at;
                in.assign(len, c);  // all the same
                ASSERT_EQ(escaped(in), one_by_one(in)) << "length " << len << " of byte " << +c;
            }
        }
    }
}

}  // namespace
}  // namespace trackd::core
