// The archive table's Iceberg schema, partition spec and sort order: the one place that assigns
// field ids. Parquet columns (parquet_file_writer.cpp), manifests (manifest.cpp) and metadata
// (iceberg_table.cpp) all take their ids from here.
#pragma once

#include <cstdint>
#include <string>

namespace trackd::archive {

// Iceberg field ids of the table's columns; ids never change once a table exists.
namespace field_id {
constexpr int vehicle_id = 1;
constexpr int recorded_at = 2;
constexpr int longitude = 3;
constexpr int latitude = 4;
constexpr int altitude = 5;
constexpr int geometry = 6;
constexpr int bbox = 7;
constexpr int speed_kmh = 8;
constexpr int heading_deg = 9;
constexpr int accuracy_m = 10;
constexpr int attributes = 11;
constexpr int kafka_partition = 12;
constexpr int kafka_offset = 13;
constexpr int ingest_batch_id = 14;
constexpr int bbox_xmin = 15;
constexpr int bbox_ymin = 16;
constexpr int bbox_xmax = 17;
constexpr int bbox_ymax = 18;
constexpr int last = 18;
// The partition field: recorded_at_day = day(recorded_at), or recorded_at_hour =
// hour(recorded_at) (archive.partition, fixed when the table is created).
constexpr int partition = 1000;
}  // namespace field_id

constexpr int kSchemaId = 0;
constexpr int kSpecId = 0;
constexpr int kSortOrderId = 1;  // vehicle_id, recorded_at ascending

// The partition transform of recorded_at.
enum class PartitionUnit { day, hour };
// "day" / "hour" (archive.partition, and the transform's name in the spec).
PartitionUnit partition_unit(const std::string& name);
const char* to_string(PartitionUnit unit);
// "recorded_at_day" / "recorded_at_hour".
std::string partition_field_name(PartitionUnit unit);
// The partition value of a time: days or hours since 1970-01-01 00:00 UTC (floor).
std::int32_t partition_of(PartitionUnit unit, std::int64_t micros_since_epoch);
// The folder of a partition value, as Java's writers name it: "recorded_at_day=2025-12-01",
// "recorded_at_hour=2025-12-01-13".
std::string partition_path(PartitionUnit unit, std::int32_t value);

// Iceberg JSON (spec Appendix C) of the schema, the partition spec's fields array, the whole
// partition spec, and the sort order.
std::string schema_json();
std::string partition_fields_json(PartitionUnit unit = PartitionUnit::day);
std::string partition_spec_json(PartitionUnit unit = PartitionUnit::day);
std::string sort_order_json();

// day(recorded_at): days since 1970-01-01 (floor, also before 1970).
std::int32_t day_of(std::int64_t micros_since_epoch);

}  // namespace trackd::archive
