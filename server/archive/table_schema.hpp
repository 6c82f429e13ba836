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
constexpr int partition_day = 1000;  // partition field recorded_at_day = day(recorded_at)
}  // namespace field_id

constexpr int kSchemaId = 0;
constexpr int kSpecId = 0;
constexpr int kSortOrderId = 1;  // vehicle_id, recorded_at ascending

// Iceberg JSON (spec Appendix C) of the schema, the partition spec's fields array, the whole
// partition spec, and the sort order.
std::string schema_json();
std::string partition_fields_json();
std::string partition_spec_json();
std::string sort_order_json();

// day(recorded_at): days since 1970-01-01 (floor, also before 1970).
std::int32_t day_of(std::int64_t micros_since_epoch);

}  // namespace trackd::archive
