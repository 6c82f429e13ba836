#include "wkb_reader.hpp"

#include <cmath>

#include <geos_c.h>

#include "trackd/core/error.hpp"
#include "trackd/core/hex.hpp"

namespace trackd::validate {
namespace {

const char* type_name(int type) {
    switch (type) {
        case GEOS_LINESTRING:
            return "a LineString, not a Point";
        case GEOS_LINEARRING:
            return "a LinearRing, not a Point";
        case GEOS_POLYGON:
            return "a Polygon, not a Point";
        case GEOS_MULTIPOINT:
            return "a MultiPoint, not a Point";
        case GEOS_MULTILINESTRING:
            return "a MultiLineString, not a Point";
        case GEOS_MULTIPOLYGON:
            return "a MultiPolygon, not a Point";
        case GEOS_GEOMETRYCOLLECTION:
            return "a GeometryCollection, not a Point";
        default:
            return "not a Point";
    }
}

}  // namespace

WkbReader::WkbReader() : ctx_(GEOS_init_r()), reader_(nullptr) {
    if (ctx_ == nullptr) throw core::StartupError("validate: cannot create a GEOS context");
    GEOSContext_setErrorMessageHandler_r(ctx_, &WkbReader::on_error, this);
    GEOSContext_setNoticeMessageHandler_r(ctx_, nullptr, nullptr);
    reader_ = GEOSWKBReader_create_r(ctx_);
    if (reader_ == nullptr) {
        GEOS_finish_r(ctx_);
        throw core::StartupError("validate: cannot create a GEOS WKB reader");
    }
}

WkbReader::~WkbReader() {
    GEOSWKBReader_destroy_r(ctx_, reader_);
    GEOS_finish_r(ctx_);
}

void WkbReader::on_error(const char* message, void* self) {
    static_cast<WkbReader*>(self)->error_ = message != nullptr ? message : "";
}

WkbReader::Status WkbReader::read_point(std::string_view hex, Point& out, std::string& why) {
    if (hex.size() % 2 != 0) {
        why = "odd number of hex digits";
        return Status::bad_wkb;
    }
    bytes_.resize(hex.size() / 2);
    if (!core::decode_hex(hex, bytes_)) {
        why = "not hexadecimal";
        return Status::bad_wkb;
    }
    return read_point_bytes(
        std::string_view(reinterpret_cast<const char*>(bytes_.data()), bytes_.size()), out, why);
}

WkbReader::Status WkbReader::read_point_bytes(std::string_view wkb, Point& out, std::string& why) {
    error_.clear();
    GEOSGeometry* geom = GEOSWKBReader_read_r(
        ctx_, reader_, reinterpret_cast<const unsigned char*>(wkb.data()), wkb.size());
    if (geom == nullptr) {
        why = error_.empty() ? "GEOS cannot read it" : error_;
        return Status::bad_wkb;
    }
    Status status = Status::ok;
    const int type = GEOSGeomTypeId_r(ctx_, geom);
    double x = 0;
    double y = 0;
    if (type != GEOS_POINT) {
        why = type_name(type);
        status = Status::not_a_point;
    } else if (GEOSisEmpty_r(ctx_, geom) != 0) {
        why = "an empty Point";
        status = Status::not_a_point;
    } else if (GEOSGeomGetX_r(ctx_, geom, &x) != 1 || GEOSGeomGetY_r(ctx_, geom, &y) != 1) {
        why = error_.empty() ? "GEOS cannot read its coordinates" : error_;
        status = Status::bad_wkb;
    } else {
        out.x = x;
        out.y = y;
        out.z.reset();
        double z = 0;
        if (GEOSHasZ_r(ctx_, geom) == 1 && GEOSGeomGetZ_r(ctx_, geom, &z) == 1 && !std::isnan(z)) {
            out.z = z;
        }
        out.srid = GEOSGetSRID_r(ctx_, geom);
    }
    GEOSGeom_destroy_r(ctx_, geom);
    return status;
}

}  // namespace trackd::validate
