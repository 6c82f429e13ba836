#include "fleet_generator.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "protobuf_payload.hpp"

namespace trackd::fleet {
namespace {

constexpr double kEpochMsShare = 0.05;  // of valid messages, timestamp as epoch milliseconds
constexpr double kGeomHexShare = 0.02;  // of valid messages, geom_hex instead of lat/lon
constexpr double kJumpMinM = 500'000;   // speed_jump distance
constexpr double kJumpSpeedKmh = 1000;  // ...or more, so the implied speed beats 350 km/h
constexpr double kJumpMaxM = 15'000'000;

std::int32_t round_to_int(double v, double scale) {
    return static_cast<std::int32_t>(std::llround(v * scale));
}

}  // namespace

FleetGenerator::FleetGenerator(const GeneratorConfig& config)
    : config_(config), dt_s_(static_cast<double>(config.interval_ms) / 1000.0), rng_(config.seed) {
    if (config_.vehicles == 0) throw std::invalid_argument("--vehicles must be at least 1");
    if (config_.interval_ms <= 0) throw std::invalid_argument("--interval-ms must be positive");
    const double b = config_.bad_share;
    const double o = config_.out_of_order_share;
    const double d = config_.duplicate_share;
    if (b < 0 || o < 0 || d < 0 || b + o + d >= 1) {
        throw std::invalid_argument(
            "--bad-share, --out-of-order-share and --duplicate-share must be >= 0 and sum to < 1");
    }
    // Duplicates are extra messages after valid ones, so draws are scaled to hit the shares of
    // all messages: a fraction d of messages are duplicates, the rest are draws.
    p_bad_ = b / (1 - d);
    p_bad_or_ooo_ = (b + o) / (1 - d);
    const double valid_per_draw = 1 - p_bad_or_ooo_;
    p_duplicate_after_valid_ = d / ((1 - d) * valid_per_draw);
    if (valid_per_draw <= 0 || p_duplicate_after_valid_ > 1) {
        throw std::invalid_argument(
            "--duplicate-share is too large for the valid messages left by the other shares");
    }

    const auto all = kinds();
    for (std::size_t i = 0; i < all.size(); ++i) {
        if (all[i].build == Build::bad) bad_kinds_.push_back(static_cast<KindId>(i));
    }

    ids_.reserve(config_.vehicles);
    tracks_.reserve(config_.vehicles);
    static constexpr std::array<char, 3> kShifts = {'A', 'B', 'C'};
    for (std::uint32_t v = 0; v < config_.vehicles; ++v) {
        ids_.push_back(fmt::format("{}{:06}", config_.id_prefix, v + 1));
        Track t;
        t.vehicle = Vehicle::spawn(config_.city, rng_);
        t.shift = kShifts[rng_.below(kShifts.size())];
        tracks_.push_back(t);
    }
}

std::int64_t FleetGenerator::next_timestamp_ms(std::uint32_t v) const {
    // Vehicles report spread over the interval, in order, so a round's timestamps increase.
    const std::int64_t offset = static_cast<std::int64_t>(v) * config_.interval_ms /
                                static_cast<std::int64_t>(config_.vehicles);
    return config_.start_ms + static_cast<std::int64_t>(round_) * config_.interval_ms + offset;
}

Sample FleetGenerator::sample_of(const Track& track, std::int64_t t_ms) const {
    const Vehicle& veh = track.vehicle;
    const LonLat p = config_.city.to_lonlat(veh.east_m, veh.north_m);
    Sample s;
    s.t_ms = t_ms;
    s.lat_e7 = std::llround(p.lat * 1e7);
    s.lon_e7 = std::llround(p.lon * 1e7);
    if (s.lat_e7 == 0 && s.lon_e7 == 0) s.lat_e7 = 1;  // never null island by accident
    s.altitude_dm = round_to_int(veh.altitude_m, 10);
    s.speed_d = round_to_int(veh.speed_kmh, 10);
    s.heading_d = round_to_int(veh.heading_deg, 10) % 3600;  // 359.96 must not print as 360.0
    s.accuracy_d = round_to_int(veh.accuracy_m, 10);
    s.battery_d = round_to_int(veh.battery_pct, 10);
    return s;
}

void FleetGenerator::next(Message& out) {
    if (duplicate_pending_) {
        duplicate_pending_ = false;
        out.payload.assign(duplicate_.payload);
        out.vehicle = duplicate_.vehicle;
        out.kind = kDuplicate;
        out.recorded_at_ms = duplicate_.recorded_at_ms;
        return;
    }
    const std::uint32_t v = cursor_;
    const double u = rng_.uniform();
    if (u < p_bad_) {
        if (emit_bad(v, out)) return;
    } else if (u < p_bad_or_ooo_) {
        if (emit_out_of_order(v, out)) return;
    }
    emit_valid(v, out);
}

void FleetGenerator::begin(std::string& payload) const {
    payload.clear();
    if (config_.schema_id) append_confluent_header(payload, *config_.schema_id);
}

void FleetGenerator::append_position(std::string& payload, std::uint32_t v, const Sample& s,
                                     bool resent) const {
    if (config_.protobuf) {
        append_position_protobuf(payload, ids_[v], s, tracks_[v].shift, resent);
    } else {
        append_position_json(payload, ids_[v], s, tracks_[v].shift, resent);
    }
}

void FleetGenerator::emit_valid(std::uint32_t v, Message& out) {
    Track& track = tracks_[v];
    if (track.valid_count > 0) track.vehicle.advance(config_.city, dt_s_, rng_);
    Sample s = sample_of(track, next_timestamp_ms(v));
    s.epoch_ms_timestamp = rng_.uniform() < kEpochMsShare;
    s.geom_hex = rng_.uniform() < kGeomHexShare;
    track.history[track.valid_count % kHistory] = s;
    ++track.valid_count;

    begin(out.payload);
    append_position(out.payload, v, s, /*resent=*/false);
    out.vehicle = v;
    out.kind = kValid;
    out.recorded_at_ms = s.t_ms;

    if (rng_.uniform() < p_duplicate_after_valid_) {
        duplicate_pending_ = true;
        duplicate_.payload.assign(out.payload);
        duplicate_.vehicle = v;
        duplicate_.recorded_at_ms = out.recorded_at_ms;
    }
    if (++cursor_ == config_.vehicles) {
        cursor_ = 0;
        ++round_;
    }
}

bool FleetGenerator::emit_out_of_order(std::uint32_t v, Message& out) {
    const Track& track = tracks_[v];
    if (track.valid_count < 3) return false;  // needs a position 2 steps before the latest
    const auto deepest =
        static_cast<std::uint32_t>(std::min<std::uint64_t>(kHistory - 1, track.valid_count - 1));
    const std::uint32_t back = 2 + rng_.below(deepest - 1);  // 2..deepest
    const Sample& s = track.history[(track.valid_count - 1 - back) % kHistory];
    begin(out.payload);
    append_position(out.payload, v, s, /*resent=*/true);
    out.vehicle = v;
    out.kind = kOutOfOrder;
    out.recorded_at_ms = s.t_ms;
    return true;
}

bool FleetGenerator::emit_bad(std::uint32_t v, Message& out) {
    const Track& track = tracks_[v];
    const KindId id = bad_kinds_[bad_rotation_ % bad_kinds_.size()];
    const KindSpec& kind = kinds()[id];
    // Not consuming the rotation keeps every bad kind equally frequent.
    if (kind.needs_previous_valid && track.valid_count == 0) return false;
    ++bad_rotation_;

    BadInput in;
    in.vehicle_id = ids_[v];
    in.shift = track.shift;
    in.base = sample_of(track, next_timestamp_ms(v));
    in.future_ms = config_.future_timestamp_ms;
    in.stale_ms = config_.stale_timestamp_ms;
    if (track.valid_count > 0) {
        const Sample& latest = track.history[(track.valid_count - 1) % kHistory];
        const double dt_h = static_cast<double>(in.base.t_ms - latest.t_ms) / 3'600'000.0;
        const double jump_m = std::clamp(kJumpSpeedKmh * 1000 * dt_h, kJumpMinM, kJumpMaxM);
        const LonLat to =
            destination({latest.longitude(), latest.latitude()}, rng_.uniform(0, 360), jump_m);
        in.jump_lon = to.lon;
        in.jump_lat = to.lat;
    }
    if (config_.protobuf) {
        begin(out.payload);
        render_bad_protobuf(kind, in, out.payload, out.recorded_at_ms);
    } else {
        render_bad(kind, in, out.payload, out.recorded_at_ms);
    }
    out.vehicle = v;
    out.kind = id;
    return true;
}

}  // namespace trackd::fleet
