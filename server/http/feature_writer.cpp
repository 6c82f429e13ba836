#include "feature_writer.hpp"

#include <fmt/format.h>

#include "trackd/db/binary.hpp"

#include "params.hpp"

namespace trackd::http {

const char* const kVehicleColumns =
    "vehicle_id, last_updated, geom, speed_kmh, heading_deg, accuracy_m, attributes::text";

const char* const kPositionColumns =
    "vehicle_id, recorded_at, geom, speed_kmh, heading_deg, accuracy_m, attributes::text, "
    "ingest_batch_id, kafka_partition, kafka_offset";

const char* const kGeofenceColumns =
    "zone_name, ST_AsGeoJSON(ST_ForcePolygonCCW(fence_geom), 9), "
    "(extract(epoch FROM created_at) * 1000000)::int8, "
    "(extract(epoch FROM updated_at) * 1000000)::int8, ST_Area(fence_geom::geography), dwell_s";

std::string vehicle_in_box(const std::string& box, const std::string& alias) {
    return alias + "cell_corner && trackd.cell_corners_for(" + box + ") AND " + alias + "geom && " +
           box;
}

bool box_planned_each_time(const BBox& box) {
    constexpr double kCellsPerDegree = 128;  // trackd.cell_corner's grid (V0016)
    const double cells = (box.max_lon - box.min_lon) * kCellsPerDegree *
                         (box.max_lat - box.min_lat) * kCellsPerDegree;
    return cells > kCellsPlannedEachTime;
}

namespace {

void number_or_null(JsonWriter& w, const db::Result& r, int row, int col) {
    const auto v = r.view(row, col);
    if (v) {
        w.number_text(*v);
    } else {
        w.null();
    }
}

// A real column (speed, heading, accuracy), binary; null for NULL.
void append_float4(std::string& o, const db::Result& r, int row, int col) {
    const auto v = r.view(row, col);
    if (v) {
        append_json_number(o, db::binary::float4(*v));
    } else {
        o += "null";
    }
}

// The columns vehicles and positions share (0..6, binary); `time_name` is
// last_updated/recorded_at. Every page writes one per row, so the feature is composed from its
// constant fragments in a few appends, its values read from the result's own buffers.
void write_point_feature(JsonWriter& w, const db::Result& r, int row, std::string_view id,
                         const char* time_name, const ExtraProperties& extra,
                         bool with_ingest_ids) {
    const auto p = db::binary::point(r.at_view(row, 2));
    std::string& o = w.value_buffer();
    o += R"({"type":"Feature","id":)";
    append_json_string(o, id);
    o += R"(,"geometry":{"type":"Point","coordinates":[)";
    append_json_number(o, p.x);
    o += ',';
    append_json_number(o, p.y);
    o += R"(]},"properties":{"vehicle_id":)";
    append_json_string(o, r.at_view(row, 0));
    o += ",\"";
    o += time_name;
    o += "\":\"";
    append_rfc3339(o, db::binary::timestamptz_unix_us(r.at_view(row, 1)));
    o += R"(","altitude_m":)";
    if (p.has_z) {
        append_json_number(o, p.z);
    } else {
        o += "null";
    }
    o += R"(,"speed_kmh":)";
    append_float4(o, r, row, 3);
    o += R"(,"heading_deg":)";
    append_float4(o, r, row, 4);
    o += R"(,"accuracy_m":)";
    append_float4(o, r, row, 5);
    o += R"(,"attributes":)";
    const auto attrs = r.view(row, 6);
    o += attrs ? *attrs : std::string_view("null");
    if (with_ingest_ids) {
        o += R"(,"ingest_batch_id":)";
        append_json_number(o, db::binary::int8(r.at_view(row, 7)));
        o += R"(,"kafka_partition":)";
        append_json_number(o, std::int64_t{db::binary::int4(r.at_view(row, 8))});
        o += R"(,"kafka_offset":)";
        append_json_number(o, db::binary::int8(r.at_view(row, 9)));
    }
    for (const auto& [name, number] : extra) {
        o += ',';
        append_json_string(o, name);
        o += ':';
        append_json_number(o, number);
    }
    o += "}}";
}

}  // namespace

void write_vehicle(JsonWriter& w, const db::Result& r, int row, const ExtraProperties& extra) {
    write_point_feature(w, r, row, r.at_view(row, 0), "last_updated", extra, false);
}

std::string position_id(const db::Result& r, int row) {
    return fmt::format("{}-{}-{}", db::binary::int8(r.at_view(row, 7)),
                       db::binary::int4(r.at_view(row, 8)), db::binary::int8(r.at_view(row, 9)));
}

std::string position_cursor(const db::Result& r, int row) {
    return fmt::format("{}_{}_{}_{}", db::binary::timestamptz_unix_us(r.at_view(row, 1)),
                       db::binary::int8(r.at_view(row, 7)), db::binary::int4(r.at_view(row, 8)),
                       db::binary::int8(r.at_view(row, 9)));
}

void write_position(JsonWriter& w, const db::Result& r, int row, const ExtraProperties& extra) {
    write_point_feature(w, r, row, position_id(r, row), "recorded_at", extra, true);
}

void write_geofence(JsonWriter& w, const db::Result& r, int row) {
    w.begin_object();
    w.key("type").value("Feature");
    w.key("id").value(r.at(row, 0));
    w.key("geometry").raw(r.at(row, 1));
    w.key("properties").begin_object();
    w.key("zone_name").value(r.at(row, 0));
    w.key("created_at").value(format_rfc3339(std::stoll(r.at(row, 2))));
    w.key("updated_at").value(format_rfc3339(std::stoll(r.at(row, 3))));
    w.key("area_m2");
    number_or_null(w, r, row, 4);
    w.key("dwell_s").number_text(r.at(row, 5));
    w.end_object();
    w.end_object();
}

}  // namespace trackd::http
