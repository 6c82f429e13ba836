#include "fence_geometry.hpp"

#include <cmath>
#include <vector>

#include <fmt/format.h>
#include <geos_c.h>
#include <simdjson.h>

#include "problem.hpp"

namespace trackd::http {
namespace {

extern "C" void on_geos_error(const char* message, void* userdata) {
    *static_cast<std::string*>(userdata) = message != nullptr ? message : "";
}

// One GEOS context and everything allocated from it, freed in the right order.
class Geos {
  public:
    Geos() : handle_(GEOS_init_r()) {
        GEOSContext_setErrorMessageHandler_r(handle_, on_geos_error, &error_);
    }
    ~Geos() {
        for (auto* g : owned_) GEOSGeom_destroy_r(handle_, g);
        GEOS_finish_r(handle_);
    }
    Geos(const Geos&) = delete;
    Geos& operator=(const Geos&) = delete;

    [[nodiscard]] GEOSContextHandle_t h() const { return handle_; }
    // Takes ownership of a geometry GEOS returned (nullptr passes through).
    GEOSGeometry* own(GEOSGeometry* g) {
        if (g != nullptr) owned_.push_back(g);
        return g;
    }
    // Releases ownership (the geometry was handed to a collection that now owns it).
    void disown(GEOSGeometry* g) { std::erase(owned_, g); }
    [[nodiscard]] const std::string& error() const { return error_; }

  private:
    GEOSContextHandle_t handle_;
    std::string error_;
    std::vector<GEOSGeometry*> owned_;
};

[[noreturn]] void invalid(const std::string& detail) {
    throw ProblemError(ProblemKind::invalid_geometry, "body: " + detail, "body");
}

std::string type_name(int id) {
    switch (id) {
        case GEOS_POINT:
            return "Point";
        case GEOS_LINESTRING:
        case GEOS_LINEARRING:
            return "LineString";
        case GEOS_POLYGON:
            return "Polygon";
        case GEOS_MULTIPOINT:
            return "MultiPoint";
        case GEOS_MULTILINESTRING:
            return "MultiLineString";
        case GEOS_MULTIPOLYGON:
            return "MultiPolygon";
        default:
            return "GeometryCollection";
    }
}

// The polygons of `g` (a Polygon, MultiPolygon or a collection from make-valid), cloned.
void collect_polygons(Geos& geos, const GEOSGeometry* g, std::vector<GEOSGeometry*>& out) {
    const int type = GEOSGeomTypeId_r(geos.h(), g);
    if (type == GEOS_POLYGON) {
        if (GEOSisEmpty_r(geos.h(), g) == 0) out.push_back(GEOSGeom_clone_r(geos.h(), g));
        return;
    }
    if (type == GEOS_MULTIPOLYGON || type == GEOS_GEOMETRYCOLLECTION) {
        const int n = GEOSGetNumGeometries_r(geos.h(), g);
        for (int i = 0; i < n; ++i) collect_polygons(geos, GEOSGetGeometryN_r(geos.h(), g, i), out);
    }
}

GEOSGeometry* to_multipolygon(Geos& geos, const GEOSGeometry* g) {
    std::vector<GEOSGeometry*> parts;
    collect_polygons(geos, g, parts);
    if (parts.empty()) return nullptr;
    // The collection takes ownership of the parts.
    return geos.own(GEOSGeom_createCollection_r(geos.h(), GEOS_MULTIPOLYGON, parts.data(),
                                                static_cast<unsigned>(parts.size())));
}

// A point of WGS 84 on the unit sphere, as PostGIS's geography computes it.
struct UnitVector {
    double x, y, z;
};

UnitVector on_sphere(double lon, double lat) {
    constexpr double kRad = 3.14159265358979323846 / 180.0;
    return {std::cos(lat * kRad) * std::cos(lon * kRad),
            std::cos(lat * kRad) * std::sin(lon * kRad), std::sin(lat * kRad)};
}

// PostGIS refuses a geography with an edge between two antipodal points ("Antipodal (180
// degrees long) edge detected!"): such an edge has no one shortest path. trackd stores a zone's
// area in square metres through the geography, so the zone is refused here with the edge named,
// instead of as a database error. PostGIS's tolerance is 1e-12 per coordinate; this one is a
// little wider, so that rounding cannot let one through.
void check_no_antipodal_edge(Geos& geos, const GEOSGeometry* ring) {
    const GEOSCoordSequence* seq = GEOSGeom_getCoordSeq_r(geos.h(), ring);
    unsigned int n = 0;
    if (seq == nullptr || GEOSCoordSeq_getSize_r(geos.h(), seq, &n) == 0) return;
    double x0 = 0;
    double y0 = 0;
    for (unsigned int i = 0; i < n; ++i) {
        double x1 = 0;
        double y1 = 0;
        GEOSCoordSeq_getXY_r(geos.h(), seq, i, &x1, &y1);
        if (i > 0) {
            const UnitVector a = on_sphere(x0, y0);
            const UnitVector b = on_sphere(x1, y1);
            constexpr double kTolerance = 1e-10;
            if (std::fabs(a.x + b.x) <= kTolerance && std::fabs(a.y + b.y) <= kTolerance &&
                std::fabs(a.z + b.z) <= kTolerance) {
                invalid(fmt::format(
                    "the edge from [{}, {}] to [{}, {}] joins two antipodal points (180 degrees "
                    "apart on the globe), so it has no one path; add a point between them",
                    x0, y0, x1, y1));
            }
        }
        x0 = x1;
        y0 = y1;
    }
}

void check_no_antipodal_edges(Geos& geos, const GEOSGeometry* multi) {
    const int polygons = GEOSGetNumGeometries_r(geos.h(), multi);
    for (int p = 0; p < polygons; ++p) {
        const GEOSGeometry* polygon = GEOSGetGeometryN_r(geos.h(), multi, p);
        check_no_antipodal_edge(geos, GEOSGetExteriorRing_r(geos.h(), polygon));
        const int holes = GEOSGetNumInteriorRings_r(geos.h(), polygon);
        for (int h = 0; h < holes; ++h) {
            check_no_antipodal_edge(geos, GEOSGetInteriorRingN_r(geos.h(), polygon, h));
        }
    }
}

// True if an array inside `coordinates` (a position, a ring, a polygon) is empty.
bool has_empty_array(simdjson::dom::element coordinates) {
    simdjson::dom::array a;
    if (coordinates.get(a) != simdjson::SUCCESS) return false;
    for (const auto child : a) {
        simdjson::dom::array c;
        if (child.get(c) == simdjson::SUCCESS && (c.size() == 0 || has_empty_array(child))) {
            return true;
        }
    }
    return false;
}

// GEOS 3.11's GeoJSON reader dereferences an empty position (`[]` among the coordinates) and
// crashes the process (found by tests/fuzz/fence_fuzzer.cpp). So the body is read here first:
// no empty array inside any `coordinates`. simdjson's depth limit (1024 levels; deeper bodies
// are refused) bounds this recursion.
void check_before_geos(simdjson::dom::element e) {
    simdjson::dom::array a;
    if (e.get(a) == simdjson::SUCCESS) {
        for (const auto child : a) check_before_geos(child);
        return;
    }
    simdjson::dom::object o;
    if (e.get(o) != simdjson::SUCCESS) return;
    for (const auto field : o) {
        if (field.key == "coordinates" && has_empty_array(field.value)) {
            invalid("coordinates: a position, ring or polygon is an empty array");
        }
        check_before_geos(field.value);
    }
}

}  // namespace

FenceGeometry parse_fence(std::string_view geojson, bool repair) {
    if (geojson.find_first_not_of(" \t\r\n") == std::string_view::npos) {
        throw ProblemError(ProblemKind::bad_body,
                           "body: empty; send a GeoJSON Polygon or MultiPolygon (or a Feature "
                           "holding one)",
                           "body");
    }
    {
        simdjson::dom::parser parser;
        simdjson::dom::element doc;
        if (const auto error = parser.parse(geojson.data(), geojson.size()).get(doc)) {
            throw ProblemError(
                ProblemKind::bad_body,
                std::string("body: not valid JSON: ") + simdjson::error_message(error), "body");
        }
        check_before_geos(doc);
    }
    Geos geos;
    GEOSGeoJSONReader* reader = GEOSGeoJSONReader_create_r(geos.h());
    const std::string text(geojson);
    GEOSGeometry* g = geos.own(GEOSGeoJSONReader_readGeometry_r(geos.h(), reader, text.c_str()));
    GEOSGeoJSONReader_destroy_r(geos.h(), reader);
    if (g == nullptr) {
        // GEOS parses with nlohmann::json: its syntax errors say "json.exception.parse_error";
        // anything else is JSON that is not acceptable GeoJSON (an unclosed ring, too few points).
        const std::string& why = geos.error();
        if (why.find("parse_error") != std::string::npos ||
            why.find("type_error") != std::string::npos) {
            throw ProblemError(ProblemKind::bad_body, "body: not valid GeoJSON: " + why, "body");
        }
        invalid("not an acceptable GeoJSON geometry: " + why);
    }
    const int type = GEOSGeomTypeId_r(geos.h(), g);
    if (type != GEOS_POLYGON && type != GEOS_MULTIPOLYGON) {
        invalid("a geofence must be a Polygon or MultiPolygon, got " + type_name(type));
    }
    if (GEOSisEmpty_r(geos.h(), g) != 0) invalid("the " + type_name(type) + " is empty");

    double xmin = 0;
    double xmax = 0;
    double ymin = 0;
    double ymax = 0;
    GEOSGeom_getXMin_r(geos.h(), g, &xmin);
    GEOSGeom_getXMax_r(geos.h(), g, &xmax);
    GEOSGeom_getYMin_r(geos.h(), g, &ymin);
    GEOSGeom_getYMax_r(geos.h(), g, &ymax);
    if (!std::isfinite(xmin) || !std::isfinite(xmax) || xmin < -180 || xmax > 180) {
        invalid(
            fmt::format("longitudes span [{}, {}], outside [-180, 180] (coordinates are "
                        "[longitude, latitude] in WGS 84)",
                        xmin, xmax));
    }
    if (!std::isfinite(ymin) || !std::isfinite(ymax) || ymin < -90 || ymax > 90) {
        invalid(
            fmt::format("latitudes span [{}, {}], outside [-90, 90] (coordinates are "
                        "[longitude, latitude] in WGS 84)",
                        ymin, ymax));
    }

    FenceGeometry out;
    char* reason = nullptr;
    GEOSGeometry* location = nullptr;
    const char valid = GEOSisValidDetail_r(geos.h(), g, 0, &reason, &location);
    geos.own(location);
    const std::string why = reason != nullptr ? reason : geos.error();
    if (reason != nullptr) GEOSFree_r(geos.h(), reason);
    if (valid == 2) invalid("GEOS could not check the geometry: " + why);

    const GEOSGeometry* result = g;
    if (valid == 0) {
        if (!repair) {
            std::string where;
            double x = 0;
            double y = 0;
            if (location != nullptr && GEOSGeomGetX_r(geos.h(), location, &x) == 1 &&
                GEOSGeomGetY_r(geos.h(), location, &y) == 1) {
                where = fmt::format(" at or near [{}, {}]", x, y);
            }
            invalid(
                fmt::format("the {} is invalid: {}{}; fix it, or send it with ?repair=true "
                            "to have it made valid",
                            type_name(type), why, where));
        }
        GEOSMakeValidParams* params = GEOSMakeValidParams_create_r(geos.h());
        GEOSMakeValidParams_setMethod_r(geos.h(), params, GEOS_MAKE_VALID_STRUCTURE);
        GEOSMakeValidParams_setKeepCollapsed_r(geos.h(), params, 0);
        GEOSGeometry* fixed = geos.own(GEOSMakeValidWithParams_r(geos.h(), g, params));
        GEOSMakeValidParams_destroy_r(geos.h(), params);
        if (fixed == nullptr) invalid("repair failed: " + geos.error());
        result = fixed;
        out.repaired = true;
    }
    GEOSGeometry* multi = to_multipolygon(geos, result);
    if (multi == nullptr) invalid("nothing with an area is left after repair");
    if (GEOSisValid_r(geos.h(), multi) != 1) invalid("repair did not produce a valid geometry");
    check_no_antipodal_edges(geos, multi);
    GEOSSetSRID_r(geos.h(), multi, 4326);

    GEOSWKBWriter* writer = GEOSWKBWriter_create_r(geos.h());
    GEOSWKBWriter_setOutputDimension_r(geos.h(), writer, 2);
    GEOSWKBWriter_setIncludeSRID_r(geos.h(), writer, 1);
    std::size_t size = 0;
    unsigned char* hex = GEOSWKBWriter_writeHEX_r(geos.h(), writer, multi, &size);
    GEOSWKBWriter_destroy_r(geos.h(), writer);
    if (hex == nullptr) invalid("cannot encode the geometry: " + geos.error());
    out.ewkb_hex.assign(reinterpret_cast<const char*>(hex), size);
    GEOSFree_r(geos.h(), hex);
    return out;
}

}  // namespace trackd::http
