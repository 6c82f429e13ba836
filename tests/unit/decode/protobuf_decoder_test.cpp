#include "trackd/decode/protobuf_decoder.hpp"

#include <string>
#include <variant>

#include <google/protobuf/descriptor.pb.h>
#include <gtest/gtest.h>

#include "trackd/core/rejection.hpp"
#include "trackd/decode/payload_decoder.hpp"

#include "support/protobuf_fixtures.hpp"

namespace trackd::decode {
namespace {

constexpr std::size_t kMaxPayload = 64 * 1024;

std::string message() {
    trackd::v1::Position m;
    m.set_vehicle_id("truck-0042");
    m.mutable_recorded_at()->set_seconds(1714564770);
    m.mutable_recorded_at()->set_nanos(999'999'999);
    m.set_latitude(52.520008);
    m.set_longitude(13.404954);
    m.set_speed_kmh(48.5F);
    return m.SerializeAsString();
}

std::string code_of(const DecodeResult& r) {
    if (const auto* rej = std::get_if<core::Rejection>(&r)) return std::string(code(rej->reason));
    if (std::holds_alternative<SchemaNeeded>(r)) return "schema_needed";
    return "decoded";
}

std::string schema_text(const std::string& name) {
    return test::read_text_file(std::string(TRACKD_SOURCE_DIR) +
                                "/tests/fixtures/protobuf/schemas/" + name);
}

std::string shipped_schema() {
    return test::read_text_file(std::string(TRACKD_SOURCE_DIR) + "/proto/trackd/v1/position.proto");
}

TEST(ProtobufDecoder, PlainMessageDecodesExactly) {
    ProtobufDecoder d(kMaxPayload, false);
    const auto r = d.decode(message());
    ASSERT_EQ(code_of(r), "decoded");
    const auto& m = std::get<DecodedMessage>(r);
    EXPECT_EQ(m.vehicle_id, "truck-0042");
    EXPECT_EQ(m.recorded_at_us, 1714564770LL * 1'000'000 + 999'999);  // nanos truncated
    EXPECT_EQ(m.latitude, 52.520008);
    EXPECT_EQ(m.longitude, 13.404954);
    EXPECT_EQ(m.speed_kmh, 48.5);
    EXPECT_FALSE(m.heading_deg);
    EXPECT_EQ(m.srid, 4326);
    EXPECT_EQ(m.attributes_json, "");
}

TEST(ProtobufDecoder, FramesInShortAndLongFormReadTheSameMessage) {
    ProtobufDecoder d(kMaxPayload, false);
    for (const bool long_form : {false, true}) {
        const auto r = d.decode(test::confluent_header(7, long_form) + message());
        ASSERT_EQ(code_of(r), "decoded");
        EXPECT_EQ(std::get<DecodedMessage>(r).vehicle_id, "truck-0042");
    }
}

TEST(ProtobufDecoder, WithSchemaChecksAnUnseenIdIsNeededThenKept) {
    ProtobufDecoder d(kMaxPayload, true);
    const auto framed = test::confluent_header(7) + message();
    auto r = d.decode(framed);
    ASSERT_EQ(code_of(r), "schema_needed");
    EXPECT_EQ(std::get<SchemaNeeded>(r).schema_id, 7U);
    EXPECT_FALSE(d.has_schema(7));
    d.add_schema(7, test::registry_answer(shipped_schema()));
    EXPECT_TRUE(d.has_schema(7));
    EXPECT_EQ(code_of(d.decode(framed)), "decoded");
    // A plain message has no schema id: nothing to check.
    EXPECT_EQ(code_of(d.decode(message())), "decoded");
    // Another id, unknown to the registry.
    const auto other = test::confluent_header(8) + message();
    EXPECT_EQ(code_of(d.decode(other)), "schema_needed");
    d.add_unknown_schema(8, "404");
    r = d.decode(other);
    ASSERT_EQ(code_of(r), "unknown_schema");
    EXPECT_EQ(std::get<core::Rejection>(r).detail, "404");
}

TEST(ProtobufDecoder, CompatibleMeansSameNumbersAndTypesWhateverTheNames) {
    EXPECT_EQ(schema_incompatibility(shipped_schema(), false), "");
    EXPECT_EQ(schema_incompatibility(schema_text("renamed_compatible.proto"), false), "");
    EXPECT_EQ(schema_incompatibility(schema_text("float_latitude.proto"), false),
              "message fleet.v2.Fix: field 3 is float latitude, but trackd reads field 3 "
              "(double latitude)");
    EXPECT_EQ(
        schema_incompatibility(R"(syntax = "proto3"; message P { double latitude = 3; })", false),
        "message P has no field 1 (string vehicle_id), which trackd requires");
    EXPECT_EQ(schema_incompatibility(R"(syntax = "proto3"; message P { string vehicle_id = 1;
                                        int64 recorded_at = 2; })",
                                     false),
              "message P: field 2 is int64 recorded_at, but trackd reads field 2 (message "
              "recorded_at)");
    EXPECT_EQ(schema_incompatibility(R"(syntax = "proto3"; import "fleet/common.proto";
                                        message P { string vehicle_id = 1; })",
                                     false),
              "the schema imports \"fleet/common.proto\", which trackd does not know (schema "
              "references are not fetched)");
    // The second message of a file, by message index.
    EXPECT_EQ(schema_incompatibility(R"(syntax = "proto3"; message A { int32 x = 1; }
            message B { string vehicle_id = 1; })",
                                     false, {1}),
              "message B has no field 2 (message recorded_at), which trackd requires");
}

TEST(ProtobufDecoder, AcceptsASerializedDescriptorInBase64) {
    google::protobuf::FileDescriptorProto file;
    trackd::v1::Position::descriptor()->file()->CopyTo(&file);
    const std::string bytes = file.SerializeAsString();
    EXPECT_EQ(schema_incompatibility(bytes, true), "");
    // The registry's answer carries it in base64.
    static constexpr char kAlphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string b64;
    std::size_t i = 0;
    for (; i + 2 < bytes.size(); i += 3) {
        const auto n = (static_cast<unsigned char>(bytes[i]) << 16) |
                       (static_cast<unsigned char>(bytes[i + 1]) << 8) |
                       static_cast<unsigned char>(bytes[i + 2]);
        for (int s = 18; s >= 0; s -= 6) b64 += kAlphabet[(n >> s) & 63];
    }
    if (i < bytes.size()) {
        auto n = static_cast<unsigned char>(bytes[i]) << 16;
        if (i + 1 < bytes.size()) n |= static_cast<unsigned char>(bytes[i + 1]) << 8;
        b64 += kAlphabet[(n >> 18) & 63];
        b64 += kAlphabet[(n >> 12) & 63];
        b64 += i + 1 < bytes.size() ? kAlphabet[(n >> 6) & 63] : '=';
        b64 += '=';
    }
    ProtobufDecoder d(kMaxPayload, true);
    d.add_schema(3, R"({"schema":")" + b64 + R"("})");
    EXPECT_EQ(code_of(d.decode(test::confluent_header(3) + message())), "decoded");
}

TEST(ProtobufDecoder, MalformedWinsOverAnEarlierWrongType) {
    ProtobufDecoder d(kMaxPayload, false);
    // latitude (3) as a varint, then a length that runs past the end.
    EXPECT_EQ(code_of(d.decode(message() + "\x18\x05\x0a\x09")), "malformed_protobuf");
    EXPECT_EQ(code_of(d.decode(message() + "\x18\x05")), "wrong_type");
}

TEST(ProtobufDecoder, DetailsNameTheFieldAndTheProblem) {
    ProtobufDecoder d(kMaxPayload, false);
    auto detail = [&](const std::string& payload) {
        const auto r = d.decode(payload);
        const auto* rej = std::get_if<core::Rejection>(&r);
        return rej != nullptr ? rej->detail : std::string("decoded");
    };
    EXPECT_EQ(detail(message() + "\x18\x05"),
              "latitude (3): wire type 0 (varint), expected 1 (64-bit)");
    EXPECT_EQ(detail(std::string("\x00\x00\x00\x07", 4)),
              "4 bytes: a Confluent frame needs at least 6 (magic byte, 4-byte schema id, "
              "message indexes)");
    EXPECT_EQ(detail("\x0a\x0a"
                     "abc"),
              "field 1: length-delimited value cut short");
    EXPECT_EQ(detail(""), "empty payload: vehicle_id (1): missing");
}

TEST(PayloadDecoder, AutoPicksProtobufByTheMagicByteAndJsonOtherwise) {
    PayloadDecoder d(Format::automatic, kMaxPayload, false);
    EXPECT_EQ(code_of(d.decode(test::confluent_header(1) + message())), "decoded");
    EXPECT_EQ(code_of(d.decode(R"({"vehicle_id":"v","timestamp":1714564770000,)"
                               R"("latitude":1.5,"longitude":2.5})")),
              "decoded");
    // Plain Protobuf in auto mode is read as JSON.
    EXPECT_EQ(code_of(d.decode(message())), "malformed_json");
    PayloadDecoder json(Format::json, kMaxPayload, false);
    EXPECT_EQ(code_of(json.decode(test::confluent_header(1) + message())), "malformed_json");
    PayloadDecoder pb(Format::protobuf, kMaxPayload, false);
    EXPECT_EQ(code_of(pb.decode(R"({"vehicle_id":"v"})")), "malformed_protobuf");
}

TEST(PayloadDecoder, FormatNames) {
    EXPECT_EQ(parse_format("json"), Format::json);
    EXPECT_EQ(parse_format("protobuf"), Format::protobuf);
    EXPECT_EQ(parse_format("auto"), Format::automatic);
    EXPECT_EQ(parse_format("avro"), std::nullopt);
}

}  // namespace
}  // namespace trackd::decode
