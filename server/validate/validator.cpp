#include "trackd/validate/validator.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <geodesic.h>

#include "trackd/core/time.hpp"

#include "crs_transformer.hpp"
#include "wkb_reader.hpp"

namespace trackd::validate {
namespace {

using core::Position;
using core::Reason;
using core::Rejection;

constexpr int kWgs84 = 4326;
constexpr double kFloatMax = std::numeric_limits<float>::max();
constexpr double kDegToRad = 3.14159265358979323846 / 180.0;

// a / sqrt(1 - e^2) on WGS 84: the largest radius of curvature, meridional or transverse
// (reached at the poles), rounded up.
constexpr double kMaxRadiusOfCurvatureM = 6399593.6258;

std::int64_t seconds_to_us(std::int64_t s) {
    constexpr std::int64_t kLimit = std::numeric_limits<std::int64_t>::max() / 1'000'000;
    return std::clamp(s, -kLimit, kLimit) * 1'000'000;
}

// "2024-05-01T12:00:00Z" (whole seconds, rounded down), for details.
std::string format_time(std::int64_t us) {
    const core::CivilTime t = core::civil_time_from_us(us);
    return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z", t.date.year, t.date.month,
                       t.date.day, t.hour, t.minute, t.second);
}

std::string shorten(std::string_view s) {
    constexpr std::size_t kMax = 60;
    if (s.size() <= kMax) return std::string(s);
    return std::string(s.substr(0, kMax)) + "...";
}

// The first bytes of raw WKB as uppercase hex, for details.
std::string shorten_hex(std::string_view bytes) {
    constexpr std::size_t kMaxBytes = 30;
    std::string out;
    for (std::size_t i = 0; i < bytes.size() && i < kMaxBytes; ++i) {
        out += fmt::format("{:02X}", static_cast<unsigned char>(bytes[i]));
    }
    if (bytes.size() > kMaxBytes) out += "...";
    return out;
}

const geod_geodesic& wgs84() {
    static const geod_geodesic g = [] {
        geod_geodesic init{};
        geod_init(&init, 6378137.0, 1 / 298.257223563);
        return init;
    }();
    return g;
}

// An upper bound on the geodesic distance, cheap to compute: the length of the path along the
// parallel of the endpoint nearer a pole, then along a meridian, each measured with the largest
// radius of curvature. When this is within the speed limit, the exact distance is too.
double distance_upper_bound_m(double lon1, double lat1, double lon2, double lat2) {
    double dlon = std::fabs(lon2 - lon1);
    if (dlon > 180) dlon = 360 - dlon;
    const double dlat = std::fabs(lat2 - lat1);
    const double polar_lat = std::max(std::fabs(lat1), std::fabs(lat2));
    const double along = std::cos(polar_lat * kDegToRad) * dlon;
    return kMaxRadiusOfCurvatureM * (dlat + along) * kDegToRad * (1 + 1e-9);
}

Rejection reject(Reason reason, std::string detail) { return Rejection{reason, std::move(detail)}; }

}  // namespace

double geodesic_distance_m(double lon1, double lat1, double lon2, double lat2) {
    double s12 = 0;
    geod_inverse(&wgs84(), lat1, lon1, lat2, lon2, &s12, nullptr, nullptr);
    return s12;
}

Validator::Validator(const config::ValidateConfig& cfg)
    : cfg_(cfg),
      max_future_skew_us_(seconds_to_us(cfg.max_future_skew_s)),
      max_age_us_(seconds_to_us(cfg.max_age_s)) {}

Validator::~Validator() = default;
Validator::Validator(Validator&&) noexcept = default;
Validator& Validator::operator=(Validator&&) noexcept = default;

std::variant<Position, Rejection> Validator::validate(const decode::DecodedMessage& m,
                                                      const LastPosition* last,
                                                      std::int64_t now_us) {
    auto result = check(m, last, now_us);
    if (auto* p = std::get_if<Position>(&result)) {
        p->vehicle_id = m.vehicle_id;
        p->attributes_json = m.attributes_json;
    }
    return result;
}

std::variant<Position, Rejection> Validator::validate(decode::DecodedMessage&& m,
                                                      const LastPosition* last,
                                                      std::int64_t now_us) {
    auto result = check(m, last, now_us);
    if (auto* p = std::get_if<Position>(&result)) {
        p->vehicle_id = std::move(m.vehicle_id);
        p->attributes_json = std::move(m.attributes_json);
    }
    return result;
}

std::variant<Position, Rejection> Validator::check(const decode::DecodedMessage& m,
                                                   const LastPosition* last, std::int64_t now_us) {
    // Vehicle id: the decoder has ruled out control characters.
    if (m.vehicle_id.empty()) return reject(Reason::bad_vehicle_id, "vehicle_id: empty");
    if (m.vehicle_id.size() > static_cast<std::size_t>(std::max(cfg_.max_vehicle_id_len, 0))) {
        return reject(Reason::bad_vehicle_id,
                      fmt::format("vehicle_id: {} bytes, longer than "
                                  "validate.max_vehicle_id_len ({})",
                                  m.vehicle_id.size(), cfg_.max_vehicle_id_len));
    }

    // Time, against the caller's clock.
    std::int64_t bound = 0;
    if (!__builtin_add_overflow(now_us, max_future_skew_us_, &bound) && m.recorded_at_us > bound) {
        return reject(Reason::future_timestamp,
                      fmt::format("timestamp: {} is {} s ahead of the clock "
                                  "(validate.max_future_skew_s = {})",
                                  format_time(m.recorded_at_us),
                                  (m.recorded_at_us - now_us) / 1'000'000, cfg_.max_future_skew_s));
    }
    if (!__builtin_sub_overflow(now_us, max_age_us_, &bound) && m.recorded_at_us < bound) {
        return reject(Reason::stale_timestamp,
                      fmt::format("timestamp: {} is older than validate.max_age_s ({} s)",
                                  format_time(m.recorded_at_us), cfg_.max_age_s));
    }

    // Position: where it comes from and in which CRS.
    double x = 0;
    double y = 0;
    int srid = m.srid;
    std::optional<double> altitude = m.altitude_m;
    if (!m.geom_hex.empty() || !m.geom_wkb.empty()) {
        if (!wkb_) wkb_ = std::make_unique<WkbReader>();
        WkbReader::Point point;
        std::string why;
        const bool hex = !m.geom_hex.empty();
        const auto status = hex ? wkb_->read_point(m.geom_hex, point, why)
                                : wkb_->read_point_bytes(m.geom_wkb, point, why);
        if (status != WkbReader::Status::ok) {
            const auto reason =
                status == WkbReader::Status::bad_wkb ? Reason::bad_wkb : Reason::not_a_point;
            if (hex) {
                return reject(reason,
                              fmt::format("geom_hex: {}: \"{}\"", why, shorten(m.geom_hex)));
            }
            return reject(reason, fmt::format("geom_wkb: {}: {} bytes, hex {}", why,
                                              m.geom_wkb.size(), shorten_hex(m.geom_wkb)));
        }
        x = point.x;
        y = point.y;
        if (point.srid != 0) srid = point.srid;
        if (point.z) altitude = point.z;
    } else {
        if (!m.latitude || !m.longitude) {
            return reject(Reason::missing_field,
                          "position: neither latitude+longitude nor geom_hex/geom_wkb");
        }
        x = *m.longitude;
        y = *m.latitude;
    }
    double lon = x;
    double lat = y;
    if (srid != kWgs84) {
        if (!crs_) crs_ = std::make_unique<CrsTransformer>();
        std::string why;
        switch (crs_->to_wgs84(srid, x, y, lon, lat, why)) {
            case CrsTransformer::Status::ok:
                break;
            case CrsTransformer::Status::unknown_srid:
                return reject(Reason::unknown_srid, fmt::format("srid: {}", why));
            case CrsTransformer::Status::failed:
                return reject(
                    Reason::transform_failed,
                    fmt::format("srid {}: ({}, {}) has no WGS 84 position: {}", srid, x, y, why));
        }
    }

    // Numbers.
    if (!std::isfinite(lon) || !std::isfinite(lat)) {
        return reject(Reason::not_finite,
                      fmt::format("position: ({}, {}) is not finite", lon, lat));
    }
    if (altitude && !std::isfinite(*altitude)) {
        return reject(Reason::not_finite, fmt::format("altitude_m: {} is not finite", *altitude));
    }
    const std::pair<const char*, const std::optional<double>*> real_fields[] = {
        {"speed_kmh", &m.speed_kmh},
        {"heading_deg", &m.heading_deg},
        {"accuracy_m", &m.accuracy_m}};
    for (const auto& [name, value] : real_fields) {
        if (*value && !(std::fabs(**value) <= kFloatMax)) {
            return reject(Reason::not_finite,
                          fmt::format("{}: {} is not finite as a 32-bit float", name, **value));
        }
    }
    if (std::fabs(lat) > 90) {
        return reject(Reason::lat_out_of_range, fmt::format("latitude: {} outside [-90, 90]", lat));
    }
    if (std::fabs(lon) > 180) {
        return reject(Reason::lon_out_of_range,
                      fmt::format("longitude: {} outside [-180, 180]", lon));
    }
    if (cfg_.reject_null_island && lon == 0 && lat == 0) {
        return reject(Reason::null_island,
                      "position: exactly (0, 0), rejected by validate.reject_null_island");
    }
    if (m.accuracy_m && *m.accuracy_m < 0) {
        return reject(Reason::negative_accuracy,
                      fmt::format("accuracy_m: {} is negative", *m.accuracy_m));
    }
    if (m.heading_deg && !(*m.heading_deg >= 0 && *m.heading_deg < 360)) {
        return reject(Reason::bad_heading,
                      fmt::format("heading_deg: {} outside [0, 360)", *m.heading_deg));
    }
    if (m.speed_kmh && *m.speed_kmh < 0) {
        return reject(Reason::bad_speed, fmt::format("speed_kmh: {} is negative", *m.speed_kmh));
    }

    // Against the vehicle's latest accepted position.
    if (last != nullptr) {
        if (m.recorded_at_us == last->recorded_at_us && lon == last->longitude &&
            lat == last->latitude) {
            return reject(Reason::duplicate,
                          fmt::format("same timestamp ({}) and position as the vehicle's latest "
                                      "accepted position",
                                      format_time(m.recorded_at_us)));
        }
        const double dt_s = std::max(std::fabs(static_cast<double>(m.recorded_at_us) -
                                               static_cast<double>(last->recorded_at_us)) /
                                         1e6,
                                     1.0);
        const double limit_m = cfg_.max_speed_kmh / 3.6 * dt_s;
        // geod_inverse costs about a microsecond; most messages are decided by the bound.
        if (!(distance_upper_bound_m(last->longitude, last->latitude, lon, lat) <= limit_m)) {
            const double d = geodesic_distance_m(last->longitude, last->latitude, lon, lat);
            const double kmh = d / dt_s * 3.6;
            if (kmh > cfg_.max_speed_kmh) {
                return reject(Reason::speed_jump,
                              fmt::format("implied speed {:.0f} km/h ({:.0f} m in {:.3f} s from "
                                          "the latest position) exceeds validate.max_speed_kmh "
                                          "({})",
                                          kmh, d, dt_s, cfg_.max_speed_kmh));
            }
        }
    }

    Position p;
    p.recorded_at_us = m.recorded_at_us;
    p.longitude = lon;
    p.latitude = lat;
    p.altitude_m = altitude;
    if (m.speed_kmh) p.speed_kmh = static_cast<float>(*m.speed_kmh);
    if (m.heading_deg) {
        // Just below 360 can round up to 360.0f, which would leave [0, 360) in the database.
        p.heading_deg = std::min(static_cast<float>(*m.heading_deg), std::nextafter(360.0F, 0.0F));
    }
    if (m.accuracy_m) p.accuracy_m = static_cast<float>(*m.accuracy_m);
    return p;
}

}  // namespace trackd::validate
