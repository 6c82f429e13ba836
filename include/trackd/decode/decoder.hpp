// Turns a Kafka message payload (JSON) into a DecodedMessage, or says why it cannot.
// (Protobuf payloads: protobuf_decoder.hpp; the kafka.format switch: payload_decoder.hpp.)
//
// Contract: decode() checks syntax and types only; ranges, timestamps against the clock, CRS and
// WKB are validate/'s job. A bad payload is data: the result is a core::Rejection whose detail
// names the field and the bad value (quoted values cut to about 60 bytes), never an exception.
// Decoder reasons: payload_too_large (checked first), malformed_json, missing_field, wrong_type,
// not_finite, bad_timestamp, bad_vehicle_id (empty or control characters; the length limit is
// validate/'s). When one payload has several problems, malformed_json wins over the others, then
// the first problem in field order, then missing_field.
//
// Message fields (all names exact, case-sensitive):
//   vehicle_id   string, required
//   timestamp    RFC 3339 string ("2024-05-01T12:00:00Z", "...+02:00", optional fraction; digits
//                beyond microseconds are truncated) or epoch milliseconds as a JSON integer
//   latitude, longitude   numbers in the declared srid (y / x for a projected CRS)
//   geom_hex     hex WKB/EWKB point, instead of latitude+longitude (used when both are given)
//   srid         integer, default 4326
//   altitude_m, speed_kmh, heading_deg, accuracy_m   numbers, optional
// null means absent for every optional field (and "missing" for a required one). Any other field
// goes to attributes_json with its key and value bytes unchanged; attribute values must be valid
// JSON that PostgreSQL jsonb stores: no NaN/Infinity or numbers beyond double range (not_finite),
// no \u0000 and no unpaired surrogate escapes (malformed_json). When a known field appears twice,
// the last one wins.
//
// Threading: a Decoder is not thread-safe; use one per thread. It reuses its simdjson parser and
// padded buffer, so decoding allocates only the output strings.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "trackd/core/rejection.hpp"

namespace trackd::decode {

// Syntactically valid, not yet validated.
struct DecodedMessage {
    std::string vehicle_id;
    std::int64_t recorded_at_us = 0;  // microseconds since the Unix epoch, UTC
    // As given, in the declared srid (for a projected CRS these are y / x).
    std::optional<double> latitude, longitude;
    std::string geom_hex;  // hex WKB/EWKB point, if given instead of lat/lon ("" if not)
    std::string geom_wkb;  // the same as raw bytes (Protobuf's geom_wkb); "" if not given
    int srid = 4326;       // declared srid, default 4326
    std::optional<double> altitude_m, speed_kmh, heading_deg, accuracy_m;
    // Every other field, values unchanged as raw JSON: {"k":<raw>,...}; "" if none.
    std::string attributes_json;
};

class Decoder {
  public:
    explicit Decoder(std::size_t max_payload_bytes);
    ~Decoder();
    Decoder(Decoder&& other) noexcept;
    Decoder& operator=(Decoder&& other) noexcept;
    Decoder(const Decoder&) = delete;
    Decoder& operator=(const Decoder&) = delete;

    std::variant<DecodedMessage, core::Rejection> decode(std::string_view payload);

  private:
    struct State;  // simdjson parser, padded buffer, scratch space
    std::unique_ptr<State> state_;
};

}  // namespace trackd::decode
