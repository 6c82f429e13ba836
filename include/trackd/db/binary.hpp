// Values of a result fetched in PostgreSQL's binary format (db::Format::binary): each reads the
// wire form of one type (network byte order; PostGIS sends geometry as EWKB).
//
// Contract: the view is the value of a non-NULL column of that type; a value of the wrong size
// or shape throws DbError naming what was expected, so a mismatch between a statement's
// columns and the code that reads them fails loudly and never reads past the value.
#pragma once

#include <cstdint>
#include <string_view>

namespace trackd::db::binary {

std::int32_t int4(std::string_view v);
std::int64_t int8(std::string_view v);
float float4(std::string_view v);
double float8(std::string_view v);
// timestamptz, as microseconds since 1970-01-01 UTC (the wire counts from 2000-01-01).
std::int64_t timestamptz_unix_us(std::string_view v);

struct Point {
    double x = 0, y = 0, z = 0;
    bool has_z = false;
};
// A geometry that is a point (2D, Z or M; SRID or not; either byte order).
Point point(std::string_view ewkb);

}  // namespace trackd::db::binary
