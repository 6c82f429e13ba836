#include "trackd/decode/decoder.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include <gtest/gtest.h>

#include "trackd/core/rejection.hpp"

namespace trackd::decode {
namespace {

constexpr std::size_t kMaxPayload = 64 * 1024;
// 2024-05-01T11:59:30Z
constexpr std::int64_t kT = 1714564770LL * 1'000'000;

DecodedMessage decoded(Decoder& d, std::string_view payload) {
    auto r = d.decode(payload);
    if (auto* rej = std::get_if<core::Rejection>(&r)) {
        ADD_FAILURE() << "rejected " << core::code(rej->reason) << ": " << rej->detail
                      << "\npayload: " << payload;
        return {};
    }
    return std::get<DecodedMessage>(std::move(r));
}

core::Rejection rejected(Decoder& d, std::string_view payload) {
    auto r = d.decode(payload);
    if (std::holds_alternative<DecodedMessage>(r)) {
        ADD_FAILURE() << "accepted: " << payload;
        return {core::Reason::malformed_json, ""};
    }
    return std::get<core::Rejection>(std::move(r));
}

std::string code_of(Decoder& d, std::string_view payload) {
    return std::string(core::code(rejected(d, payload).reason));
}

// A message with the required fields plus `extra` (which starts with a comma).
std::string with(std::string_view extra) {
    return R"({"vehicle_id":"truck-0042","timestamp":"2024-05-01T11:59:30Z",)"
           R"("latitude":52.520008,"longitude":13.404954)" +
           std::string(extra) + "}";
}

std::string with_timestamp(std::string_view ts) {
    return R"({"vehicle_id":"v","timestamp":)" + std::string(ts) +
           R"(,"latitude":1.5,"longitude":2.5})";
}

TEST(Decoder, TypicalMessageDecodesExactly) {
    Decoder d(kMaxPayload);
    const auto m = decoded(d, with(R"(,"speed_kmh":48.5,"heading_deg":271.0,"accuracy_m":4.2,)"
                                   R"("altitude_m":-3,"driver":"anna","fuel_pct":63.5)"));
    EXPECT_EQ(m.vehicle_id, "truck-0042");
    EXPECT_EQ(m.recorded_at_us, kT);
    EXPECT_EQ(m.latitude, 52.520008);
    EXPECT_EQ(m.longitude, 13.404954);
    EXPECT_EQ(m.geom_hex, "");
    EXPECT_EQ(m.srid, 4326);
    EXPECT_EQ(m.altitude_m, -3.0);
    EXPECT_EQ(m.speed_kmh, 48.5);
    EXPECT_EQ(m.heading_deg, 271.0);
    EXPECT_EQ(m.accuracy_m, 4.2);
    EXPECT_EQ(m.attributes_json, R"({"driver":"anna","fuel_pct":63.5})");
}

TEST(Decoder, NoAttributesGiveEmptyText) {
    Decoder d(kMaxPayload);
    const auto m = decoded(d, with(""));
    EXPECT_EQ(m.attributes_json, "");
    EXPECT_FALSE(m.speed_kmh.has_value());
    EXPECT_FALSE(m.altitude_m.has_value());
}

TEST(Decoder, AttributesKeepRawValuesAndKeys) {
    Decoder d(kMaxPayload);
    const auto m =
        decoded(d, with(R"(, "a" : { "x" : [1, 2.50, "s"] } , "b\u0041":"\u00e9\n", "c":null,)"
                        R"("d":-0.0e+1,"e":[], "f":{}, "g":true)"));
    EXPECT_EQ(m.attributes_json, R"({"a":{ "x" : [1, 2.50, "s"] },"b\u0041":"\u00e9\n","c":null,)"
                                 R"("d":-0.0e+1,"e":[],"f":{},"g":true})");
}

// Attribute numbers are checked by the JSON number grammar and range without being parsed, and
// kept as written, short or long.
TEST(Decoder, AttributeNumbersAreKeptAsWritten) {
    Decoder d(kMaxPayload);
    const auto m = decoded(d, with(R"(,"a":-0,"b":87.3,"c":123456789012345,"d":1234567890.1234567,)"
                                   R"("e":0.000000000000001,"f":-10)"));
    EXPECT_EQ(m.attributes_json, R"({"a":-0,"b":87.3,"c":123456789012345,)"
                                 R"("d":1234567890.1234567,"e":0.000000000000001,"f":-10})");
    EXPECT_EQ(code_of(d, with(R"(,"a":1.5.5)")), "malformed_json");
    EXPECT_EQ(code_of(d, with(R"(,"a":-01)")), "malformed_json");
    EXPECT_EQ(code_of(d, with(R"(,"a":1-2)")), "malformed_json");
}

TEST(Decoder, DecoderIsReusable) {
    Decoder d(kMaxPayload);
    EXPECT_EQ(decoded(d, with(R"(,"a":1)")).attributes_json, R"({"a":1})");
    EXPECT_EQ(code_of(d, "{"), "malformed_json");
    EXPECT_EQ(decoded(d, with(R"(,"b":2)")).attributes_json, R"({"b":2})");
    EXPECT_EQ(decoded(d, with("")).attributes_json, "");
}

TEST(Decoder, NullMeansAbsent) {
    Decoder d(kMaxPayload);
    const auto m = decoded(d, with(R"(,"speed_kmh":null,"srid":null,"geom_hex":null)"));
    EXPECT_FALSE(m.speed_kmh.has_value());
    EXPECT_EQ(m.srid, 4326);
    EXPECT_EQ(m.geom_hex, "");
    EXPECT_EQ(code_of(d, R"({"vehicle_id":null,"timestamp":1,"latitude":1,"longitude":1})"),
              "missing_field");
}

TEST(Decoder, LastDuplicateKnownFieldWins) {
    Decoder d(kMaxPayload);
    const auto m = decoded(d, with(R"(,"latitude":10.5)"));
    EXPECT_EQ(m.latitude, 10.5);
}

TEST(Decoder, EscapedKnownKeyIsRecognised) {
    Decoder d(kMaxPayload);
    const auto m = decoded(
        d, R"({"vehicle_\u0069d":"v","timestamp":0,"latitude":1,"longitude":2,"srid":3857})");
    EXPECT_EQ(m.vehicle_id, "v");
    EXPECT_EQ(m.srid, 3857);
    EXPECT_EQ(m.attributes_json, "");
}

TEST(Decoder, GeomHexInsteadOfLatLon) {
    Decoder d(kMaxPayload);
    const auto m = decoded(d, R"({"vehicle_id":"v","timestamp":0,"geom_hex":"0101","srid":25833})");
    EXPECT_EQ(m.geom_hex, "0101");
    EXPECT_EQ(m.srid, 25833);
    EXPECT_FALSE(m.latitude.has_value());
}

TEST(Decoder, PayloadTooLargeIsCheckedFirst) {
    Decoder d(16);
    const auto r = rejected(d, "this is not JSON at all");
    EXPECT_EQ(r.reason, core::Reason::payload_too_large);
    EXPECT_EQ(r.detail, "payload: 23 bytes, more than validate.max_payload_bytes (16)");
    EXPECT_EQ(code_of(d, "[1]"), "malformed_json");  // exactly at the limit is decoded
}

TEST(Decoder, MalformedJson) {
    Decoder d(kMaxPayload);
    for (const std::string_view p : {
             "",
             "   ",
             "null",
             "[]",
             "42",
             "\"s\"",
             "{",
             "{\"a\":1",
             "{\"a\" 1}",
             "{\"a\":1,}",
             "{\"a\":1}}",
             "{\"a\":1} x",
             "{\"a\":1}{}",
             "{'a':1}",
             "{\"a\":tru}",
             "{\"a\":nul}",
             "{\"a\":01}",
             "{\"a\":1.}",
             "{\"a\":.5}",
             "{\"a\":+1}",
             "{\"a\":-}",
             "{\"a\":0x10}",
             "{\"a\":\"\\x\"}",
             "{\"a\":[1,]}",
             "{\"a\":{\"b\"}}",
             "{\"a\":{\"b\":[1}}}",
             "{\"a\":\"\\u12\"}",
             "{\"a\":\"\\ud800\"}",
             "{\"a\":\"\\ud800\\u0041\"}",
             "{\"a\":\"\\udc00\"}",
             "{\"a\":\"\\u0000\"}",
             "{\"a\\u0000\":1}",
             "{\"latitude\":52.1abc}",
             "{\"a\":\"tab\there\"}",
             "{\"a\":\"\xff\"}",
             "{\"vehicle_id\":\"\\ud800\"}",
         }) {
        EXPECT_EQ(code_of(d, p), "malformed_json") << p;
    }
}

TEST(Decoder, MalformedJsonWinsOverEarlierProblems) {
    Decoder d(kMaxPayload);
    EXPECT_EQ(code_of(d, R"({"vehicle_id":42,"latitude":"x","a":[1,})"), "malformed_json");
    EXPECT_EQ(code_of(d, R"({"latitude":NaN,"b":01})"), "malformed_json");
}

TEST(Decoder, MissingField) {
    Decoder d(kMaxPayload);
    EXPECT_EQ(rejected(d, R"({"timestamp":0,"latitude":1,"longitude":2})").detail,
              "vehicle_id: missing");
    EXPECT_EQ(rejected(d, R"({"vehicle_id":"v","latitude":1,"longitude":2})").detail,
              "timestamp: missing");
    EXPECT_EQ(rejected(d, R"({"vehicle_id":"v","timestamp":0})").detail,
              "position: neither latitude+longitude nor geom_hex");
    EXPECT_EQ(rejected(d, R"({"vehicle_id":"v","timestamp":0,"latitude":1})").detail,
              "longitude: missing");
    EXPECT_EQ(rejected(d, R"({"vehicle_id":"v","timestamp":0,"longitude":1})").detail,
              "latitude: missing");
    EXPECT_EQ(rejected(d, R"({"vehicle_id":"v","timestamp":0,"geom_hex":""})").reason,
              core::Reason::missing_field);
    EXPECT_EQ(rejected(d, "{}").reason, core::Reason::missing_field);
}

TEST(Decoder, WrongTypeNamesFieldAndValue) {
    Decoder d(kMaxPayload);
    EXPECT_EQ(
        rejected(d, R"({"vehicle_id":"v","timestamp":0,"latitude":"52.1","longitude":1})").detail,
        R"(latitude: expected a number, got string "52.1")");
    EXPECT_EQ(rejected(d, R"({"vehicle_id":42,"timestamp":0,"latitude":1,"longitude":1})").detail,
              "vehicle_id: expected a string, got number 42");
    EXPECT_EQ(rejected(d, with(R"(,"srid":4326.0)")).detail,
              "srid: expected an integer, got number 4326.0");
    EXPECT_EQ(rejected(d, with(R"(,"srid":"4326")")).detail,
              R"(srid: expected an integer, got string "4326")");
    EXPECT_EQ(rejected(d, with(R"(,"speed_kmh":[1])")).detail,
              "speed_kmh: expected a number, got an array");
    EXPECT_EQ(rejected(d, with(R"(,"heading_deg":{"v":1})")).detail,
              "heading_deg: expected a number, got an object");
    EXPECT_EQ(rejected(d, with(R"(,"accuracy_m":true)")).detail,
              "accuracy_m: expected a number, got true");
    EXPECT_EQ(rejected(d, with(R"(,"geom_hex":1)")).detail,
              "geom_hex: expected a string, got number 1");
    EXPECT_EQ(code_of(d, with_timestamp("1714564770123.0")), "wrong_type");
    EXPECT_EQ(code_of(d, with_timestamp("1.7e12")), "wrong_type");
    EXPECT_EQ(code_of(d, with_timestamp("{}")), "wrong_type");
    EXPECT_EQ(code_of(d, R"({"vehicle_id":NaN,"timestamp":0,"latitude":1,"longitude":1})"),
              "wrong_type");
}

TEST(Decoder, LongValuesAreShortenedInDetails) {
    Decoder d(kMaxPayload);
    const std::string long_value(500, 'x');
    const auto r = rejected(d, with(R"(,"altitude_m":")" + long_value + "\""));
    EXPECT_EQ(r.reason, core::Reason::wrong_type);
    EXPECT_EQ(r.detail,
              "altitude_m: expected a number, got string \"" + std::string(59, 'x') + "...");
    // Cut on a UTF-8 boundary: 'é' is two bytes and would straddle byte 60.
    std::string accents = "\"";
    for (int i = 0; i < 40; ++i) accents += "\xc3\xa9";
    const auto r2 = rejected(d, with(R"(,"altitude_m":)" + accents + "\""));
    EXPECT_EQ(r2.detail,
              "altitude_m: expected a number, got string " + accents.substr(0, 59) + "...");
}

TEST(Decoder, NotFinite) {
    Decoder d(kMaxPayload);
    EXPECT_EQ(
        rejected(d, R"({"vehicle_id":"v","timestamp":0,"latitude":NaN,"longitude":1})").detail,
        "latitude: NaN is not a finite number");
    EXPECT_EQ(rejected(d, with(R"(,"speed_kmh":Infinity)")).detail,
              "speed_kmh: Infinity is not a finite number");
    EXPECT_EQ(rejected(d, with(R"(,"altitude_m":-Infinity)")).detail,
              "altitude_m: -Infinity is not a finite number");
    EXPECT_EQ(rejected(d, with(R"(,"accuracy_m":1e400)")).detail,
              "accuracy_m: 1e400 overflows to infinity");
    EXPECT_EQ(rejected(d, with(R"(,"heading_deg":-2e308)")).reason, core::Reason::not_finite);
    EXPECT_EQ(rejected(d, with(R"(,"fuel":NaN)")).detail, "fuel: NaN is not a finite number");
    EXPECT_EQ(rejected(d, with(R"(,"deep":{"a":[1,-Infinity]})")).reason, core::Reason::not_finite);
    EXPECT_EQ(rejected(d, with(R"(,"big":1e309)")).detail, "big: 1e309 overflows to infinity");
    EXPECT_EQ(code_of(d, with_timestamp("NaN")), "not_finite");
    EXPECT_EQ(code_of(d, with(R"(,"srid":Infinity)")), "not_finite");
    // Edge of double range and underflow are fine.
    const auto m = decoded(d, with(R"(,"a":1.7976931348623157e308,"b":1e-400,"c":0e999999)"));
    EXPECT_EQ(m.attributes_json, R"({"a":1.7976931348623157e308,"b":1e-400,"c":0e999999})");
}

TEST(Decoder, BadVehicleId) {
    Decoder d(kMaxPayload);
    auto id = [](std::string_view v) {
        return R"({"vehicle_id":)" + std::string(v) +
               R"(,"timestamp":0,"latitude":1,"longitude":1})";
    };
    EXPECT_EQ(rejected(d, id(R"("")")).detail, "vehicle_id: empty");
    EXPECT_EQ(rejected(d, id(R"("truck\u0007")")).detail,
              R"(vehicle_id: "truck\u0007" contains control character U+0007)");
    EXPECT_EQ(code_of(d, id(R"("a\nb")")), "bad_vehicle_id");
    EXPECT_EQ(code_of(d, id(R"("a\u007fb")")), "bad_vehicle_id");
    EXPECT_EQ(code_of(d, id(R"("a\u0085b")")), "bad_vehicle_id");  // C1 control
    EXPECT_EQ(code_of(d, id(R"("a\u0000b")")), "bad_vehicle_id");
    // Long ids pass the decoder: the limit is validate's.
    EXPECT_EQ(decoded(d, id("\"" + std::string(1000, 'v') + "\"")).vehicle_id.size(), 1000U);
    EXPECT_EQ(decoded(d, id(R"("Fahrzeug-\u00fc-\ud83d\ude9a")")).vehicle_id,
              "Fahrzeug-\xc3\xbc-\xf0\x9f\x9a\x9a");
}

struct TimestampCase {
    std::string_view text;
    std::int64_t us;  // -1: bad_timestamp
};

TEST(Decoder, Timestamps) {
    Decoder d(kMaxPayload);
    constexpr TimestampCase kCases[] = {
        {R"("2024-05-01T11:59:30Z")", kT},
        {R"("2024-05-01t11:59:30z")", kT},
        {R"("2024-05-01 11:59:30Z")", kT},
        {R"("2024-05-01T13:59:30+02:00")", kT},
        {R"("2024-05-01T08:29:30-03:30")", kT},
        {R"("2024-05-01T11:59:30-00:00")", kT},
        {R"("2024-05-02T11:58:30+23:59")", kT},
        {R"("2024-05-01T11:59:30.5Z")", kT + 500000},
        {R"("2024-05-01T11:59:30.000001Z")", kT + 1},
        {R"("2024-05-01T11:59:30.123456Z")", kT + 123456},
        {R"("2024-05-01T11:59:30.123456789Z")", kT + 123456},
        {R"("2024-05-01T13:59:30.25+02:00")", kT + 250000},
        {R"("1970-01-01T00:00:00Z")", 0},
        {R"("1969-12-31T23:59:59.5Z")", -500000},
        {R"("2000-02-29T00:00:00Z")", 951782400LL * 1'000'000},
        {R"("2024-02-29T12:00:00Z")", 1709208000LL * 1'000'000},
        {R"("2016-12-31T23:59:60Z")", 1483228800LL * 1'000'000},
        {R"("9999-12-31T23:59:59Z")", 253402300799LL * 1'000'000},
        {"1714564770123", kT + 123000},
        {"0", 0},
        {"253402300799999", 253402300799999LL * 1000},
        {R"("yesterday")", -1},
        {R"("")", -1},
        {R"("2024-13-45T00:00:00Z")", -1},
        {R"("2023-02-29T00:00:00Z")", -1},
        {R"("1900-02-29T00:00:00Z")", -1},
        {R"("2023-02-30T00:00:00Z")", -1},
        {R"("2023-02-30")", -1},
        {R"("2024-04-31T00:00:00Z")", -1},
        {R"("2024-00-10T00:00:00Z")", -1},
        {R"("2024-05-00T00:00:00Z")", -1},
        {R"("2024-05-01T24:00:00Z")", -1},
        {R"("2024-05-01T12:60:00Z")", -1},
        {R"("2024-05-01T12:00:61Z")", -1},
        {R"("2024-05-01T12:00:00+24:00")", -1},
        {R"("2024-05-01T12:00:00+02:60")", -1},
        {R"("2024-05-01T12:00:00")", -1},
        {R"("2024-05-01T12:00:00+0200")", -1},
        {R"("2024-05-01T12:00:00.Z")", -1},
        {R"("2024-05-01T12:00:00.1234567890Z")", -1},
        {R"("2024-5-01T12:00:00Z")", -1},
        {R"("2024-05-01T12:00Z")", -1},
        {R"("2024-05-01T12:00:00Z ")", -1},
        {R"("+2024-05-01T12:00:00Z")", -1},
        {R"("2024-05-01X12:00:00Z")", -1},
        {"-1000", -1},
        {"-0", 0},
        {"253402300800000", -1},
        {"100000000000000000", -1},
        {"99999999999999999999999", -1},
    };
    for (const auto& c : kCases) {
        const std::string payload = with_timestamp(c.text);
        if (c.us == -1) {
            EXPECT_EQ(code_of(d, payload), "bad_timestamp") << c.text;
        } else {
            EXPECT_EQ(decoded(d, payload).recorded_at_us, c.us) << c.text;
        }
    }
    EXPECT_EQ(rejected(d, with_timestamp(R"("yesterday")")).detail,
              R"(timestamp: "yesterday" is neither RFC 3339 nor epoch milliseconds)");
    EXPECT_EQ(rejected(d, with_timestamp(R"("2024-13-45T00:00:00Z")")).detail,
              R"(timestamp: "2024-13-45T00:00:00Z" is not a valid date and time)");
    EXPECT_EQ(rejected(d, with_timestamp("-1000")).detail,
              "timestamp: -1000 epoch milliseconds is negative");
}

TEST(Decoder, SridOutsideIntRangeIsUnknown) {
    Decoder d(kMaxPayload);
    EXPECT_EQ(decoded(d, with(R"(,"srid":-1)")).srid, -1);  // validate decides
    EXPECT_EQ(rejected(d, with(R"(,"srid":99999999999)")).detail,
              "srid: 99999999999 is not an SRID");
}

TEST(Decoder, FirstProblemInFieldOrderWins) {
    Decoder d(kMaxPayload);
    EXPECT_EQ(code_of(d, R"({"latitude":NaN,"vehicle_id":"","timestamp":"x"})"), "not_finite");
    EXPECT_EQ(code_of(d, R"({"timestamp":"x","latitude":NaN,"vehicle_id":""})"), "bad_timestamp");
    // missing_field comes after every other problem
    EXPECT_EQ(code_of(d, R"({"vehicle_id":"","latitude":1})"), "bad_vehicle_id");
}

TEST(Decoder, DeepNestingIsMalformed) {
    Decoder d(kMaxPayload);
    std::string deep = std::string(300, '[') + std::string(300, ']');
    EXPECT_EQ(code_of(d, with(",\"deep\":" + deep)), "malformed_json");
    std::string ok = std::string(100, '[') + std::string(100, ']');
    EXPECT_EQ(decoded(d, with(",\"deep\":" + ok)).attributes_json, "{\"deep\":" + ok + "}");
}

}  // namespace
}  // namespace trackd::decode
