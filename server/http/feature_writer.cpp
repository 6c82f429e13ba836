#include "feature_writer.hpp"

#include <charconv>

#include "params.hpp"

namespace trackd::http {

const char* const kVehicleColumns =
    "vehicle_id, (extract(epoch FROM last_updated) * 1000000)::int8, ST_X(geom), ST_Y(geom), "
    "ST_Z(geom), speed_kmh, heading_deg, accuracy_m, attributes::text";

const char* const kPositionColumns =
    "vehicle_id, (extract(epoch FROM recorded_at) * 1000000)::int8, ST_X(geom), ST_Y(geom), "
    "ST_Z(geom), speed_kmh, heading_deg, accuracy_m, attributes::text, ingest_batch_id, "
    "kafka_partition, kafka_offset";

const char* const kGeofenceColumns =
    "zone_name, ST_AsGeoJSON(ST_ForcePolygonCCW(fence_geom), 9), "
    "(extract(epoch FROM created_at) * 1000000)::int8, "
    "(extract(epoch FROM updated_at) * 1000000)::int8, ST_Area(fence_geom::geography), dwell_s";

std::string vehicle_in_box(const std::string& box, const std::string& alias) {
    return alias + "cell && " + box + " AND " + alias + "geom && " + box;
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

std::int64_t parse_int64(std::string_view text) {
    std::int64_t v = 0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || ptr != text.data() + text.size()) {
        throw db::DbError("expected an integer from the database, got '" + std::string(text) + "'",
                          "");
    }
    return v;
}

// The columns vehicles and positions share (0..8); `time_name` is last_updated/recorded_at.
// Values are written from the result's own buffers: a page of 100 features copies nothing.
void write_point_feature(JsonWriter& w, const db::Result& r, int row, std::string_view id,
                         const char* time_name, const ExtraProperties& extra,
                         bool with_ingest_ids) {
    w.begin_object();
    w.key("type").value("Feature");
    w.key("id").value(id);
    w.key("geometry").begin_object();
    w.key("type").value("Point");
    w.key("coordinates").begin_array();
    number_or_null(w, r, row, 2);
    number_or_null(w, r, row, 3);
    w.end_array();
    w.end_object();
    w.key("properties").begin_object();
    w.key("vehicle_id").value(r.at_view(row, 0));
    w.key(time_name).value(format_rfc3339(parse_int64(r.at_view(row, 1))));
    w.key("altitude_m");
    number_or_null(w, r, row, 4);
    w.key("speed_kmh");
    number_or_null(w, r, row, 5);
    w.key("heading_deg");
    number_or_null(w, r, row, 6);
    w.key("accuracy_m");
    number_or_null(w, r, row, 7);
    w.key("attributes");
    const auto attrs = r.view(row, 8);
    if (attrs) {
        w.raw(*attrs);
    } else {
        w.null();
    }
    if (with_ingest_ids) {
        w.key("ingest_batch_id").raw(r.at_view(row, 9));
        w.key("kafka_partition").raw(r.at_view(row, 10));
        w.key("kafka_offset").raw(r.at_view(row, 11));
    }
    for (const auto& [name, json] : extra) w.key(name).raw(json);
    w.end_object();
    w.end_object();
}

}  // namespace

void write_vehicle(JsonWriter& w, const db::Result& r, int row, const ExtraProperties& extra) {
    write_point_feature(w, r, row, r.at_view(row, 0), "last_updated", extra, false);
}

std::string position_id(const db::Result& r, int row) {
    return r.at(row, 9) + "-" + r.at(row, 10) + "-" + r.at(row, 11);
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
