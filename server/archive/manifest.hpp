// Iceberg v2 manifests and manifest lists (spec "Manifests", "Manifest Lists"), as Avro files
// whose schemas carry every field id, with the file metadata keys readers look for.
//
// Manifest entries stay dynamic avro::Values so that entries written by another writer (with
// fields trackd does not produce) survive a manifest merge: they are re-encoded with trackd's
// schema, which holds every v2 data_file field.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "avro.hpp"
#include "table_schema.hpp"

namespace trackd::archive {

// A Parquet data file trackd wrote, with its metrics keyed by field id. Bounds are the spec's
// single-value binary serialisation (Appendix D); only columns where that is exact are present.
struct DataFile {
    std::string path;            // URI
    std::int32_t partition = 0;  // the partition value: day or hour of recorded_at
    std::int64_t record_count = 0;
    std::int64_t file_size_in_bytes = 0;
    std::map<int, std::int64_t> column_sizes;
    std::map<int, std::int64_t> value_counts;
    std::map<int, std::int64_t> null_value_counts;
    std::map<int, std::int64_t> nan_value_counts;
    std::map<int, std::string> lower_bounds;
    std::map<int, std::string> upper_bounds;
    std::vector<std::int64_t> split_offsets;  // row group offsets
};

// A manifest_entry for a file added by `snapshot_id` (status ADDED, sequence numbers inherited).
avro::Value added_entry(const DataFile& file, std::int64_t snapshot_id,
                        PartitionUnit unit = PartitionUnit::day);

struct PartitionSummary {
    bool contains_null = false;
    std::optional<bool> contains_nan;
    std::optional<std::string> lower_bound;
    std::optional<std::string> upper_bound;
};

// One manifest_file record of a manifest list.
struct ManifestFile {
    std::string manifest_path;
    std::int64_t manifest_length = 0;
    std::int32_t partition_spec_id = 0;
    std::int32_t content = 0;  // 0 data, 1 deletes
    std::int64_t sequence_number = 0;
    std::int64_t min_sequence_number = 0;
    std::int64_t added_snapshot_id = 0;
    std::int32_t added_files_count = 0;
    std::int32_t existing_files_count = 0;
    std::int32_t deleted_files_count = 0;
    std::int64_t added_rows_count = 0;
    std::int64_t existing_rows_count = 0;
    std::int64_t deleted_rows_count = 0;
    std::vector<PartitionSummary> partitions;
    std::optional<std::string> key_metadata;
};

// The Avro schemas, exactly as written into file headers (the entry's partition struct
// depends on the table's partition field).
const std::string& manifest_entry_schema(PartitionUnit unit = PartitionUnit::day);
const std::string& manifest_file_schema();

// The value of an entry's partition field (day or hour), nullopt when null.
std::optional<std::int32_t> partition_of_entry(const avro::Value& entry);

// A data manifest holding `entries` (manifest_entry Values).
std::string write_manifest(const std::vector<avro::Value>& entries,
                           PartitionUnit unit = PartitionUnit::day);

// The entries of a manifest file (any v1/v2 writer).
std::vector<avro::Value> read_manifest(const std::string& bytes);

// Counts and the partition summary of `entries`, for the manifest list; sequence numbers and
// path/length are the caller's.
ManifestFile summarize_manifest(const std::vector<avro::Value>& entries);

std::string write_manifest_list(const std::vector<ManifestFile>& manifests,
                                std::int64_t snapshot_id,
                                std::optional<std::int64_t> parent_snapshot_id,
                                std::int64_t sequence_number);

std::vector<ManifestFile> read_manifest_list(const std::string& bytes);

// Appendix D single-value serialisation of a date (days): 4 bytes little-endian.
std::string int_bound(std::int32_t v);
std::string long_bound(std::int64_t v);
std::string double_bound(double v);

}  // namespace trackd::archive
