// Fuzzes decode::Decoder::decode with arbitrary Kafka payloads: it must return a message or a
// Rejection for every input, never crash, leak or hit undefined behaviour.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <variant>

#include "trackd/decode/decoder.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    // The default validate.max_payload_bytes; one decoder reused, as in the pipeline.
    static trackd::decode::Decoder decoder(64 * 1024);
    const std::string_view payload(reinterpret_cast<const char*>(data), size);
    const auto result = decoder.decode(payload);
    if (const auto* rejection = std::get_if<trackd::core::Rejection>(&result)) {
        if (rejection->detail.empty()) std::abort();  // every rejection says what was wrong
    } else {
        const auto& m = std::get<trackd::decode::DecodedMessage>(result);
        if (m.vehicle_id.empty()) std::abort();  // vehicle_id is required and non-empty
        if (m.geom_hex.empty() && (!m.latitude || !m.longitude)) std::abort();
    }
    return 0;
}
