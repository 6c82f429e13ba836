// One simulated vehicle: where it is and how it drives.
//
// Contract: advance() moves the vehicle along a plausible path — speed between 20 and 90 km/h
// changing smoothly, gentle turns, never further than speed × dt in a straight line, and never
// out of the city's circle (it turns back towards the centre at the edge). Deterministic for a
// given Rng sequence.
#pragma once

#include "geo.hpp"
#include "rng.hpp"

namespace trackd::fleet {

struct Vehicle {
    static constexpr double kMinSpeedKmh = 20;
    static constexpr double kMaxSpeedKmh = 90;

    double east_m = 0;  // position on the city's plane
    double north_m = 0;
    double altitude_m = 35;
    double speed_kmh = 40;
    double target_speed_kmh = 40;
    double heading_deg = 0;  // 0 = north, clockwise, [0, 360)
    double turn_rate_dps = 0;
    double accuracy_m = 5;
    double battery_pct = 80;

    // A vehicle somewhere in the city (uniform over its area), driving in a random direction.
    static Vehicle spawn(const City& city, Rng& rng);

    // Drives for dt_s seconds.
    void advance(const City& city, double dt_s, Rng& rng);
};

}  // namespace trackd::fleet
