#include "manifest.hpp"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "table_schema.hpp"

namespace trackd::archive {
namespace {

using avro::Value;

// An optional field: a union with null first and a null default (spec Appendix A, Avro).
std::string opt(const char* name, const std::string& type, int id) {
    return fmt::format(R"({{"name":"{}","type":["null",{}],"default":null,"field-id":{}}})", name,
                       type, id);
}
std::string req(const char* name, const std::string& type, int id) {
    return fmt::format(R"({{"name":"{}","type":{},"field-id":{}}})", name, type, id);
}
// map<int, T> with non-string keys: an array of key/value records with logicalType map.
std::string int_map(int key_id, int value_id, const char* value_type) {
    return fmt::format(
        R"({{"type":"array","items":{{"type":"record","name":"k{}_v{}","fields":[)"
        R"({{"name":"key","type":"int","field-id":{}}},{{"name":"value","type":"{}","field-id":{}}}]}},)"
        R"("logicalType":"map"}})",
        key_id, value_id, key_id, value_type, value_id);
}

template <class T>
std::string le_bytes(T v) {
    std::string out(sizeof(T), '\0');
    std::memcpy(out.data(), &v, sizeof(T));  // little-endian hosts only (x86-64, aarch64)
    return out;
}

Value int_map_value(const std::map<int, std::int64_t>& m) {
    Value::Items items;
    for (const auto& [k, v] : m) items.emplace_back(Value::Fields{{"key", k}, {"value", v}});
    return Value(std::move(items));
}
Value bytes_map_value(const std::map<int, std::string>& m) {
    Value::Items items;
    for (const auto& [k, v] : m) items.emplace_back(Value::Fields{{"key", k}, {"value", v}});
    return Value(std::move(items));
}

std::optional<std::string> opt_str(const Value& v) {
    if (v.is_null()) return std::nullopt;
    return v.str();
}

}  // namespace

const std::string& manifest_entry_schema(PartitionUnit unit) {
    // day() results are dates; hour() results plain ints (spec "Partition Transforms").
    static const auto make = [](PartitionUnit u) {
        const std::string partition = fmt::format(
            R"({{"type":"record","name":"r102","fields":[{}]}})",
            opt(partition_field_name(u).c_str(),
                u == PartitionUnit::day ? R"({"type":"int","logicalType":"date"})" : R"("int")",
                field_id::partition));
        const std::string data_file =
            R"({"type":"record","name":"r2","fields":[)" + req("content", R"("int")", 134) + "," +
            req("file_path", R"("string")", 100) + "," + req("file_format", R"("string")", 101) +
            "," + req("partition", partition, 102) + "," + req("record_count", R"("long")", 103) +
            "," + req("file_size_in_bytes", R"("long")", 104) + "," +
            opt("column_sizes", int_map(117, 118, "long"), 108) + "," +
            opt("value_counts", int_map(119, 120, "long"), 109) + "," +
            opt("null_value_counts", int_map(121, 122, "long"), 110) + "," +
            opt("nan_value_counts", int_map(138, 139, "long"), 137) + "," +
            opt("lower_bounds", int_map(126, 127, "bytes"), 125) + "," +
            opt("upper_bounds", int_map(129, 130, "bytes"), 128) + "," +
            opt("key_metadata", R"("bytes")", 131) + "," +
            opt("split_offsets", R"({"type":"array","items":"long","element-id":133})", 132) + "," +
            opt("equality_ids", R"({"type":"array","items":"int","element-id":136})", 135) + "," +
            opt("sort_order_id", R"("int")", 140) + "]}";
        return R"({"type":"record","name":"manifest_entry","fields":[)" +
               req("status", R"("int")", 0) + "," + opt("snapshot_id", R"("long")", 1) + "," +
               opt("sequence_number", R"("long")", 3) + "," +
               opt("file_sequence_number", R"("long")", 4) + "," + req("data_file", data_file, 2) +
               "]}";
    };
    static const std::string day = make(PartitionUnit::day);
    static const std::string hour = make(PartitionUnit::hour);
    return unit == PartitionUnit::day ? day : hour;
}

const std::string& manifest_file_schema() {
    static const std::string schema = [] {
        const std::string summary =
            R"({"type":"array","items":{"type":"record","name":"r508","fields":[)" +
            req("contains_null", R"("boolean")", 509) + "," +
            opt("contains_nan", R"("boolean")", 518) + "," + opt("lower_bound", R"("bytes")", 510) +
            "," + opt("upper_bound", R"("bytes")", 511) + R"(]},"element-id":508})";
        return R"({"type":"record","name":"manifest_file","fields":[)" +
               req("manifest_path", R"("string")", 500) + "," +
               req("manifest_length", R"("long")", 501) + "," +
               req("partition_spec_id", R"("int")", 502) + "," + req("content", R"("int")", 517) +
               "," + req("sequence_number", R"("long")", 515) + "," +
               req("min_sequence_number", R"("long")", 516) + "," +
               req("added_snapshot_id", R"("long")", 503) + "," +
               req("added_files_count", R"("int")", 504) + "," +
               req("existing_files_count", R"("int")", 505) + "," +
               req("deleted_files_count", R"("int")", 506) + "," +
               req("added_rows_count", R"("long")", 512) + "," +
               req("existing_rows_count", R"("long")", 513) + "," +
               req("deleted_rows_count", R"("long")", 514) + "," + opt("partitions", summary, 507) +
               "," + opt("key_metadata", R"("bytes")", 519) + "]}";
    }();
    return schema;
}

// The value of the table's one partition field, whatever its name.
std::optional<std::int32_t> partition_of_entry(const Value& entry) {
    const auto& fields = entry["data_file"]["partition"].fields();
    if (fields.empty() || fields.front().second.is_null()) return std::nullopt;
    return static_cast<std::int32_t>(fields.front().second.integer());
}

std::string int_bound(std::int32_t v) { return le_bytes(v); }
std::string long_bound(std::int64_t v) { return le_bytes(v); }
std::string double_bound(double v) { return le_bytes(v); }

Value added_entry(const DataFile& f, std::int64_t snapshot_id, PartitionUnit unit) {
    Value::Items offsets;
    for (const auto o : f.split_offsets) offsets.emplace_back(o);
    Value data_file(Value::Fields{
        {"content", 0},
        {"file_path", f.path},
        {"file_format", "PARQUET"},
        {"partition", Value(Value::Fields{{partition_field_name(unit), f.partition}})},
        {"record_count", f.record_count},
        {"file_size_in_bytes", f.file_size_in_bytes},
        {"column_sizes", int_map_value(f.column_sizes)},
        {"value_counts", int_map_value(f.value_counts)},
        {"null_value_counts", int_map_value(f.null_value_counts)},
        {"nan_value_counts", int_map_value(f.nan_value_counts)},
        {"lower_bounds", bytes_map_value(f.lower_bounds)},
        {"upper_bounds", bytes_map_value(f.upper_bounds)},
        {"key_metadata", std::nullopt},
        {"split_offsets", offsets.empty() ? Value() : Value(std::move(offsets))},
        {"equality_ids", std::nullopt},
        {"sort_order_id", kSortOrderId},
    });
    // status 1 = ADDED; null sequence numbers are inherited from the manifest list (spec
    // "Sequence Number Inheritance"), so the manifest stays valid when a commit is retried.
    return Value(Value::Fields{{"status", 1},
                               {"snapshot_id", snapshot_id},
                               {"sequence_number", std::nullopt},
                               {"file_sequence_number", std::nullopt},
                               {"data_file", std::move(data_file)}});
}

std::string write_manifest(const std::vector<Value>& entries, PartitionUnit unit) {
    return avro::write_container(manifest_entry_schema(unit),
                                 {{"schema", schema_json()},
                                  {"schema-id", std::to_string(kSchemaId)},
                                  {"partition-spec", partition_fields_json(unit)},
                                  {"partition-spec-id", std::to_string(kSpecId)},
                                  {"format-version", "2"},
                                  {"content", "data"}},
                                 entries);
}

std::vector<Value> read_manifest(const std::string& bytes) {
    return avro::read_container(bytes).records;
}

ManifestFile summarize_manifest(const std::vector<Value>& entries) {
    ManifestFile m;
    m.partition_spec_id = kSpecId;
    std::optional<std::int32_t> lo;
    std::optional<std::int32_t> hi;
    bool any_null = false;
    for (const auto& e : entries) {
        const auto status = e["status"].integer();
        const auto rows = e["data_file"]["record_count"].integer();
        if (status == 1) {
            ++m.added_files_count;
            m.added_rows_count += rows;
        } else if (status == 0) {
            ++m.existing_files_count;
            m.existing_rows_count += rows;
        } else {
            ++m.deleted_files_count;
            m.deleted_rows_count += rows;
        }
        if (status == 2) continue;  // deleted entries do not count for the partition range
        const auto day = partition_of_entry(e);
        if (!day) {
            any_null = true;
            continue;
        }
        lo = lo ? std::min(*lo, *day) : *day;
        hi = hi ? std::max(*hi, *day) : *day;
    }
    PartitionSummary s;
    s.contains_null = any_null;
    if (lo) s.lower_bound = int_bound(*lo);
    if (hi) s.upper_bound = int_bound(*hi);
    m.partitions.push_back(s);
    return m;
}

std::string write_manifest_list(const std::vector<ManifestFile>& manifests,
                                std::int64_t snapshot_id,
                                std::optional<std::int64_t> parent_snapshot_id,
                                std::int64_t sequence_number) {
    std::vector<Value> records;
    records.reserve(manifests.size());
    for (const auto& m : manifests) {
        Value::Items parts;
        for (const auto& p : m.partitions) {
            parts.emplace_back(Value::Fields{{"contains_null", p.contains_null},
                                             {"contains_nan", p.contains_nan},
                                             {"lower_bound", p.lower_bound},
                                             {"upper_bound", p.upper_bound}});
        }
        records.emplace_back(Value::Fields{
            {"manifest_path", m.manifest_path},
            {"manifest_length", m.manifest_length},
            {"partition_spec_id", m.partition_spec_id},
            {"content", m.content},
            {"sequence_number", m.sequence_number},
            {"min_sequence_number", m.min_sequence_number},
            {"added_snapshot_id", m.added_snapshot_id},
            {"added_files_count", m.added_files_count},
            {"existing_files_count", m.existing_files_count},
            {"deleted_files_count", m.deleted_files_count},
            {"added_rows_count", m.added_rows_count},
            {"existing_rows_count", m.existing_rows_count},
            {"deleted_rows_count", m.deleted_rows_count},
            {"partitions", Value(std::move(parts))},
            {"key_metadata", m.key_metadata},
        });
    }
    std::vector<std::pair<std::string, std::string>> meta = {
        {"snapshot-id", std::to_string(snapshot_id)},
        {"sequence-number", std::to_string(sequence_number)},
        {"format-version", "2"}};
    meta.emplace_back("parent-snapshot-id",
                      parent_snapshot_id ? std::to_string(*parent_snapshot_id) : "null");
    return avro::write_container(manifest_file_schema(), meta, records);
}

std::vector<ManifestFile> read_manifest_list(const std::string& bytes) {
    std::vector<ManifestFile> out;
    for (const auto& r : avro::read_container(bytes).records) {
        ManifestFile m;
        m.manifest_path = r["manifest_path"].str();
        m.manifest_length = r["manifest_length"].integer();
        m.partition_spec_id = static_cast<std::int32_t>(r["partition_spec_id"].integer());
        // v1 lists have no content or sequence numbers: data, 0 (spec "Manifest Lists").
        m.content = r["content"].is_null() ? 0 : static_cast<std::int32_t>(r["content"].integer());
        m.sequence_number = r["sequence_number"].is_null() ? 0 : r["sequence_number"].integer();
        m.min_sequence_number =
            r["min_sequence_number"].is_null() ? 0 : r["min_sequence_number"].integer();
        m.added_snapshot_id = r["added_snapshot_id"].integer();
        // v1 writers used the *_data_files_count names for the same field ids.
        auto count = [&](const char* v2, const char* v1) -> std::int64_t {
            const auto& a = r[v2];
            if (!a.is_null()) return a.integer();
            const auto& b = r[v1];
            return b.is_null() ? 0 : b.integer();
        };
        m.added_files_count =
            static_cast<std::int32_t>(count("added_files_count", "added_data_files_count"));
        m.existing_files_count =
            static_cast<std::int32_t>(count("existing_files_count", "existing_data_files_count"));
        m.deleted_files_count =
            static_cast<std::int32_t>(count("deleted_files_count", "deleted_data_files_count"));
        m.added_rows_count = count("added_rows_count", "added_rows_count");
        m.existing_rows_count = count("existing_rows_count", "existing_rows_count");
        m.deleted_rows_count = count("deleted_rows_count", "deleted_rows_count");
        for (const auto& p : r["partitions"].items()) {
            PartitionSummary s;
            s.contains_null = p["contains_null"].boolean();
            if (!p["contains_nan"].is_null()) s.contains_nan = p["contains_nan"].boolean();
            s.lower_bound = opt_str(p["lower_bound"]);
            s.upper_bound = opt_str(p["upper_bound"]);
            m.partitions.push_back(s);
        }
        m.key_metadata = opt_str(r["key_metadata"]);
        out.push_back(std::move(m));
    }
    return out;
}

}  // namespace trackd::archive
