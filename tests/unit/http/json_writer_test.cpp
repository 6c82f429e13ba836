// The JSON writer: escaping and number formatting.
#include "json_writer.hpp"

#include <limits>

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

}  // namespace
}  // namespace trackd::http
