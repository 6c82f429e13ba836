#include "table_schema.hpp"

#include <fmt/format.h>

namespace trackd::archive {
namespace {

std::string column(int id, const char* name, bool required, const std::string& type,
                   const char* doc = nullptr) {
    std::string out = fmt::format(R"({{"id":{},"name":"{}","required":{},"type":{})", id, name,
                                  required ? "true" : "false", type);
    if (doc != nullptr) out += fmt::format(R"(,"doc":"{}")", doc);
    return out + "}";
}

std::string prim(const char* t) { return fmt::format(R"("{}")", t); }

}  // namespace

std::string schema_json() {
    using namespace field_id;
    const std::string bbox_type = R"({"type":"struct","fields":[)" +
                                  column(bbox_xmin, "xmin", true, prim("double")) + "," +
                                  column(bbox_ymin, "ymin", true, prim("double")) + "," +
                                  column(bbox_xmax, "xmax", true, prim("double")) + "," +
                                  column(bbox_ymax, "ymax", true, prim("double")) + "]}";
    return fmt::format(
        R"({{"type":"struct","schema-id":{},"fields":[{}]}})", kSchemaId,
        column(vehicle_id, "vehicle_id", true, prim("string")) + "," +
            column(recorded_at, "recorded_at", true, prim("timestamptz"),
                   "When the vehicle recorded the position") +
            "," + column(longitude, "longitude", true, prim("double"), "WGS 84 degrees") + "," +
            column(latitude, "latitude", true, prim("double"), "WGS 84 degrees") + "," +
            column(altitude, "altitude", true, prim("double"),
                   "Metres; 0 when the message had none (the Z of the PostGIS point)") +
            "," +
            column(geometry, "geometry", true, prim("binary"),
                   "ISO WKB Point Z, EPSG:4326 (lon, lat, altitude); GeoParquet column") +
            "," + column(bbox, "bbox", true, bbox_type, "GeoParquet 1.1 covering of geometry") +
            "," + column(speed_kmh, "speed_kmh", false, prim("float")) + "," +
            column(heading_deg, "heading_deg", false, prim("float")) + "," +
            column(accuracy_m, "accuracy_m", false, prim("float")) + "," +
            column(attributes, "attributes", false, prim("string"),
                   "Message fields beyond the known ones, JSON object") +
            "," + column(kafka_partition, "kafka_partition", true, prim("int")) + "," +
            column(kafka_offset, "kafka_offset", true, prim("long")) + "," +
            column(ingest_batch_id, "ingest_batch_id", true, prim("long")));
}

std::string partition_fields_json() {
    return fmt::format(
        R"([{{"name":"recorded_at_day","transform":"day","source-id":{},"field-id":{}}}])",
        field_id::recorded_at, field_id::partition_day);
}

std::string partition_spec_json() {
    return fmt::format(R"({{"spec-id":{},"fields":{}}})", kSpecId, partition_fields_json());
}

std::string sort_order_json() {
    return fmt::format(
        R"({{"order-id":{},"fields":[)"
        R"({{"transform":"identity","source-id":{},"direction":"asc","null-order":"nulls-first"}},)"
        R"({{"transform":"identity","source-id":{},"direction":"asc","null-order":"nulls-first"}}]}})",
        kSortOrderId, field_id::vehicle_id, field_id::recorded_at);
}

std::int32_t day_of(std::int64_t micros) {
    constexpr std::int64_t kDay = 86400LL * 1000000;
    std::int64_t d = micros / kDay;
    if (micros % kDay < 0) --d;
    return static_cast<std::int32_t>(d);
}

}  // namespace trackd::archive
