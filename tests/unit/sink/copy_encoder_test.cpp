// COPY (FORMAT binary) encoding: the exact bytes PostgreSQL's binary COPY input reads.
#include "copy_encoder.hpp"

#include <cstdint>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "support/bytes.hpp"

namespace trackd::sink::postgis {
namespace {

using test::bytes;

TEST(CopyEncoder, HeaderRowsAndTrailerAreInPostgresqlsBinaryCopyFormat) {
    CopyEncoder enc;
    enc.begin();
    enc.row(7);
    enc.text("V1");
    enc.int4(-2);
    enc.int8(9000000000LL);
    enc.float4(12.3F);
    enc.float4(std::nullopt);
    enc.timestamptz(946684800000001LL);  // 1 µs after PostgreSQL's epoch
    enc.jsonb("{}");
    enc.end();
    const std::string expected = std::string("PGCOPY\n\377\r\n", 11) +
                                 bytes({0, 0, 0, 0, 0, 0, 0, 0}) +                       // header
                                 bytes({0, 7}) +                                         // fields
                                 bytes({0, 0, 0, 2}) + "V1" +                            // text
                                 bytes({0, 0, 0, 4, 0xff, 0xff, 0xff, 0xfe}) +           // int4
                                 bytes({0, 0, 0, 8, 0, 0, 0, 2, 0x18, 0x71, 0x1a, 0}) +  // int8
                                 bytes({0, 0, 0, 4, 0x41, 0x44, 0xcc, 0xcd}) +           // float4
                                 bytes({0xff, 0xff, 0xff, 0xff}) +                       // NULL
                                 bytes({0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 1}) +  // timestamptz
                                 bytes({0, 0, 0, 3, 1}) + "{}" +                // jsonb v1
                                 bytes({0xff, 0xff});                           // trailer
    EXPECT_EQ(enc.data(), expected);
}

TEST(CopyEncoder, PointZIsLittleEndianEwkbWithSrid4326) {
    CopyEncoder enc;
    enc.begin();
    enc.point_z_4326(1.0, -2.0, 0.5);
    const std::string_view field = enc.data().substr(19);
    // 4-byte length 33, then byte order 1, type PointZ with an SRID, SRID 4326, x, y, z.
    EXPECT_EQ(field, bytes({0, 0, 0, 33, 1, 0x01, 0,    0,    0xa0, 0xe6, 0x10,
                            0, 0, 0, 0,  0, 0,    0,    0,    0xf0, 0x3f,  // 1.0
                            0, 0, 0, 0,  0, 0,    0,    0xc0,              // -2.0
                            0, 0, 0, 0,  0, 0,    0xe0, 0x3f}));           // 0.5
}

TEST(CopyEncoder, EmptyTextAndEmptyJsonb) {
    CopyEncoder enc;
    enc.begin();
    enc.text(std::string_view{});  // no data pointer at all
    enc.jsonb("");                 // "" is NULL
    EXPECT_EQ(enc.data().substr(19), bytes({0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}));
}

// Past the first megabyte the buffer grows and keeps what was written; begin() starts over.
TEST(CopyEncoder, GrowsPastItsFirstBufferAndStartsOverOnBegin) {
    CopyEncoder enc;
    enc.begin();
    const std::string id(100, 'x');
    constexpr int kRows = 30000;  // 30000 * 106 bytes: about 3 MB
    for (int i = 0; i < kRows; ++i) {
        enc.row(1);
        enc.text(id);
    }
    enc.end();
    const auto data = enc.data();
    ASSERT_EQ(data.size(), 19U + kRows * (2U + 4U + 100U) + 2U);
    EXPECT_EQ(data.substr(0, 11), std::string_view("PGCOPY\n\377\r\n", 11));
    // The last row is whole, after every copy of the buffer.
    EXPECT_EQ(data.substr(data.size() - 2 - 106, 106), bytes({0, 1, 0, 0, 0, 100}) + id);
    enc.begin();
    EXPECT_EQ(enc.data().size(), 19U);
}

}  // namespace
}  // namespace trackd::sink::postgis
