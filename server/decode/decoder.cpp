#include "trackd/decode/decoder.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <simdjson.h>

#include "trackd/core/error.hpp"
#include "trackd/core/time.hpp"

#include "json_check.hpp"
#include "text.hpp"

namespace trackd::decode {
namespace {

namespace od = simdjson::ondemand;
using core::Reason;
using core::Rejection;

// Epoch milliseconds accepted: 1970-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z.
constexpr std::int64_t kMaxEpochMs = 253402300799999;
static_assert((core::days_from_civil(9999, 12, 31) + 1) * 86400000 - 1 == kMaxEpochMs);

enum class Field {
    vehicle_id,
    timestamp,
    latitude,
    longitude,
    geom_hex,
    srid,
    altitude_m,
    speed_kmh,
    heading_deg,
    accuracy_m,
    attribute,
};

Field field_of(std::string_view k) {
    switch (k.size()) {
        case 4:
            if (k == "srid") return Field::srid;
            break;
        case 8:
            if (k == "latitude") return Field::latitude;
            if (k == "geom_hex") return Field::geom_hex;
            break;
        case 9:
            if (k == "timestamp") return Field::timestamp;
            if (k == "longitude") return Field::longitude;
            if (k == "speed_kmh") return Field::speed_kmh;
            break;
        case 10:
            if (k == "vehicle_id") return Field::vehicle_id;
            if (k == "altitude_m") return Field::altitude_m;
            if (k == "accuracy_m") return Field::accuracy_m;
            break;
        case 11:
            if (k == "heading_deg") return Field::heading_deg;
            break;
        default:
            break;
    }
    return Field::attribute;
}

// Whether the raw key at `raw` (just after its opening quote) is exactly `name`. Known names have
// no quote or backslash, so a match cannot be an escaped spelling; simdjson's padding makes
// reading name.size() + 1 bytes safe.
bool raw_key_is(const char* raw, std::string_view name) {
    return std::memcmp(raw, name.data(), name.size()) == 0 && raw[name.size()] == '"';
}

// The known field whose name is spelled without escapes at `raw`, or Field::attribute.
Field known_raw_key(const char* raw) {
    switch (raw[0]) {
        case 'v':
            if (raw_key_is(raw, "vehicle_id")) return Field::vehicle_id;
            break;
        case 't':
            if (raw_key_is(raw, "timestamp")) return Field::timestamp;
            break;
        case 'l':
            if (raw_key_is(raw, "latitude")) return Field::latitude;
            if (raw_key_is(raw, "longitude")) return Field::longitude;
            break;
        case 'g':
            if (raw_key_is(raw, "geom_hex")) return Field::geom_hex;
            break;
        case 's':
            if (raw_key_is(raw, "srid")) return Field::srid;
            if (raw_key_is(raw, "speed_kmh")) return Field::speed_kmh;
            break;
        case 'a':
            if (raw_key_is(raw, "altitude_m")) return Field::altitude_m;
            if (raw_key_is(raw, "accuracy_m")) return Field::accuracy_m;
            break;
        case 'h':
            if (raw_key_is(raw, "heading_deg")) return Field::heading_deg;
            break;
        default:
            break;
    }
    return Field::attribute;
}

std::string_view name_of(Field f) {
    switch (f) {
        case Field::vehicle_id:
            return "vehicle_id";
        case Field::timestamp:
            return "timestamp";
        case Field::latitude:
            return "latitude";
        case Field::longitude:
            return "longitude";
        case Field::geom_hex:
            return "geom_hex";
        case Field::srid:
            return "srid";
        case Field::altitude_m:
            return "altitude_m";
        case Field::speed_kmh:
            return "speed_kmh";
        case Field::heading_deg:
            return "heading_deg";
        case Field::accuracy_m:
            return "accuracy_m";
        case Field::attribute:
            break;
    }
    return "";
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// A string token that reads the same escaped and unescaped: simdjson has already checked its
// UTF-8 and that it has no raw control characters.
bool is_plain_string(std::string_view token) {
    return token.size() >= 2 && token.front() == '"' && token.back() == '"' &&
           std::memchr(token.data(), '\\', token.size()) == nullptr;
}

std::string_view trim_right(std::string_view s) {
    while (!s.empty() &&
           (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r')) {
        s.remove_suffix(1);
    }
    return s;
}

// How a raw JSON token reads in a detail: `string "52.1"`, `number 42`, `true`, `an object`.
std::string describe(std::string_view token) {
    const char c = token.empty() ? '\0' : token.front();
    if (c == '"') return "string " + shorten(token);
    if (c == '{') return "an object";
    if (c == '[') return "an array";
    if (c == '-' || is_digit(c)) return "number " + shorten(token);
    return shorten(token);
}

const char* simdjson_problem(simdjson::error_code e) {
    switch (e) {
        case simdjson::EMPTY:
            return "empty payload";
        case simdjson::UTF8_ERROR:
            return "invalid UTF-8";
        case simdjson::UNESCAPED_CHARS:
            return "unescaped control character in a string";
        case simdjson::UNCLOSED_STRING:
            return "unclosed string";
        case simdjson::STRING_ERROR:
            return "bad string escape";
        case simdjson::NUMBER_ERROR:
            return "bad number";
        case simdjson::T_ATOM_ERROR:
        case simdjson::F_ATOM_ERROR:
        case simdjson::N_ATOM_ERROR:
            return "bad literal";
        case simdjson::DEPTH_ERROR:
            return "nested too deep";
        case simdjson::INCOMPLETE_ARRAY_OR_OBJECT:
            return "not one complete JSON object (cut short, or text after it)";
        case simdjson::INCORRECT_TYPE:
            return "not a JSON object";
        case simdjson::TAPE_ERROR:
            return "bad structure (missing or extra comma, colon, brace or key)";
        default:
            return simdjson::error_message(e);
    }
}

bool has_fraction_or_exponent(std::string_view token) {
    return token.find_first_of(".eE") != std::string_view::npos;
}

// Reads the fields of one payload. Syntax errors end the read at once (malformed_json wins);
// the first other problem is kept and reported after the rest has been syntax-checked.
class MessageReader {
  public:
    explicit MessageReader(std::string& attributes) : attributes_(attributes) {
        attributes_.clear();
    }

    // False on a syntax error (then take_syntax_error() holds the rejection).
    bool read(od::field& field) {
        const char* raw_key = field.key().raw();
        Field which = known_raw_key(raw_key);
        if (which != Field::attribute) {
            key_raw_ = name_of(which);
        } else {
            const char* q = raw_key;
            bool escaped = false;
            // simdjson has found the closing quote already, so this stops inside the buffer.
            while (*q != '"') {
                if (*q == '\\') {
                    escaped = true;
                    q += 2;
                } else {
                    ++q;
                }
            }
            key_raw_ = std::string_view(raw_key, static_cast<std::size_t>(q - raw_key));
            if (escaped) {
                const JsonCheck check = check_json_string_body(key_raw_);
                if (check.problem != JsonProblem::none) return syntax("key", check);
                std::string_view key;
                if (auto e = field.unescaped_key().get(key)) return syntax(e);
                which = field_of(key);
            }
        }
        od::value& v = field.value();
        const std::string_view token = trim_right(v.raw_json_token());
        switch (which) {
            case Field::vehicle_id:
                return read_vehicle_id(v, token);
            case Field::timestamp:
                return read_timestamp(v, token);
            case Field::latitude:
                return read_number("latitude", v, token, latitude_);
            case Field::longitude:
                return read_number("longitude", v, token, longitude_);
            case Field::geom_hex:
                return read_geom_hex(v, token);
            case Field::srid:
                return read_srid(v, token);
            case Field::altitude_m:
                return read_number("altitude_m", v, token, altitude_m_);
            case Field::speed_kmh:
                return read_number("speed_kmh", v, token, speed_kmh_);
            case Field::heading_deg:
                return read_number("heading_deg", v, token, heading_deg_);
            case Field::accuracy_m:
                return read_number("accuracy_m", v, token, accuracy_m_);
            case Field::attribute:
                return read_attribute(v, token);
        }
        return true;
    }

    Rejection take_syntax_error() { return std::move(*syntax_error_); }

    std::variant<DecodedMessage, Rejection> finish() {
        if (problem_) return std::move(*problem_);
        if (!vehicle_id_) return Rejection{Reason::missing_field, "vehicle_id: missing"};
        if (!recorded_at_us_) return Rejection{Reason::missing_field, "timestamp: missing"};
        if (geom_hex_.empty()) {
            if (!latitude_ && !longitude_) {
                return Rejection{Reason::missing_field,
                                 "position: neither latitude+longitude nor geom_hex"};
            }
            if (!latitude_) return Rejection{Reason::missing_field, "latitude: missing"};
            if (!longitude_) return Rejection{Reason::missing_field, "longitude: missing"};
        }
        DecodedMessage m;
        m.vehicle_id.assign(*vehicle_id_);
        m.recorded_at_us = *recorded_at_us_;
        m.latitude = latitude_;
        m.longitude = longitude_;
        m.geom_hex.assign(geom_hex_);
        m.srid = srid_;
        m.altitude_m = altitude_m_;
        m.speed_kmh = speed_kmh_;
        m.heading_deg = heading_deg_;
        m.accuracy_m = accuracy_m_;
        if (!attributes_.empty()) {
            attributes_ += '}';
            m.attributes_json.assign(attributes_);
        }
        return m;
    }

  private:
    bool syntax(simdjson::error_code e) {
        syntax_error_ =
            Rejection{Reason::malformed_json,
                      fmt::format("field \"{}\": {}", shorten(key_raw_), simdjson_problem(e))};
        return false;
    }

    bool syntax(std::string_view where, const JsonCheck& check) {
        std::string detail = fmt::format("{} \"{}\": {}", where, shorten(key_raw_), check.what);
        if (!check.token.empty()) detail += ": " + shorten(check.token);
        syntax_error_ = Rejection{Reason::malformed_json, std::move(detail)};
        return false;
    }

    // Keeps the first non-syntax problem; reading goes on.
    bool problem(Reason reason, std::string detail) {
        if (!problem_) problem_ = Rejection{reason, std::move(detail)};
        return true;
    }

    bool not_finite(const char* name, std::string_view token) {
        return problem(Reason::not_finite,
                       fmt::format("{}: {} is not a finite number", name, shorten(token)));
    }

    // The full raw text of a value: the token for scalars, the whole container otherwise.
    bool raw_value(od::value& v, std::string_view token, std::string_view& raw) {
        raw = token;
        if (token.empty()) return true;
        if (token.front() == '{') {
            od::object o;
            if (auto e = v.get_object().get(o)) return syntax(e);
            if (auto e = o.raw_json().get(raw)) return syntax(e);
        } else if (token.front() == '[') {
            od::array a;
            if (auto e = v.get_array().get(a)) return syntax(e);
            if (auto e = a.raw_json().get(raw)) return syntax(e);
        }
        raw = trim_right(raw);
        return true;
    }

    // A value of the wrong type: still syntax-checked, since malformed_json wins.
    bool wrong_type(const char* name, const char* expected, od::value& v, std::string_view token) {
        std::string_view raw;
        if (!raw_value(v, token, raw)) return false;
        const JsonCheck check = check_json_value(raw);
        if (check.problem == JsonProblem::malformed || check.problem == JsonProblem::unstorable) {
            return syntax("field", check);
        }
        return problem(Reason::wrong_type,
                       fmt::format("{}: expected {}, got {}", name, expected, describe(token)));
    }

    bool bad_number(std::string_view token) {
        return syntax("field", JsonCheck{JsonProblem::malformed, token, "not a JSON number"});
    }

    bool read_number(const char* name, od::value& v, std::string_view token,
                     std::optional<double>& out) {
        const char c = token.empty() ? '\0' : token.front();
        if (c == '-' || is_digit(c)) {
            double d = 0;
            if (v.get_double().get(d) == simdjson::SUCCESS) {
                out = d;
                return true;
            }
            if (is_non_finite_token(token)) return not_finite(name, token);
            switch (classify_number(token)) {
                case NumberClass::overflow:
                    return problem(Reason::not_finite, fmt::format("{}: {} overflows to infinity",
                                                                   name, shorten(token)));
                case NumberClass::finite:
                case NumberClass::invalid:
                    return bad_number(token);
            }
        }
        if (token == "null") {
            out.reset();
            return true;
        }
        if (is_non_finite_token(token)) return not_finite(name, token);
        return wrong_type(name, "a number", v, token);
    }

    // Reads a string value; nullopt result (with true) for null.
    bool read_string(const char* name, od::value& v, std::string_view token,
                     std::optional<std::string_view>& out) {
        if (is_plain_string(token)) {
            out = token.substr(1, token.size() - 2);
            return true;
        }
        if (!token.empty() && token.front() == '"') {
            if (token.find('\\') != std::string_view::npos) {
                const JsonCheck check = check_json_string_body(token.substr(1, token.size() - 2));
                if (check.problem == JsonProblem::malformed) return syntax("field", check);
            }
            std::string_view s;
            if (auto e = v.get_string().get(s)) return syntax(e);
            out = s;
            return true;
        }
        if (token == "null") {
            out.reset();
            return true;
        }
        return wrong_type(name, "a string", v, token);
    }

    bool read_vehicle_id(od::value& v, std::string_view token) {
        if (!read_string("vehicle_id", v, token, vehicle_id_)) return false;
        if (!vehicle_id_) return true;
        if (vehicle_id_->empty()) return problem(Reason::bad_vehicle_id, "vehicle_id: empty");
        const int control = first_control_character(*vehicle_id_);
        if (control >= 0) {
            return problem(Reason::bad_vehicle_id,
                           fmt::format("vehicle_id: {} contains control character U+{:04X}",
                                       shorten(token), control));
        }
        return true;
    }

    bool read_geom_hex(od::value& v, std::string_view token) {
        std::optional<std::string_view> s;
        if (!read_string("geom_hex", v, token, s)) return false;
        geom_hex_ = s.value_or(std::string_view{});
        return true;
    }

    bool read_timestamp(od::value& v, std::string_view token) {
        const char c = token.empty() ? '\0' : token.front();
        if (c == '"') {
            std::optional<std::string_view> s;
            if (!read_string("timestamp", v, token, s)) return false;
            std::int64_t us = 0;
            switch (core::parse_rfc3339(*s, us)) {
                case core::Rfc3339Status::ok:
                    recorded_at_us_ = us;
                    return true;
                case core::Rfc3339Status::syntax:
                    return problem(Reason::bad_timestamp,
                                   fmt::format("timestamp: {} is neither RFC 3339 nor epoch "
                                               "milliseconds",
                                               shorten(token)));
                case core::Rfc3339Status::out_of_range:
                    return problem(
                        Reason::bad_timestamp,
                        fmt::format("timestamp: {} is not a valid date and time", shorten(token)));
            }
        }
        if (c == '-' || is_digit(c)) {
            if (is_non_finite_token(token)) return not_finite("timestamp", token);
            if (classify_number(token) == NumberClass::invalid) return bad_number(token);
            if (has_fraction_or_exponent(token)) {
                return wrong_type("timestamp", "an RFC 3339 string or integer epoch milliseconds",
                                  v, token);
            }
            std::int64_t ms = 0;
            const auto [ptr, ec] = std::from_chars(token.data(), token.data() + token.size(), ms);
            (void)ptr;
            if (ec == std::errc{} && ms >= 0 && ms <= kMaxEpochMs) {
                recorded_at_us_ = ms * 1000;
                return true;
            }
            return problem(Reason::bad_timestamp,
                           fmt::format("timestamp: {} epoch milliseconds is {}", shorten(token),
                                       c == '-' ? "negative" : "after 9999-12-31"));
        }
        if (token == "null") {
            recorded_at_us_.reset();
            return true;
        }
        if (is_non_finite_token(token)) return not_finite("timestamp", token);
        return wrong_type("timestamp", "an RFC 3339 string or integer epoch milliseconds", v,
                          token);
    }

    bool read_srid(od::value& v, std::string_view token) {
        const char c = token.empty() ? '\0' : token.front();
        if (c == '-' || is_digit(c)) {
            if (is_non_finite_token(token)) return not_finite("srid", token);
            if (classify_number(token) == NumberClass::invalid) return bad_number(token);
            if (has_fraction_or_exponent(token)) {
                return wrong_type("srid", "an integer", v, token);
            }
            std::int64_t srid = 0;
            const auto [ptr, ec] = std::from_chars(token.data(), token.data() + token.size(), srid);
            (void)ptr;
            if (ec != std::errc{} || srid < std::numeric_limits<int>::min() ||
                srid > std::numeric_limits<int>::max()) {
                return problem(Reason::unknown_srid,
                               fmt::format("srid: {} is not an SRID", shorten(token)));
            }
            srid_ = static_cast<int>(srid);
            return true;
        }
        if (token == "null") {
            srid_ = 4326;
            return true;
        }
        if (is_non_finite_token(token)) return not_finite("srid", token);
        return wrong_type("srid", "an integer", v, token);
    }

    // Common attribute values that need no full check: plain strings, literals, and numbers
    // without exponent that fit a double (short enough for jsonb's numeric scale).
    static bool is_plainly_valid(std::string_view raw) {
        if (raw.empty()) return false;
        const char c = raw.front();
        if (c == '"') return is_plain_string(raw);
        if (c == '-' || is_digit(c)) {
            // The grammar and the range by hand (json_check): get_double's division cost more.
            return raw.size() < 1000 && raw.find_first_of("eE") == std::string_view::npos &&
                   classify_number(raw) == NumberClass::finite;
        }
        return raw == "true" || raw == "false" || raw == "null";
    }

    bool read_attribute(od::value& v, std::string_view token) {
        std::string_view raw;
        if (!raw_value(v, token, raw)) return false;
        const JsonCheck check = is_plainly_valid(raw) ? JsonCheck{} : check_json_value(raw);
        switch (check.problem) {
            case JsonProblem::none:
                break;
            case JsonProblem::not_finite:
                problem(Reason::not_finite, fmt::format("{}: {} {}", shorten(key_raw_),
                                                        shorten(check.token), check.what));
                break;
            case JsonProblem::malformed:
            case JsonProblem::unstorable:
                return syntax("field", check);
        }
        attributes_ += attributes_.empty() ? "{\"" : ",\"";
        attributes_ += key_raw_;
        attributes_ += "\":";
        attributes_ += raw;
        return true;
    }

    std::string& attributes_;
    std::string_view key_raw_;
    std::optional<Rejection> syntax_error_;
    std::optional<Rejection> problem_;

    std::optional<std::string_view> vehicle_id_;
    std::optional<std::int64_t> recorded_at_us_;
    std::optional<double> latitude_, longitude_;
    std::string_view geom_hex_;
    int srid_ = 4326;
    std::optional<double> altitude_m_, speed_kmh_, heading_deg_, accuracy_m_;
};

Rejection malformed(simdjson::error_code e) {
    return Rejection{Reason::malformed_json, simdjson_problem(e)};
}

}  // namespace

struct Decoder::State {
    explicit State(std::size_t max)
        : max_payload(max),
          parser(std::max<std::size_t>(max, 1)),
          buffer(new char[max + simdjson::SIMDJSON_PADDING]) {
        if (parser.allocate(std::max<std::size_t>(max, 1), kMaxJsonDepth) != simdjson::SUCCESS) {
            throw core::StartupError("decode: cannot allocate a JSON parser for " +
                                     std::to_string(max) + " bytes");
        }
        attributes.reserve(1024);
    }

    std::size_t max_payload;
    od::parser parser;
    std::unique_ptr<char[]> buffer;  // max_payload + SIMDJSON_PADDING bytes
    std::string attributes;          // scratch, reused
};

Decoder::Decoder(std::size_t max_payload_bytes)
    : state_(std::make_unique<State>(max_payload_bytes)) {}

Decoder::~Decoder() = default;
Decoder::Decoder(Decoder&&) noexcept = default;
Decoder& Decoder::operator=(Decoder&&) noexcept = default;

std::variant<DecodedMessage, core::Rejection> Decoder::decode(std::string_view payload) {
    State& s = *state_;
    if (payload.size() > s.max_payload) {
        return Rejection{Reason::payload_too_large,
                         fmt::format("payload: {} bytes, more than validate.max_payload_bytes ({})",
                                     payload.size(), s.max_payload)};
    }
    char* buf = s.buffer.get();
    if (!payload.empty()) std::memcpy(buf, payload.data(), payload.size());
    std::memset(buf + payload.size(), 0, simdjson::SIMDJSON_PADDING);

    od::document doc;
    if (auto e = s.parser.iterate(buf, payload.size(), payload.size() + simdjson::SIMDJSON_PADDING)
                     .get(doc)) {
        return malformed(e);
    }
    od::object object;
    if (auto e = doc.get_object().get(object)) return malformed(e);

    MessageReader reader(s.attributes);
    for (auto result : object) {
        if (auto e = result.error()) return malformed(e);
        // The field in place: moving it out into another od::field made the processor wait
        // for the stores it had just made (a 16-byte load over two narrower stores), about a
        // tenth of the decode (bench/RESULTS.md, 2026-12-06).
        if (!reader.read(result.value_unsafe())) return reader.take_syntax_error();
    }
    // current_location() fails with OUT_OF_BOUNDS exactly when nothing follows the object.
    if (doc.current_location().error() == simdjson::SUCCESS) {
        return Rejection{Reason::malformed_json, "trailing content after the JSON object"};
    }
    return reader.finish();
}

}  // namespace trackd::decode
