// Just enough geodesy for a simulated fleet: a city as a local flat plane, and great-circle
// destinations for the far jumps the speed_jump kind needs.
#pragma once

namespace trackd::fleet {

inline constexpr double kEarthRadiusM = 6371008.8;  // mean radius, as PostGIS' spheroid-free math
inline constexpr double kPi = 3.14159265358979323846;

struct LonLat {
    double lon = 0;  // degrees, [-180, 180)
    double lat = 0;  // degrees, [-90, 90]
};

double wrap_longitude(double lon);
double wrap_degrees_360(double deg);

// The point distance_m away from `from` along the great circle with initial bearing
// bearing_deg (0 = north, clockwise).
LonLat destination(LonLat from, double bearing_deg, double distance_m);

// Great-circle (haversine) distance.
double distance_m(LonLat a, LonLat b);

// A circular area vehicles stay in. Positions inside are metres east/north of the centre on a
// local tangent plane: the distortion over a city's radius is far below what matters here.
struct City {
    LonLat centre;
    double radius_m = 15000;

    [[nodiscard]] LonLat to_lonlat(double east_m, double north_m) const;
};

}  // namespace trackd::fleet
