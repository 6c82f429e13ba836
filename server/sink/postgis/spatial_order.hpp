#pragma once
// The order in which a batch's history rows are written into open partitions that carry the
// hot index set (postgis.defer_indexes): a Morton (Z-order) key of the position, so that rows
// near each other on the map are near each other in the heap and in the order of the SP-GiST's
// inserts (and a BRIN block range of one batch covers a small area).
#include <algorithm>
#include <cstdint>

namespace trackd::sink::postgis {

// Longitude and latitude quantised to 32 bits each over the whole globe (about 1 cm at the
// equator), bits interleaved, longitude first: the order of PostGIS's ST_GeoHash (which
// interleaves the same way, longitude first), so SQL can sort rows the same way
// (bench/copy_limit.cpp, `export --order space`).
inline std::uint64_t morton_key(double longitude, double latitude) {
    const auto quantise = [](double v, double lo, double span) {
        const double unit = std::clamp((v - lo) / span, 0.0, 1.0);
        return static_cast<std::uint32_t>(std::min(unit * 4294967296.0, 4294967295.0));
    };
    const auto spread = [](std::uint64_t x) {
        x &= 0xFFFFFFFFULL;
        x = (x | (x << 16U)) & 0x0000FFFF0000FFFFULL;
        x = (x | (x << 8U)) & 0x00FF00FF00FF00FFULL;
        x = (x | (x << 4U)) & 0x0F0F0F0F0F0F0F0FULL;
        x = (x | (x << 2U)) & 0x3333333333333333ULL;
        x = (x | (x << 1U)) & 0x5555555555555555ULL;
        return x;
    };
    return (spread(quantise(longitude, -180.0, 360.0)) << 1U) |
           spread(quantise(latitude, -90.0, 180.0));
}

}  // namespace trackd::sink::postgis
