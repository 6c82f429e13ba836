// GeoJSON Features of trackd's rows (RFC 7946: [longitude, latitude], WGS 84) and the column
// lists that select them, shared by the fleet endpoints and OGC API - Features.
//
// Contract: each k*Columns fragment selects the columns that the matching write_* function
// reads, starting at column 0; callers append their own columns after them. Vehicles and
// positions are read in binary (run their statements with db::Format::binary: PostgreSQL then
// formats no float, timestamp or geometry, trackd does), geofences as text.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "trackd/db/connection.hpp"

#include "json_writer.hpp"

namespace trackd::http {

// 7 columns, binary: vehicle_id, last_updated, geom (EWKB point: lon, lat, altitude), speed,
// heading, accuracy, attributes (text).
extern const char* const kVehicleColumns;
constexpr int kVehicleColumnCount = 7;
// 10 columns, binary: those of a vehicle with recorded_at for last_updated, then
// ingest_batch_id, kafka_partition, kafka_offset.
extern const char* const kPositionColumns;
// 6 columns: zone_name, GeoJSON geometry (exterior rings counter-clockwise), created_at (µs),
// updated_at (µs), area in m², dwell_s.
extern const char* const kGeofenceColumns;

// The SQL condition "the vehicle's position is in `box`" on trackd.vehicle_current_state
// (`box`: an SQL geometry expression; `alias`: the table's alias with its dot, or ""). geom has
// no index, so that an update inside the same grid cell is a HOT update (V0011): the SP-GiST on
// the corners of the vehicles' cells (V0016) finds the candidates, those of every cell reaching
// into `box`, and geom && box keeps the exact ones.
std::string vehicle_in_box(const std::string& box, const std::string& alias = "");

struct BBox;  // params.hpp
// Whether a statement of the current state filtered by vehicle_in_box(`box`) and paged in
// vehicle_id order is planned with its values each time (planned_each_time) instead of keeping
// its cached plan. The cached, generic plan reads the box through the cells' SP-GiST and sorts:
// the best plan for a small box, but for one over much of the fleet it reads every vehicle in
// the box for every page, where the plan made with the values walks the primary key and stops
// at the page. A box over more than kCellsPlannedEachTime cells is planned each time; planning
// costs 0.1-0.2 ms, which only a small box's page notices (docs/benchmarks.md, "The current
// state's large boxes are planned each time").
constexpr double kCellsPlannedEachTime = 16 * 16;
bool box_planned_each_time(const BBox& box);

// Writes a Feature; `extra` members are added to its properties (e.g. distance_m), in order.
using ExtraProperties = std::vector<std::pair<const char*, double>>;
void write_vehicle(JsonWriter& w, const db::Result& r, int row, const ExtraProperties& extra = {});
void write_position(JsonWriter& w, const db::Result& r, int row, const ExtraProperties& extra = {});
void write_geofence(JsonWriter& w, const db::Result& r, int row);

// The id of a positions feature: "<ingest_batch_id>-<kafka_partition>-<kafka_offset>".
std::string position_id(const db::Result& r, int row);
// The `after` cursor of a positions page: "<recorded_at µs>_<batch>_<partition>_<offset>".
std::string position_cursor(const db::Result& r, int row);

}  // namespace trackd::http
