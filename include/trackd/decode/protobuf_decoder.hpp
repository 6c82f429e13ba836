// Turns a Protobuf payload (trackd.v1.Position, proto/trackd/v1/position.proto), plain or in the
// Confluent wire format, into the DecodedMessage the JSON decoder gives, or says why it cannot.
//
// Contract: like decoder.hpp, decode() checks the encoding and types only (validate/ does the
// rest) and a bad payload is a core::Rejection, never an exception. Reasons: payload_too_large
// (first), bad_frame (the Confluent header), unknown_schema and incompatible_schema (schema
// checks, below), malformed_protobuf (the wire format: truncated, bad varint, field number 0,
// group or unknown wire type, a string that is not UTF-8, a NUL in an attribute), wrong_type (a
// field trackd reads with another wire type), bad_timestamp (recorded_at outside 1970..9999 or
// nanos outside [0, 1e9)), bad_vehicle_id (control characters), missing_field (vehicle_id,
// recorded_at, or a position: latitude+longitude or geom_wkb). malformed_protobuf wins over the
// others, then the first problem in payload order, then missing_field.
//
// Framing: a payload whose first byte is 0 is Confluent-framed: magic 0, the schema id (4 bytes,
// big-endian), the message indexes (a zigzag varint count, then that many zigzag varints; the
// single byte 00 means [0]), then the message. Any other payload is a plain message (a Protobuf
// message never starts with 0: field number 0 does not exist).
//
// Schema checks: with check_schemas (kafka.schema_registry_url is set) a framed message is read
// only once its schema id's registry answer was given with add_schema(): compatible schemas are
// read, others give incompatible_schema; an id the registry does not know (add_unknown_schema)
// gives unknown_schema. For an id not given yet decode() returns SchemaNeeded and the caller
// fetches the schema and decodes the payload again. Without check_schemas the schema id and the
// indexes are not looked at: the producer is trusted to send trackd.v1.Position.
//
// Unknown fields are skipped. When a field appears twice, the last one wins (recorded_at merges,
// as Protobuf does). Attributes become a JSON object of strings ({"k":"v",...}) in key order of
// the payload.
//
// Threading: not thread-safe; use one per thread. Decoding allocates only the output strings.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "trackd/core/rejection.hpp"
#include "trackd/decode/decoder.hpp"

namespace trackd::decode {

// A framed message whose schema id has no registry answer yet.
struct SchemaNeeded {
    std::uint32_t schema_id = 0;
};

using DecodeResult = std::variant<DecodedMessage, core::Rejection, SchemaNeeded>;

class ProtobufDecoder {
  public:
    ProtobufDecoder(std::size_t max_payload_bytes, bool check_schemas);
    ~ProtobufDecoder();
    ProtobufDecoder(ProtobufDecoder&& other) noexcept;
    ProtobufDecoder& operator=(ProtobufDecoder&& other) noexcept;
    ProtobufDecoder(const ProtobufDecoder&) = delete;
    ProtobufDecoder& operator=(const ProtobufDecoder&) = delete;

    DecodeResult decode(std::string_view payload);

    // The registry's answer to GET /schemas/ids/{id} (a JSON object whose "schema" holds .proto
    // text or a base64 FileDescriptorProto, and "schemaType"). An answer that does not parse or
    // is not compatible with trackd.v1.Position makes the id incompatible; the verdict is kept.
    void add_schema(std::uint32_t schema_id, std::string_view registry_answer);
    // The registry does not know the id; `detail` says what it answered.
    void add_unknown_schema(std::uint32_t schema_id, std::string detail);
    // Drops the id's verdict: its next message gives SchemaNeeded again.
    void forget_schema(std::uint32_t schema_id);
    // Whether the id has a verdict (compatible, incompatible or unknown).
    [[nodiscard]] bool has_schema(std::uint32_t schema_id) const;

  private:
    struct State;
    std::unique_ptr<State> state_;
};

// Why a schema (.proto text, or a serialized FileDescriptorProto) cannot be read as
// trackd.v1.Position at message path `indexes` ({0}: its first message), or "" when it can.
// Compatible: every field trackd reads that the message has uses the same number, type and
// cardinality; vehicle_id (1) and recorded_at (2) must be there. Names do not matter.
std::string schema_incompatibility(std::string_view schema, bool serialized_descriptor,
                                   const std::vector<int>& indexes = {0});

}  // namespace trackd::decode
