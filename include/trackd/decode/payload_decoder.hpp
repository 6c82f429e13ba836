// The decoder the ingest uses: kafka.format picks JSON (decoder.hpp), Protobuf
// (protobuf_decoder.hpp), or per message by the Confluent magic byte (auto: a first byte 0 is a
// framed Protobuf message, anything else JSON). Both give the same DecodedMessage, so
// validation, dead letters and the exactly-once path are shared.
//
// Threading: not thread-safe; use one per thread.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "trackd/decode/decoder.hpp"
#include "trackd/decode/protobuf_decoder.hpp"

namespace trackd::decode {

enum class Format { json, protobuf, automatic };

// "json", "protobuf", "auto"; nullopt for anything else.
std::optional<Format> parse_format(std::string_view name);

class PayloadDecoder {
  public:
    PayloadDecoder(Format format, std::size_t max_payload_bytes, bool check_schemas);

    DecodeResult decode(std::string_view payload);

    // Where schema answers go (protobuf_decoder.hpp).
    ProtobufDecoder& protobuf() { return protobuf_; }

  private:
    Format format_;
    Decoder json_;
    ProtobufDecoder protobuf_;
};

}  // namespace trackd::decode
