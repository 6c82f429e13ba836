// Checks raw JSON text that trackd passes on unchanged (the attributes), so that what reaches
// PostgreSQL jsonb is exactly one valid value jsonb accepts.
//
// simdjson On-Demand validates only what the decoder reads; attribute values are copied as raw
// bytes, so they are checked here. The whole payload has already passed simdjson's UTF-8 and
// string-boundary checks, so this does not repeat them.
#pragma once

#include <cstddef>
#include <string_view>

namespace trackd::decode {

enum class JsonProblem {
    none,
    malformed,   // not JSON
    not_finite,  // NaN / Infinity / -Infinity tokens, or a number beyond double range
    unstorable,  // valid JSON that PostgreSQL jsonb refuses (\u0000, >16383 fraction digits)
};

struct JsonCheck {
    JsonProblem problem = JsonProblem::none;
    std::string_view token;  // the offending token (or where parsing stopped)
    // Short explanation: a predicate for not_finite ("is not a finite number"), otherwise a noun
    // phrase ("not a JSON value").
    const char* what = "";
};

// Nesting deeper than this is malformed_json (the simdjson parser uses the same limit).
inline constexpr std::size_t kMaxJsonDepth = 256;

// `text` must be exactly one JSON value, optionally surrounded by whitespace.
JsonCheck check_json_value(std::string_view text) noexcept;

// `body` is the content of a JSON string between its quotes (escapes not yet decoded).
JsonCheck check_json_string_body(std::string_view body) noexcept;

// The bare tokens Python's json.dumps writes for non-finite floats: NaN, Infinity, -Infinity.
bool is_non_finite_token(std::string_view token) noexcept;

enum class NumberClass { finite, overflow, invalid };

// Whether `token` follows the JSON number grammar and whether its value fits a double.
// Numbers that underflow to zero count as finite.
NumberClass classify_number(std::string_view token) noexcept;

}  // namespace trackd::decode
