// The Morton key of postgis.defer_indexes' history row order: positions ordered as ST_GeoHash
// orders them (bench/copy_limit.cpp, `export --order space`, sorts exported rows with it).
#include "spatial_order.hpp"

#include <gtest/gtest.h>

namespace trackd::sink::postgis {
namespace {

TEST(HistoryOrder, MortonKeyInterleavesLongitudeFirst) {
    // The four quadrants around (0, 0): west/south first, longitude as the higher bit.
    const auto sw = morton_key(-1, -1);
    const auto nw = morton_key(-1, 1);
    const auto se = morton_key(1, -1);
    const auto ne = morton_key(1, 1);
    EXPECT_LT(sw, nw);
    EXPECT_LT(nw, se);
    EXPECT_LT(se, ne);
    EXPECT_EQ(morton_key(-180, -90), 0U);
    EXPECT_EQ(morton_key(180, 90), ~0ULL);
}

}  // namespace
}  // namespace trackd::sink::postgis
