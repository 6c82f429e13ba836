#include "trackd/decode/protobuf_decoder.hpp"

#include <array>
#include <cstring>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <simdjson.h>

#include "trackd/core/time.hpp"

#include "schema_catalog.hpp"
#include "text.hpp"

namespace trackd::decode {
namespace {

using core::Reason;
using core::Rejection;

// recorded_at accepted: 1970-01-01T00:00:00Z to 9999-12-31T23:59:59Z, as for JSON.
constexpr std::int64_t kMaxSeconds = (core::days_from_civil(9999, 12, 31) + 1) * 86400 - 1;
// Message indexes deeper than this are refused (bad_frame); real schemas nest a few levels.
constexpr std::size_t kMaxIndexes = 16;

enum WireType : std::uint32_t { varint = 0, i64 = 1, len = 2, sgroup = 3, egroup = 4, i32 = 5 };

const char* wire_name(std::uint32_t w) {
    switch (w) {
        case varint:
            return "varint";
        case i64:
            return "64-bit";
        case len:
            return "length-delimited";
        case sgroup:
        case egroup:
            return "group";
        case i32:
            return "32-bit";
        default:
            return "unknown";
    }
}

// Reads a base-128 varint; false when it is cut short or longer than 10 bytes.
bool read_varint(const unsigned char*& p, const unsigned char* end, std::uint64_t& out) {
    std::uint64_t v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (p == end) return false;
        const unsigned char b = *p++;
        v |= static_cast<std::uint64_t>(b & 0x7F) << shift;
        if ((b & 0x80) == 0) {
            out = v;
            return true;
        }
    }
    return false;
}

std::int64_t zigzag(std::uint64_t v) {
    return static_cast<std::int64_t>(v >> 1) ^ -static_cast<std::int64_t>(v & 1);
}

// Most strings are ASCII: checked here without simdjson's dispatch.
bool is_ascii(std::string_view s) {
    unsigned char any = 0;
    for (const char c : s) any |= static_cast<unsigned char>(c);
    return any < 0x80;
}

// Appends `s` as the body of a JSON string (quotes not included).
void append_json_string(std::string& out, std::string_view s) {
    bool plain = true;
    for (const char c : s) {
        plain = plain && c != '"' && c != '\\' && static_cast<unsigned char>(c) >= 0x20;
    }
    if (plain) {
        out.append(s);
        return;
    }
    for (const char c : s) {
        const auto b = static_cast<unsigned char>(c);
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (b < 0x20) {
            out += fmt::format("\\u{:04x}", b);
        } else {
            out += c;
        }
    }
}

// Reads the fields of one message. Wire-format errors end the read at once (malformed_protobuf
// wins); the first other problem is kept and reported after the rest has been read.
class WireReader {
  public:
    WireReader(const unsigned char* p, const unsigned char* end, DecodedMessage& out)
        : p_(p), end_(end), out_(out) {}

    std::optional<Rejection> read() {
        while (p_ != end_) {
            std::uint64_t key = 0;
            if (!read_varint(p_, end_, key)) return malformed("a field key is cut short");
            const auto number = key >> 3;
            const auto wire = static_cast<std::uint32_t>(key & 7);
            if (number == 0 || number > 536870911) {
                return malformed(fmt::format("field number {} is not valid", number));
            }
            if (auto r = field(static_cast<std::uint32_t>(number), wire)) return r;
        }
        if (problem_) return problem_;
        if (!has_vehicle_id_) return Rejection{Reason::missing_field, "vehicle_id (1): missing"};
        if (!has_recorded_at_) {
            return Rejection{Reason::missing_field, "recorded_at (2): missing"};
        }
        if (seconds_ < 0 || seconds_ > kMaxSeconds || nanos_ < 0 || nanos_ > 999'999'999) {
            return Rejection{Reason::bad_timestamp,
                             fmt::format("recorded_at (2): seconds {} nanos {} is not a time "
                                         "between 1970 and 9999",
                                         seconds_, nanos_)};
        }
        out_.recorded_at_us = seconds_ * 1'000'000 + nanos_ / 1000;
        if (out_.geom_wkb.empty() && (!out_.latitude || !out_.longitude)) {
            if (!out_.latitude && !out_.longitude) {
                return Rejection{Reason::missing_field,
                                 "position: neither latitude (3) + longitude (4) nor geom_wkb (6)"};
            }
            return Rejection{Reason::missing_field,
                             out_.latitude ? "longitude (4): missing" : "latitude (3): missing"};
        }
        if (!out_.attributes_json.empty()) out_.attributes_json += '}';
        return std::nullopt;
    }

  private:
    static Rejection malformed(std::string detail) {
        return Rejection{Reason::malformed_protobuf, std::move(detail)};
    }
    void problem(Reason reason, std::string detail) {
        if (!problem_) problem_ = Rejection{reason, std::move(detail)};
    }

    // The bytes of a length-delimited field, or an error.
    std::optional<Rejection> bytes(std::string_view& out, std::uint32_t number) {
        std::uint64_t n = 0;
        if (!read_varint(p_, end_, n) || n > static_cast<std::uint64_t>(end_ - p_)) {
            return malformed(fmt::format("field {}: length-delimited value cut short", number));
        }
        out = std::string_view(reinterpret_cast<const char*>(p_), static_cast<std::size_t>(n));
        p_ += n;
        return std::nullopt;
    }

    std::optional<Rejection> skip(std::uint32_t number, std::uint32_t wire) {
        std::uint64_t v = 0;
        std::string_view s;
        switch (wire) {
            case varint:
                if (!read_varint(p_, end_, v)) {
                    return malformed(fmt::format("field {}: varint cut short", number));
                }
                return std::nullopt;
            case i64:
            case i32: {
                const std::ptrdiff_t n = wire == i64 ? 8 : 4;
                if (end_ - p_ < n) {
                    return malformed(
                        fmt::format("field {}: {} value cut short", number, wire_name(wire)));
                }
                p_ += n;
                return std::nullopt;
            }
            case len:
                return bytes(s, number);
            default:
                return malformed(fmt::format("field {}: wire type {} ({}) is not supported", number,
                                             wire, wire_name(wire)));
        }
    }

    // A known field with another wire type: kept as a problem, the value skipped.
    std::optional<Rejection> wrong(std::uint32_t number, const char* name, std::uint32_t wire,
                                   std::uint32_t expected) {
        if (auto r = skip(number, wire)) return r;
        problem(Reason::wrong_type,
                fmt::format("{} ({}): wire type {} ({}), expected {} ({})", name, number, wire,
                            wire_name(wire), expected, wire_name(expected)));
        return std::nullopt;
    }

    std::optional<Rejection> read_double(std::uint32_t number, const char* name, std::uint32_t wire,
                                         std::optional<double>& out) {
        if (wire != i64) return wrong(number, name, wire, i64);
        if (end_ - p_ < 8) return malformed(fmt::format("{} ({}): cut short", name, number));
        double v = 0;
        std::memcpy(&v, p_, 8);  // little-endian on the wire and on the machines we build for
        p_ += 8;
        out = v;
        return std::nullopt;
    }

    std::optional<Rejection> read_float(std::uint32_t number, const char* name, std::uint32_t wire,
                                        std::optional<double>& out) {
        if (wire != i32) return wrong(number, name, wire, i32);
        if (end_ - p_ < 4) return malformed(fmt::format("{} ({}): cut short", name, number));
        float v = 0;
        std::memcpy(&v, p_, 4);
        p_ += 4;
        out = static_cast<double>(v);
        return std::nullopt;
    }

    std::optional<Rejection> read_string(std::uint32_t number, const char* name,
                                         std::string_view& out) {
        if (auto r = bytes(out, number)) return r;
        if (!is_ascii(out) && !simdjson::validate_utf8(out.data(), out.size())) {
            return malformed(fmt::format("{} ({}): not valid UTF-8", name, number));
        }
        return std::nullopt;
    }

    std::optional<Rejection> read_timestamp(std::uint32_t wire) {
        if (wire != len) return wrong(2, "recorded_at", wire, len);
        std::string_view body;
        if (auto r = bytes(body, 2)) return r;
        has_recorded_at_ = true;
        const auto* p = reinterpret_cast<const unsigned char*>(body.data());
        const auto* end = p + body.size();
        while (p != end) {
            std::uint64_t key = 0;
            std::uint64_t v = 0;
            if (!read_varint(p, end, key)) return malformed("recorded_at (2): a key is cut short");
            const auto number = key >> 3;
            const auto w = static_cast<std::uint32_t>(key & 7);
            if ((number == 1 || number == 2) && w == varint) {
                if (!read_varint(p, end, v)) {
                    return malformed("recorded_at (2): a varint is cut short");
                }
                if (number == 1) {
                    seconds_ = static_cast<std::int64_t>(v);
                } else {
                    nanos_ = static_cast<std::int32_t>(static_cast<std::int64_t>(v));
                }
                continue;
            }
            if (number == 1 || number == 2) {
                problem(Reason::wrong_type,
                        fmt::format("recorded_at (2): {} has wire type {} ({}), expected 0 "
                                    "(varint)",
                                    number == 1 ? "seconds" : "nanos", w, wire_name(w)));
            }
            WireReader inner(p, end, out_);
            if (auto r = inner.skip(static_cast<std::uint32_t>(number), w)) {
                return malformed("recorded_at (2): " + r->detail);
            }
            p = inner.p_;
        }
        return std::nullopt;
    }

    std::optional<Rejection> read_attribute(std::uint32_t wire) {
        if (wire != len) return wrong(11, "attributes", wire, len);
        std::string_view entry;
        if (auto r = bytes(entry, 11)) return r;
        const auto* p = reinterpret_cast<const unsigned char*>(entry.data());
        const auto* end = p + entry.size();
        std::string_view key;
        std::string_view value;
        while (p != end) {
            WireReader inner(p, end, out_);
            std::uint64_t k = 0;
            if (!read_varint(inner.p_, end, k)) {
                return malformed("attributes (11): a key is cut short");
            }
            const auto number = k >> 3;
            const auto w = static_cast<std::uint32_t>(k & 7);
            if ((number == 1 || number == 2) && w == len) {
                std::string_view s;
                if (auto r = inner.read_string(11, "attributes", s)) return r;
                (number == 1 ? key : value) = s;
            } else {
                if (number == 1 || number == 2) {
                    problem(Reason::wrong_type,
                            fmt::format("attributes (11): entry {} has wire type {} ({}), "
                                        "expected 2 (length-delimited)",
                                        number == 1 ? "key" : "value", w, wire_name(w)));
                }
                if (auto r = inner.skip(static_cast<std::uint32_t>(number), w)) {
                    return malformed("attributes (11): " + r->detail);
                }
            }
            p = inner.p_;
        }
        // jsonb cannot hold U+0000.
        if (key.find('\0') != std::string_view::npos ||
            value.find('\0') != std::string_view::npos) {
            return malformed(
                fmt::format("attributes (11): \"{}\" holds a NUL character, which "
                            "PostgreSQL's jsonb cannot store",
                            shorten(key)));
        }
        auto& a = out_.attributes_json;
        if (a.empty()) a.reserve(96);
        a += a.empty() ? "{\"" : ",\"";
        append_json_string(a, key);
        a += "\":\"";
        append_json_string(a, value);
        a += '"';
        return std::nullopt;
    }

    std::optional<Rejection> field(std::uint32_t number, std::uint32_t wire) {
        switch (number) {
            case 1: {
                if (wire != len) return wrong(1, "vehicle_id", wire, len);
                std::string_view id;
                if (auto r = read_string(1, "vehicle_id", id)) return r;
                has_vehicle_id_ = true;
                out_.vehicle_id.assign(id);
                const int control = first_control_character(id);
                if (control >= 0) {
                    problem(
                        Reason::bad_vehicle_id,
                        fmt::format("vehicle_id (1): \"{}\" contains control character U+{:04X}",
                                    shorten(id), control));
                }
                return std::nullopt;
            }
            case 2:
                return read_timestamp(wire);
            case 3:
                return read_double(3, "latitude", wire, out_.latitude);
            case 4:
                return read_double(4, "longitude", wire, out_.longitude);
            case 5:
                return read_double(5, "altitude_m", wire, out_.altitude_m);
            case 6: {
                if (wire != len) return wrong(6, "geom_wkb", wire, len);
                std::string_view wkb;
                if (auto r = bytes(wkb, 6)) return r;
                out_.geom_wkb.assign(wkb);
                return std::nullopt;
            }
            case 7: {
                if (wire != varint) return wrong(7, "srid", wire, varint);
                std::uint64_t v = 0;
                if (!read_varint(p_, end_, v)) return malformed("srid (7): varint cut short");
                const auto srid = static_cast<std::int64_t>(v);
                if (srid < std::numeric_limits<std::int32_t>::min() ||
                    srid > std::numeric_limits<std::int32_t>::max()) {
                    problem(Reason::wrong_type, fmt::format("srid (7): {} is not an int32", srid));
                    return std::nullopt;
                }
                out_.srid = srid == 0 ? 4326 : static_cast<int>(srid);
                return std::nullopt;
            }
            case 8:
                return read_float(8, "speed_kmh", wire, out_.speed_kmh);
            case 9:
                return read_float(9, "heading_deg", wire, out_.heading_deg);
            case 10:
                return read_float(10, "accuracy_m", wire, out_.accuracy_m);
            case 11:
                return read_attribute(wire);
            default:
                return skip(number, wire);
        }
    }

    const unsigned char* p_;
    const unsigned char* end_;
    DecodedMessage& out_;
    std::optional<Rejection> problem_;
    bool has_vehicle_id_ = false;
    bool has_recorded_at_ = false;
    std::int64_t seconds_ = 0;
    std::int32_t nanos_ = 0;
};

}  // namespace

struct ProtobufDecoder::State {
    std::size_t max_payload_bytes;
    bool check_schemas;
    SchemaCatalog schemas;
};

ProtobufDecoder::ProtobufDecoder(std::size_t max_payload_bytes, bool check_schemas)
    : state_(std::make_unique<State>(State{max_payload_bytes, check_schemas, {}})) {}
ProtobufDecoder::~ProtobufDecoder() = default;
ProtobufDecoder::ProtobufDecoder(ProtobufDecoder&&) noexcept = default;
ProtobufDecoder& ProtobufDecoder::operator=(ProtobufDecoder&&) noexcept = default;

DecodeResult ProtobufDecoder::decode(std::string_view payload) {
    if (payload.size() > state_->max_payload_bytes) {
        return Rejection{Reason::payload_too_large,
                         fmt::format("{} bytes, more than validate.max_payload_bytes ({})",
                                     payload.size(), state_->max_payload_bytes)};
    }
    const auto* p = reinterpret_cast<const unsigned char*>(payload.data());
    const auto* end = p + payload.size();
    if (p == end) return Rejection{Reason::missing_field, "empty payload: vehicle_id (1): missing"};
    if (*p == 0) {
        // The Confluent wire format.
        if (end - p < 6) {
            return Rejection{Reason::bad_frame,
                             fmt::format("{} bytes: a Confluent frame needs at least 6 (magic "
                                         "byte, 4-byte schema id, message indexes)",
                                         payload.size())};
        }
        const std::uint32_t id = (std::uint32_t{p[1]} << 24) | (std::uint32_t{p[2]} << 16) |
                                 (std::uint32_t{p[3]} << 8) | std::uint32_t{p[4]};
        p += 5;
        std::uint64_t raw = 0;
        if (!read_varint(p, end, raw)) {
            return Rejection{Reason::bad_frame,
                             fmt::format("schema id {}: the message index count is cut short", id)};
        }
        const std::int64_t count = zigzag(raw);
        if (count < 0 || static_cast<std::uint64_t>(count) > kMaxIndexes) {
            return Rejection{Reason::bad_frame,
                             fmt::format("schema id {}: message index count {} is not in 0..{}", id,
                                         count, kMaxIndexes)};
        }
        std::array<int, kMaxIndexes> indexes{};
        std::size_t depth = 1;  // count 0 means [0]
        if (count > 0) depth = static_cast<std::size_t>(count);
        for (std::int64_t i = 0; i < count; ++i) {
            if (!read_varint(p, end, raw)) {
                return Rejection{Reason::bad_frame,
                                 fmt::format("schema id {}: message index {} is cut short", id, i)};
            }
            const std::int64_t index = zigzag(raw);
            if (index < 0 || index > 1'000'000) {
                return Rejection{Reason::bad_frame,
                                 fmt::format("schema id {}: message index {} is {}", id, i, index)};
            }
            indexes[static_cast<std::size_t>(i)] = static_cast<int>(index);
        }
        if (state_->check_schemas) {
            const auto verdict =
                state_->schemas.verdict(id, std::span<const int>(indexes.data(), depth));
            if (!verdict) return SchemaNeeded{id};
            if (verdict->reason) return Rejection{*verdict->reason, verdict->detail};
        }
    }
    DecodedMessage out;
    WireReader reader(p, end, out);
    if (auto r = reader.read()) return std::move(*r);
    return out;
}

void ProtobufDecoder::add_schema(std::uint32_t schema_id, std::string_view registry_answer) {
    state_->schemas.add(schema_id, registry_answer);
}

void ProtobufDecoder::add_unknown_schema(std::uint32_t schema_id, std::string detail) {
    state_->schemas.add_unknown(schema_id, std::move(detail));
}

void ProtobufDecoder::forget_schema(std::uint32_t schema_id) { state_->schemas.forget(schema_id); }

bool ProtobufDecoder::has_schema(std::uint32_t schema_id) const {
    return state_->schemas.has(schema_id);
}

}  // namespace trackd::decode
