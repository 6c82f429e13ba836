// Turns a DecodedMessage into a core::Position (WGS 84, checked), or says why it cannot.
//
// Contract: checks run in this order and the first failure is the result: bad_vehicle_id (empty
// or longer than max_vehicle_id_len bytes), future_timestamp (> now + max_future_skew_s),
// stale_timestamp (< now - max_age_s), bad_wkb, not_a_point, unknown_srid, transform_failed,
// not_finite, lat_out_of_range, lon_out_of_range, null_island, negative_accuracy, bad_heading
// ([0, 360)), bad_speed (< 0), then, when the vehicle's latest accepted position is given,
// duplicate (same timestamp and same lon/lat) and speed_jump (geodesic distance over
// max(|dt|, 1 s) above max_speed_kmh, whether the message is newer or older than `last`).
//
// Position source: geom_hex when non-empty (an EWKB SRID overrides the srid field, a Z goes to
// altitude_m), else longitude/latitude (x/y in a projected srid). srid 4326 is taken as is;
// any other srid goes through PROJ ("EPSG:<srid>" to EPSG:4326, lon/lat axis order).
// speed_kmh, heading_deg and accuracy_m beyond float range are not_finite.
// The clock is a parameter: validate() never reads the time itself.
//
// Threading: a Validator owns a PROJ context with one cached transform per srid and a GEOS
// handle, both created on first use. It is not thread-safe; use one per thread.
#pragma once

#include <cstdint>
#include <memory>
#include <variant>

#include "trackd/config/config.hpp"
#include "trackd/core/position.hpp"
#include "trackd/core/rejection.hpp"
#include "trackd/decode/decoder.hpp"

namespace trackd::validate {

// The vehicle's latest accepted position, by timestamp (WGS 84 degrees).
struct LastPosition {
    std::int64_t recorded_at_us;
    double longitude, latitude;
};

class CrsTransformer;
class WkbReader;

class Validator {
  public:
    explicit Validator(const config::ValidateConfig& cfg);
    ~Validator();
    Validator(Validator&& other) noexcept;
    Validator& operator=(Validator&& other) noexcept;
    Validator(const Validator&) = delete;
    Validator& operator=(const Validator&) = delete;

    // `last` is the vehicle's latest accepted position (by timestamp) or nullptr.
    std::variant<core::Position, core::Rejection> validate(const decode::DecodedMessage& m,
                                                           const LastPosition* last,
                                                           std::int64_t now_us);
    // Same, moving the strings out of `m` instead of copying them.
    std::variant<core::Position, core::Rejection> validate(decode::DecodedMessage&& m,
                                                           const LastPosition* last,
                                                           std::int64_t now_us);

  private:
    std::variant<core::Position, core::Rejection> check(const decode::DecodedMessage& m,
                                                        const LastPosition* last,
                                                        std::int64_t now_us);

    config::ValidateConfig cfg_;
    std::int64_t max_future_skew_us_;
    std::int64_t max_age_us_;
    std::unique_ptr<CrsTransformer> crs_;  // created on the first srid other than 4326
    std::unique_ptr<WkbReader> wkb_;       // created on the first geom_hex
};

// Geodesic distance in metres on the WGS 84 ellipsoid (GeographicLib via PROJ's geod_inverse).
double geodesic_distance_m(double lon1, double lat1, double lon2, double lat2);

}  // namespace trackd::validate
