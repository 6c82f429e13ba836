#include "table_schema.hpp"

#include <chrono>
#include <stdexcept>

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

PartitionUnit partition_unit(const std::string& name) {
    if (name == "day") return PartitionUnit::day;
    if (name == "hour") return PartitionUnit::hour;
    throw std::invalid_argument("archive: unknown partition transform '" + name + "'");
}

const char* to_string(PartitionUnit unit) { return unit == PartitionUnit::hour ? "hour" : "day"; }

std::string partition_field_name(PartitionUnit unit) {
    return std::string("recorded_at_") + to_string(unit);
}

std::int32_t partition_of(PartitionUnit unit, std::int64_t micros) {
    if (unit == PartitionUnit::day) return day_of(micros);
    constexpr std::int64_t kHour = 3600LL * 1000000;
    std::int64_t h = micros / kHour;
    if (micros % kHour < 0) --h;
    return static_cast<std::int32_t>(h);
}

std::string partition_path(PartitionUnit unit, std::int32_t value) {
    const auto days =
        unit == PartitionUnit::day ? value : (value >= 0 ? value / 24 : (value - 23) / 24);
    const std::chrono::sys_days d{std::chrono::days{days}};
    const std::chrono::year_month_day ymd{d};
    auto out = fmt::format("{}={:04d}-{:02d}-{:02d}", partition_field_name(unit),
                           static_cast<int>(ymd.year()), static_cast<unsigned>(ymd.month()),
                           static_cast<unsigned>(ymd.day()));
    if (unit == PartitionUnit::hour) out += fmt::format("-{:02d}", value - days * 24);
    return out;
}

std::string partition_fields_json(PartitionUnit unit) {
    return fmt::format(R"([{{"name":"{}","transform":"{}","source-id":{},"field-id":{}}}])",
                       partition_field_name(unit), to_string(unit), field_id::recorded_at,
                       field_id::partition);
}

std::string partition_spec_json(PartitionUnit unit) {
    return fmt::format(R"({{"spec-id":{},"fields":{}}})", kSpecId, partition_fields_json(unit));
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
