#include "vehicle.hpp"

#include <algorithm>
#include <cmath>

namespace trackd::fleet {
namespace {

constexpr double kMaxAccelKmhPerS = 1.5;   // smooth speed changes
constexpr double kMaxTurnRateDps = 6.0;    // gentle turns
constexpr double kMaxTurnPerStepDeg = 25;  // even with long intervals
constexpr double kMinAltitudeM = 20;
constexpr double kMaxAltitudeM = 120;

double to_rad(double deg) { return deg * kPi / 180.0; }

}  // namespace

Vehicle Vehicle::spawn(const City& city, Rng& rng) {
    Vehicle v;
    const double r = city.radius_m * std::sqrt(rng.uniform()) * 0.95;
    const double a = rng.uniform(0, 2 * kPi);
    v.east_m = r * std::cos(a);
    v.north_m = r * std::sin(a);
    v.altitude_m = rng.uniform(30, 60);
    v.speed_kmh = rng.uniform(kMinSpeedKmh, kMaxSpeedKmh);
    v.target_speed_kmh = rng.uniform(kMinSpeedKmh, kMaxSpeedKmh);
    v.heading_deg = rng.uniform(0, 360);
    v.accuracy_m = rng.uniform(3, 10);
    v.battery_pct = rng.uniform(40, 100);
    return v;
}

void Vehicle::advance(const City& city, double dt_s, Rng& rng) {
    // Speed: a new target now and then (about every 20 s), approached at a bounded rate.
    if (rng.uniform() < std::min(1.0, dt_s / 20.0)) {
        target_speed_kmh = rng.uniform(kMinSpeedKmh, kMaxSpeedKmh);
    }
    const double max_dv = kMaxAccelKmhPerS * dt_s;
    speed_kmh += std::clamp(target_speed_kmh - speed_kmh, -max_dv, max_dv);
    speed_kmh = std::clamp(speed_kmh, kMinSpeedKmh, kMaxSpeedKmh);

    // Heading: a turn rate that wanders and decays, so paths curve rather than zig-zag.
    turn_rate_dps = std::clamp(0.85 * turn_rate_dps + rng.uniform(-1.5, 1.5), -kMaxTurnRateDps,
                               kMaxTurnRateDps);
    heading_deg = wrap_degrees_360(
        heading_deg + std::clamp(turn_rate_dps * dt_s, -kMaxTurnPerStepDeg, kMaxTurnPerStepDeg));

    const double step_m = speed_kmh / 3.6 * dt_s;
    double east = east_m + step_m * std::sin(to_rad(heading_deg));
    double north = north_m + step_m * std::cos(to_rad(heading_deg));
    const double r2 = city.radius_m * city.radius_m;
    if (east * east + north * north > r2) {
        // Bounce: head back towards the centre, give or take 40 degrees.
        const double to_centre = std::atan2(-east_m, -north_m) * 180.0 / kPi;
        heading_deg = wrap_degrees_360(to_centre + rng.uniform(-40, 40));
        turn_rate_dps = 0;
        east = east_m + step_m * std::sin(to_rad(heading_deg));
        north = north_m + step_m * std::cos(to_rad(heading_deg));
        const double d2 = east * east + north * north;
        if (d2 > r2) {
            // A step longer than the city (very long intervals): stop at the edge, which is
            // closer than step_m, so the implied speed stays plausible.
            const double scale = city.radius_m * 0.99 / std::sqrt(d2);
            east *= scale;
            north *= scale;
        }
    }
    east_m = east;
    north_m = north;

    altitude_m = std::clamp(altitude_m + rng.uniform(-0.3, 0.3) * std::sqrt(dt_s), kMinAltitudeM,
                            kMaxAltitudeM);
    accuracy_m = std::clamp(accuracy_m + rng.uniform(-0.5, 0.5), 2.5, 15.0);
    battery_pct -= 0.002 * dt_s;
    if (battery_pct < 10) battery_pct = 100;  // recharged at the depot
}

}  // namespace trackd::fleet
