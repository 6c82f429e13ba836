// Geofence geometry from a request body: GeoJSON in, a valid MultiPolygon out, checked by GEOS.
//
// Contract: parse_fence() accepts a bare GeoJSON Polygon or MultiPolygon, or a Feature holding
// one. It throws ProblemError 400 (`body`) when the text is not JSON/GeoJSON, and 422 when the
// geometry is not polygonal, is empty, has coordinates outside WGS 84 ranges, or is invalid —
// naming GEOS's reason and the location — unless `repair` is set, in which case GEOS's make-valid
// (structure method) repairs it and only its polygonal part is kept. Thread-safe (a GEOS context
// per call).
#pragma once

#include <string>
#include <string_view>

namespace trackd::http {

struct FenceGeometry {
    std::string ewkb_hex;   // MultiPolygon, SRID 4326, 2D: PostgreSQL reads it as geometry
    bool repaired = false;  // repair was asked for and changed the geometry
};

FenceGeometry parse_fence(std::string_view geojson, bool repair);

}  // namespace trackd::http
