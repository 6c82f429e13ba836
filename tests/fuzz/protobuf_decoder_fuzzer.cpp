// Fuzzes decode::ProtobufDecoder with arbitrary Kafka payloads (plain and Confluent-framed
// Protobuf) and arbitrary schema registry answers: it must return a message, a Rejection or
// SchemaNeeded for every input, never crash, leak or hit undefined behaviour.
//
// An input starting with '{' is a registry answer for schema id 9 (parsed by libprotobuf's
// .proto parser or as a base64 FileDescriptorProto), after which a message framed with id 9 is
// decoded; any other input is a payload, decoded with schema ids 1 (trackd.v1.Position),
// 2 (incompatible) and 3 (unknown to the registry) known.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <variant>

#include "trackd/decode/protobuf_decoder.hpp"

namespace {

constexpr char kPosition[] =
    R"({"schema":"syntax = \"proto3\"; package trackd.v1; import \"google/protobuf/timestamp.proto\"; message Position { string vehicle_id = 1; google.protobuf.Timestamp recorded_at = 2; optional double latitude = 3; optional double longitude = 4; }","schemaType":"PROTOBUF"})";
constexpr char kIncompatible[] =
    R"({"schema":"syntax = \"proto3\"; message P { string vehicle_id = 1; int64 recorded_at = 2; }"})";

trackd::decode::ProtobufDecoder make_decoder() {
    trackd::decode::ProtobufDecoder d(64 * 1024, true);
    d.add_schema(1, kPosition);
    d.add_schema(2, kIncompatible);
    d.add_unknown_schema(3, "the registry answered 404");
    return d;
}

void check(const trackd::decode::DecodeResult& result) {
    if (const auto* rejection = std::get_if<trackd::core::Rejection>(&result)) {
        if (rejection->detail.empty()) std::abort();  // every rejection says what was wrong
    } else if (const auto* m = std::get_if<trackd::decode::DecodedMessage>(&result)) {
        if (m->geom_wkb.empty() && (!m->latitude || !m->longitude)) std::abort();
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static trackd::decode::ProtobufDecoder decoder = make_decoder();
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    if (!input.empty() && input.front() == '{') {
        trackd::decode::ProtobufDecoder fresh(64 * 1024, true);
        fresh.add_schema(9, input);
        if (!fresh.has_schema(9)) std::abort();
        // vehicle_id "v", recorded_at {seconds: 1}, latitude and longitude 1.0, framed with id 9.
        static const std::string framed = std::string("\x00\x00\x00\x00\x09\x00", 6) +
                                          std::string("\x0a\x01v\x12\x02\x08\x01", 7) +
                                          std::string("\x19\x00\x00\x00\x00\x00\x00\xf0\x3f", 9) +
                                          std::string("\x21\x00\x00\x00\x00\x00\x00\xf0\x3f", 9);
        const auto r = fresh.decode(framed);
        if (std::holds_alternative<trackd::decode::SchemaNeeded>(r)) std::abort();
        check(r);
        return 0;
    }
    const auto r = decoder.decode(input);
    if (const auto* need = std::get_if<trackd::decode::SchemaNeeded>(&r)) {
        if (need->schema_id >= 1 && need->schema_id <= 3) std::abort();  // those are known
    }
    check(r);
    return 0;
}
