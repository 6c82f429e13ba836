// GeoJSON encoding of trackd's rows (RFC 7946: [longitude, latitude], WGS 84) and the SQL
// fragments that select them, shared by the fleet endpoints and OGC API - Features.
//
// Contract: each k*Columns fragment selects the columns that the matching write_* function
// reads, starting at column `first`; callers append their own columns after them.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "trackd/db/connection.hpp"

#include "json_writer.hpp"
#include "request.hpp"

namespace trackd::http {

// 9 columns: vehicle_id, last_updated (µs), lon, lat, altitude, speed, heading, accuracy,
// attributes.
extern const char* const kVehicleColumns;
// 12 columns: vehicle_id, recorded_at (µs), lon, lat, altitude, speed, heading, accuracy,
// attributes, ingest_batch_id, kafka_partition, kafka_offset.
extern const char* const kPositionColumns;
// 6 columns: zone_name, GeoJSON geometry (exterior rings counter-clockwise), created_at (µs),
// updated_at (µs), area in m², dwell_s.
extern const char* const kGeofenceColumns;

// Writes a Feature; `extra` members are added to its properties (e.g. distance_m), in order.
using ExtraProperties = std::vector<std::pair<std::string, std::string>>;  // name -> JSON text
void write_vehicle(JsonWriter& w, const db::Result& r, int row, const ExtraProperties& extra = {});
void write_position(JsonWriter& w, const db::Result& r, int row, const ExtraProperties& extra = {});
void write_geofence(JsonWriter& w, const db::Result& r, int row);

// The id of a positions feature: "<ingest_batch_id>-<kafka_partition>-<kafka_offset>".
std::string position_id(const db::Result& r, int row);

// Builds SQL from constant fragments, binding each value as the next $n parameter.
class SqlBuilder {
  public:
    explicit SqlBuilder(std::string sql) : sql_(std::move(sql)) {}
    SqlBuilder& operator+=(const std::string& fragment) {
        sql_ += fragment;
        return *this;
    }
    // Binds `value` and returns its placeholder ("$3").
    std::string bind(std::string value);
    [[nodiscard]] const std::string& sql() const { return sql_; }
    [[nodiscard]] const db::Params& params() const { return params_; }

  private:
    std::string sql_;
    db::Params params_;
};

// "http://host" for absolute links; the Host header when it is plausible, else the listen
// address.
std::string base_url(const Request& req, const std::string& fallback_host);

// The request's URL with some query parameters replaced (or removed when the value is empty).
std::string url_with(const Request& req, const std::string& fallback_host,
                     const std::vector<std::pair<std::string, std::string>>& changes);

void write_link(JsonWriter& w, const std::string& rel, const std::string& type,
                const std::string& href, const std::string& title = {});

// Response helpers.
Response json_response(std::string body, int status = 200);
Response geojson_response(std::string body, int status = 200);

}  // namespace trackd::http
