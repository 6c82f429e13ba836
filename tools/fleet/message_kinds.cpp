#include "message_kinds.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "timestamp.hpp"

namespace trackd::fleet {
namespace {

using core::Reason;

// trackd's default validate.max_payload_bytes; the padding alone is this long.
constexpr std::size_t kMaxPayloadBytes = 65536;

constexpr FieldEdit set(std::string_view field, std::string_view value) { return {field, value}; }
constexpr FieldEdit drop(std::string_view field) { return {field, {}}; }

constexpr KindSpec bad(Reason reason, std::string_view name, std::array<FieldEdit, 4> edits,
                       Whole whole = Whole::keep, bool needs_previous_valid = false) {
    return {name, reason, Build::bad, edits, whole, needs_previous_valid};
}

// THE table. Each bad kind holds exactly one defect so that trackd's validator gives exactly
// the reason named here. Placeholders:
//   ${latitude}            the vehicle's current latitude (decimal text)
//   ${future_timestamp}    RFC 3339, 1 day after the run ends (see fleet_run.cpp)
//   ${stale_timestamp}     RFC 3339, 60 days before the simulated timeline ends
//   ${jump_latitude}, ${jump_longitude}   500 km (or more, see docs) from the latest valid one
//   ${linestring_hex}      EWKB LINESTRING (SRID 4326) near the vehicle
//   ${padding}             kMaxPayloadBytes 'x' characters
// A bad kind's name is its reason code (checked by kinds()).
constexpr std::array kKinds = {
    KindSpec{"valid", std::nullopt, Build::valid},
    KindSpec{"out_of_order", std::nullopt, Build::out_of_order},
    KindSpec{"duplicate", Reason::duplicate, Build::duplicate},
    bad(Reason::payload_too_large, "payload_too_large", {set("padding", R"("${padding}")")}),
    bad(Reason::malformed_json, "malformed_json", {}, Whole::truncate_half),
    bad(Reason::missing_field, "missing_field", {drop("timestamp")}),
    bad(Reason::wrong_type, "wrong_type", {set("latitude", R"("${latitude}")")}),
    bad(Reason::not_finite, "not_finite", {set("latitude", "NaN")}),
    bad(Reason::bad_vehicle_id, "bad_vehicle_id", {set("vehicle_id", R"("")")}),
    bad(Reason::bad_timestamp, "bad_timestamp", {set("timestamp", R"("yesterday")")}),
    bad(Reason::future_timestamp, "future_timestamp",
        {set("timestamp", R"("${future_timestamp}")")}),
    bad(Reason::stale_timestamp, "stale_timestamp", {set("timestamp", R"("${stale_timestamp}")")}),
    bad(Reason::lat_out_of_range, "lat_out_of_range", {set("latitude", "95.5")}),
    bad(Reason::lon_out_of_range, "lon_out_of_range", {set("longitude", "200.25")}),
    bad(Reason::null_island, "null_island", {set("latitude", "0"), set("longitude", "0")}),
    bad(Reason::unknown_srid, "unknown_srid", {set("srid", "999999")}),
    bad(Reason::transform_failed, "transform_failed",
        {set("srid", "32633"), set("longitude", "1e12"), set("latitude", "1e12")}),
    bad(Reason::bad_wkb, "bad_wkb",
        {drop("latitude"), drop("longitude"), drop("altitude_m"), set("geom_hex", R"("zz12")")}),
    bad(Reason::not_a_point, "not_a_point",
        {drop("latitude"), drop("longitude"), drop("altitude_m"),
         set("geom_hex", R"("${linestring_hex}")")}),
    bad(Reason::negative_accuracy, "negative_accuracy", {set("accuracy_m", "-3")}),
    bad(Reason::bad_heading, "bad_heading", {set("heading_deg", "360.5")}),
    bad(Reason::bad_speed, "bad_speed", {set("speed_kmh", "-10")}),
    bad(Reason::speed_jump, "speed_jump",
        {set("latitude", "${jump_latitude}"), set("longitude", "${jump_longitude}")}, Whole::keep,
        /*needs_previous_valid=*/true),
};

static_assert(kKinds[kValid].build == Build::valid &&
                  kKinds[kOutOfOrder].build == Build::out_of_order &&
                  kKinds[kDuplicate].build == Build::duplicate,
              "valid, out_of_order, duplicate must come first");
static_assert(kKinds.size() < 256, "KindId is one byte");

std::string expand(std::string_view tmpl, const BadInput& in) {
    std::string out;
    std::size_t pos = 0;
    while (pos < tmpl.size()) {
        const std::size_t open = tmpl.find("${", pos);
        if (open == std::string_view::npos) {
            out.append(tmpl.substr(pos));
            break;
        }
        out.append(tmpl.substr(pos, open - pos));
        const std::size_t close = tmpl.find('}', open);
        if (close == std::string_view::npos) throw std::logic_error("unclosed placeholder");
        const std::string_view name = tmpl.substr(open + 2, close - open - 2);
        if (name == "latitude") {
            append_scaled(out, in.base.lat_e7, 7);
        } else if (name == "future_timestamp") {
            out.append(to_rfc3339_ms(in.future_ms));
        } else if (name == "stale_timestamp") {
            out.append(to_rfc3339_ms(in.stale_ms));
        } else if (name == "jump_latitude") {
            append_scaled(out, std::llround(in.jump_lat * 1e7), 7);
        } else if (name == "jump_longitude") {
            append_scaled(out, std::llround(in.jump_lon * 1e7), 7);
        } else if (name == "linestring_hex") {
            const double lon = in.base.longitude();
            const double lat = in.base.latitude();
            append_linestring_ewkb_hex(out, lon, lat, lon + 0.001, lat + 0.001);
        } else if (name == "padding") {
            out.append(kMaxPayloadBytes, 'x');
        } else {
            throw std::logic_error("unknown placeholder ${" + std::string(name) + "}");
        }
        pos = close + 1;
    }
    return out;
}

}  // namespace

std::span<const KindSpec> kinds() {
    static const bool names_are_codes =
        std::all_of(kKinds.begin(), kKinds.end(), [](const KindSpec& k) {
            return k.build != Build::bad || (k.expected && core::code(*k.expected) == k.name);
        });
    if (!names_are_codes) throw std::logic_error("a bad kind's name differs from its reason code");
    return kKinds;
}

std::string_view expected_reason_code(const KindSpec& kind) {
    return kind.expected ? core::code(*kind.expected) : std::string_view{};
}

void render_bad(const KindSpec& kind, const BadInput& in, std::string& payload,
                std::optional<std::int64_t>& recorded_at_ms) {
    std::vector<JsonField> fields = position_fields(in.vehicle_id, in.base, in.shift);
    recorded_at_ms = in.base.t_ms;
    for (const FieldEdit& edit : kind.edits) {
        if (edit.field.empty()) continue;
        auto it = std::find_if(fields.begin(), fields.end(),
                               [&](const JsonField& f) { return f.first == edit.field; });
        if (edit.field == "timestamp") {
            if (edit.value == R"("${future_timestamp}")") {
                recorded_at_ms = in.future_ms;
            } else if (edit.value == R"("${stale_timestamp}")") {
                recorded_at_ms = in.stale_ms;
            } else {
                recorded_at_ms = std::nullopt;  // removed or not a timestamp
            }
        }
        if (edit.value.empty()) {
            if (it != fields.end()) fields.erase(it);
        } else if (it != fields.end()) {
            it->second = expand(edit.value, in);
        } else {
            fields.emplace_back(std::string(edit.field), expand(edit.value, in));
        }
    }
    payload.clear();
    append_fields_json(payload, fields);
    if (kind.whole == Whole::truncate_half) {
        payload.resize(payload.size() / 2);
        recorded_at_ms = std::nullopt;
    }
}

}  // namespace trackd::fleet
