// Binary result values: the wire form of each type trackd reads that way.
#include "trackd/db/binary.hpp"

#include <string>

#include <gtest/gtest.h>

#include "trackd/db/connection.hpp"

#include "support/bytes.hpp"

namespace trackd::db {
namespace {

using test::bytes;

TEST(BinaryValues, IntegersFloatsAndTimestampsInNetworkOrder) {
    EXPECT_EQ(binary::int4(bytes({0xff, 0xff, 0xff, 0xfe})), -2);
    EXPECT_EQ(binary::int8(bytes({0, 0, 0, 2, 0x18, 0x71, 0x1a, 0})), 9000000000LL);
    EXPECT_EQ(binary::float4(bytes({0x41, 0x44, 0xcc, 0xcd})), 12.3F);
    EXPECT_EQ(binary::float8(bytes({0x3f, 0xb9, 0x99, 0x99, 0x99, 0x99, 0x99, 0x9a})), 0.1);
    // PostgreSQL counts from 2000-01-01; 1 µs before it is 946684799999999 µs after 1970.
    EXPECT_EQ(binary::timestamptz_unix_us(bytes({0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})),
              946684799999999LL);
    EXPECT_THROW((void)binary::int8(bytes({0, 0, 0, 1})), DbError);
    EXPECT_THROW((void)binary::float4(""), DbError);
}

TEST(BinaryValues, PointsInEveryEwkbAndIsoForm) {
    // PostGIS's own form: little-endian, Z and SRID flags, SRID 4326, (1.5, -2, 0.25).
    const std::string ewkb_z = bytes({1, 0x01, 0, 0, 0xa0, 0xe6, 0x10, 0,    0,  //
                                      0, 0,    0, 0, 0,    0,    0xf8, 0x3f,     // 1.5
                                      0, 0,    0, 0, 0,    0,    0,    0xc0,     // -2
                                      0, 0,    0, 0, 0,    0,    0xd0, 0x3f});   // 0.25
    auto p = binary::point(ewkb_z);
    EXPECT_EQ(p.x, 1.5);
    EXPECT_EQ(p.y, -2.0);
    EXPECT_TRUE(p.has_z);
    EXPECT_EQ(p.z, 0.25);
    // Big-endian 2D, no SRID.
    p = binary::point(
        bytes({0, 0, 0, 0, 1, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0, 0xc0, 0, 0, 0, 0, 0, 0, 0}));
    EXPECT_EQ(p.x, 1.5);
    EXPECT_EQ(p.y, -2.0);
    EXPECT_FALSE(p.has_z);
    // ISO PointZM (3001), little-endian: x, y, z, m.
    std::string zm = bytes({1, 0xb9, 0x0b, 0, 0});
    for (const double v : {1.0, 2.0, 3.0, 4.0}) zm.append(reinterpret_cast<const char*>(&v), 8);
    p = binary::point(zm);
    EXPECT_EQ(p.z, 3.0);
    EXPECT_TRUE(p.has_z);

    EXPECT_THROW((void)binary::point(ewkb_z.substr(0, ewkb_z.size() - 1)), DbError);
    std::string line = ewkb_z;
    line[1] = 0x02;  // a LineString
    EXPECT_THROW((void)binary::point(line), DbError);
    EXPECT_THROW((void)binary::point(bytes({7, 1, 0, 0, 0})), DbError);
}

}  // namespace
}  // namespace trackd::db
