#include "geo.hpp"

#include <algorithm>
#include <cmath>

namespace trackd::fleet {
namespace {

constexpr double kDegToRad = kPi / 180.0;
constexpr double kRadToDeg = 180.0 / kPi;

}  // namespace

double wrap_longitude(double lon) {
    lon = std::fmod(lon + 180.0, 360.0);
    if (lon < 0) lon += 360.0;
    return lon - 180.0;
}

double wrap_degrees_360(double deg) {
    deg = std::fmod(deg, 360.0);
    return deg < 0 ? deg + 360.0 : deg;
}

LonLat destination(LonLat from, double bearing_deg, double distance_m) {
    const double delta = distance_m / kEarthRadiusM;
    const double theta = bearing_deg * kDegToRad;
    const double phi1 = from.lat * kDegToRad;
    const double lambda1 = from.lon * kDegToRad;
    const double sin_phi2 =
        std::sin(phi1) * std::cos(delta) + std::cos(phi1) * std::sin(delta) * std::cos(theta);
    const double phi2 = std::asin(std::clamp(sin_phi2, -1.0, 1.0));
    const double lambda2 = lambda1 + std::atan2(std::sin(theta) * std::sin(delta) * std::cos(phi1),
                                                std::cos(delta) - std::sin(phi1) * std::sin(phi2));
    return {wrap_longitude(lambda2 * kRadToDeg), phi2 * kRadToDeg};
}

double distance_m(LonLat a, LonLat b) {
    const double phi1 = a.lat * kDegToRad;
    const double phi2 = b.lat * kDegToRad;
    const double dphi = phi2 - phi1;
    const double dlambda = (b.lon - a.lon) * kDegToRad;
    const double h = std::sin(dphi / 2) * std::sin(dphi / 2) + std::cos(phi1) * std::cos(phi2) *
                                                                   std::sin(dlambda / 2) *
                                                                   std::sin(dlambda / 2);
    return 2 * kEarthRadiusM * std::asin(std::min(1.0, std::sqrt(h)));
}

LonLat City::to_lonlat(double east_m, double north_m) const {
    const double lat = centre.lat + north_m / kEarthRadiusM * kRadToDeg;
    const double lon =
        centre.lon + east_m / (kEarthRadiusM * std::cos(centre.lat * kDegToRad)) * kRadToDeg;
    return {wrap_longitude(lon), lat};
}

}  // namespace trackd::fleet
