#include "trackd/decode/payload_decoder.hpp"

#include <utility>

namespace trackd::decode {

std::optional<Format> parse_format(std::string_view name) {
    if (name == "json") return Format::json;
    if (name == "protobuf") return Format::protobuf;
    if (name == "auto") return Format::automatic;
    return std::nullopt;
}

PayloadDecoder::PayloadDecoder(Format format, std::size_t max_payload_bytes, bool check_schemas)
    : format_(format), json_(max_payload_bytes), protobuf_(max_payload_bytes, check_schemas) {}

DecodeResult PayloadDecoder::decode(std::string_view payload) {
    const bool protobuf = format_ == Format::protobuf ||
                          (format_ == Format::automatic && !payload.empty() && payload[0] == '\0');
    if (protobuf) return protobuf_.decode(payload);
    auto r = json_.decode(payload);
    if (auto* m = std::get_if<DecodedMessage>(&r)) return std::move(*m);
    return std::move(std::get<core::Rejection>(r));
}

}  // namespace trackd::decode
