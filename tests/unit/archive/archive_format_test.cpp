// The archive's file formats without services: Avro encoding and containers, Iceberg manifests
// and manifest lists, bounds serialisation, the day transform, WKB, and a Parquet file's field
// ids and GeoParquet metadata read back through Arrow.
#include <cstring>
#include <filesystem>

#include <arrow/util/key_value_metadata.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <parquet/file_reader.h>
#include <parquet/metadata.h>
#include <parquet/schema.h>

#include "avro.hpp"
#include "manifest.hpp"
#include "parquet_file_writer.hpp"
#include "table_schema.hpp"

namespace trackd::archive {
namespace {

std::string hex(const std::string& s) {
    std::string out;
    for (const unsigned char c : s) {
        constexpr const char* digits = "0123456789abcdef";
        out += digits[c >> 4];
        out += digits[c & 15];
    }
    return out;
}

TEST(Avro, ZigZagVarintsMatchTheSpecExamples) {
    // Avro spec, "Binary Encoding": 0 -> 00, -1 -> 01, 1 -> 02, -2 -> 03, 64 -> 80 01.
    const std::pair<std::int64_t, std::string> cases[] = {
        {0, "00"}, {-1, "01"}, {1, "02"}, {-2, "03"}, {2, "04"}, {-64, "7f"}, {64, "8001"}};
    for (const auto& [v, want] : cases) {
        std::string out;
        avro::write_long(out, v);
        EXPECT_EQ(hex(out), want) << v;
        std::size_t pos = 0;
        EXPECT_EQ(avro::read_long(out, pos), v);
    }
    std::string big;
    avro::write_long(big, std::numeric_limits<std::int64_t>::min());
    std::size_t pos = 0;
    EXPECT_EQ(avro::read_long(big, pos), std::numeric_limits<std::int64_t>::min());
}

TEST(Avro, ContainerKeepsTheSchemaTextAndRoundTrips) {
    const std::string schema =
        R"({"type":"record","name":"r","fields":[{"name":"a","type":"long","field-id":7},)"
        R"({"name":"b","type":["null",{"type":"int","logicalType":"date"}],"default":null,"field-id":8},)"
        R"({"name":"c","type":{"type":"array","items":"string","element-id":9},"field-id":10}]})";
    std::vector<avro::Value> records = {
        avro::Value(avro::Value::Fields{{"a", std::int64_t{-5}},
                                        {"b", 19000},
                                        {"c", avro::Value(avro::Value::Items{"x", "yz"})}}),
        avro::Value(avro::Value::Fields{{"a", std::int64_t{1} << 40}, {"b", std::nullopt}})};
    const auto file = avro::write_container(schema, {{"format-version", "2"}}, records);
    const auto c = avro::read_container(file);
    EXPECT_EQ(c.metadata.at("avro.schema"), schema) << "field-id and logicalType must survive";
    EXPECT_EQ(c.metadata.at("avro.codec"), "null");
    EXPECT_EQ(c.metadata.at("format-version"), "2");
    ASSERT_EQ(c.records.size(), 2U);
    EXPECT_EQ(c.records[0]["a"].integer(), -5);
    EXPECT_EQ(c.records[0]["b"].integer(), 19000);
    ASSERT_EQ(c.records[0]["c"].items().size(), 2U);
    EXPECT_EQ(c.records[0]["c"].items()[1].str(), "yz");
    EXPECT_EQ(c.records[1]["a"].integer(), std::int64_t{1} << 40);
    EXPECT_TRUE(c.records[1]["b"].is_null());
    EXPECT_TRUE(c.records[1]["c"].items().empty());
}

TEST(Manifest, SchemasCarryEveryFieldId) {
    for (const auto* text : {&manifest_entry_schema(), &manifest_file_schema()}) {
        const auto j = nlohmann::json::parse(*text);
        int missing = 0;
        std::function<void(const nlohmann::json&)> walk = [&](const nlohmann::json& node) {
            if (node.is_array()) {
                for (const auto& b : node) walk(b);
            } else if (node.is_object() && node.value("type", "") == "record") {
                for (const auto& f : node["fields"]) {
                    if (!f.contains("field-id")) ++missing;
                    if (f["type"].is_array() && f["type"][0] == "null") {
                        EXPECT_TRUE(f.contains("default") && f["default"].is_null()) << f.dump();
                    }
                    walk(f["type"]);
                }
            } else if (node.is_object() && node.value("type", "") == "array") {
                walk(node["items"]);
            }
        };
        walk(j);
        EXPECT_EQ(missing, 0) << *text;
    }
    EXPECT_EQ(nlohmann::json::parse(manifest_entry_schema())["name"], "manifest_entry");
    EXPECT_EQ(nlohmann::json::parse(manifest_file_schema())["name"], "manifest_file");
    EXPECT_NE(manifest_entry_schema().find(R"("name":"r2")"), std::string::npos);
    EXPECT_NE(manifest_entry_schema().find(R"("name":"r102")"), std::string::npos);
}

TEST(Manifest, ManifestAndListRoundTrip) {
    DataFile f;
    f.path = "file:///w/data/a.parquet";
    f.partition = 20000;
    f.record_count = 42;
    f.file_size_in_bytes = 1234;
    f.value_counts[1] = 42;
    f.lower_bounds[2] = long_bound(7);
    f.upper_bounds[2] = long_bound(9);
    f.split_offsets = {4};
    const auto bytes = write_manifest({added_entry(f, 99)});
    const auto c = avro::read_container(bytes);
    for (const char* key : {"schema", "schema-id", "partition-spec", "partition-spec-id"}) {
        EXPECT_EQ(c.metadata.count(key), 1U) << key;
    }
    EXPECT_EQ(c.metadata.at("format-version"), "2");
    EXPECT_EQ(c.metadata.at("content"), "data");
    const auto entries = read_manifest(bytes);
    ASSERT_EQ(entries.size(), 1U);
    const auto& e = entries[0];
    EXPECT_EQ(e["status"].integer(), 1);
    EXPECT_EQ(e["snapshot_id"].integer(), 99);
    EXPECT_TRUE(e["sequence_number"].is_null()) << "inherited from the manifest list";
    EXPECT_EQ(e["data_file"]["file_path"].str(), f.path);
    EXPECT_EQ(e["data_file"]["file_format"].str(), "PARQUET");
    EXPECT_EQ(e["data_file"]["partition"]["recorded_at_day"].integer(), 20000);
    EXPECT_EQ(e["data_file"]["record_count"].integer(), 42);

    auto m = summarize_manifest(entries);
    EXPECT_EQ(m.added_files_count, 1);
    EXPECT_EQ(m.added_rows_count, 42);
    ASSERT_EQ(m.partitions.size(), 1U);
    EXPECT_EQ(*m.partitions[0].lower_bound, int_bound(20000));
    m.manifest_path = "file:///w/metadata/m.avro";
    m.manifest_length = static_cast<std::int64_t>(bytes.size());
    m.sequence_number = 3;
    m.min_sequence_number = 3;
    m.added_snapshot_id = 99;
    const auto list = write_manifest_list({m}, 99, 98, 3);
    EXPECT_EQ(avro::read_container(list).metadata.at("parent-snapshot-id"), "98");
    const auto back = read_manifest_list(list);
    ASSERT_EQ(back.size(), 1U);
    EXPECT_EQ(back[0].manifest_path, m.manifest_path);
    EXPECT_EQ(back[0].sequence_number, 3);
    EXPECT_EQ(back[0].added_rows_count, 42);
    EXPECT_EQ(*back[0].partitions[0].upper_bound, int_bound(20000));
}

TEST(TableFormat, BoundsDayTransformAndWkb) {
    EXPECT_EQ(hex(int_bound(1)), "01000000");
    EXPECT_EQ(hex(long_bound(-2)), "feffffffffffffff");
    EXPECT_EQ(hex(double_bound(1.0)), "000000000000f03f");
    EXPECT_EQ(day_of(0), 0);
    EXPECT_EQ(day_of(86400LL * 1000000 - 1), 0);
    EXPECT_EQ(day_of(-1), -1) << "floor, not truncation, before 1970";
    EXPECT_EQ(day_of(1764460800LL * 1000000), 20422);  // 2025-12-01
    EXPECT_EQ(hex(point_z_wkb(1.0, 2.0, 0.0)),
              "01e9030000000000000000f03f00000000000000400000000000000000");
    const auto schema = nlohmann::json::parse(schema_json());
    EXPECT_EQ(schema["fields"].size(), 14U);
    EXPECT_EQ(nlohmann::json::parse(partition_spec_json())["fields"][0]["transform"], "day");
}

TEST(ParquetFileWriter, FieldIdsGeoMetadataAndMetrics) {
    const auto path =
        ::testing::TempDir() + "archive-unit-" + std::to_string(getpid()) + ".parquet";
    FileIO io{S3Settings{}};
    ParquetFileWriter w(io, "file://" + path, 20000);
    for (int i = 0; i < 3; ++i) {
        ArchiveRow r;
        r.vehicle_id = "veh-" + std::to_string(i);
        r.recorded_at_us = 1000000LL * i;
        r.longitude = 13.0 + i;
        r.latitude = 52.0 - i;
        r.altitude = 0;
        if (i != 1) r.speed_kmh = 10.0F * static_cast<float>(i);
        r.kafka_partition = 2;
        r.kafka_offset = 100 + i;
        r.ingest_batch_id = 7;
        w.append(r);
    }
    const auto f = w.finish();
    EXPECT_EQ(f.record_count, 3);
    EXPECT_EQ(f.file_size_in_bytes, static_cast<std::int64_t>(std::filesystem::file_size(path)));
    EXPECT_EQ(f.null_value_counts.at(field_id::speed_kmh), 1);
    EXPECT_EQ(f.lower_bounds.at(field_id::vehicle_id), "veh-0");
    EXPECT_EQ(f.upper_bounds.at(field_id::longitude), double_bound(15.0));
    EXPECT_EQ(f.lower_bounds.at(field_id::latitude), double_bound(50.0));
    EXPECT_EQ(f.split_offsets.size(), 1U);
    EXPECT_EQ(f.column_sizes.size(), 17U) << "one per leaf column";

    auto reader = parquet::ParquetFileReader::OpenFile(path);
    const auto meta = reader->metadata();
    const auto* schema = meta->schema();
    for (int c = 0; c < schema->num_columns(); ++c) {
        EXPECT_GT(schema->Column(c)->schema_node()->field_id(), 0) << schema->Column(c)->name();
    }
    const auto kv = meta->key_value_metadata();
    ASSERT_NE(kv, nullptr);
    const auto geo = kv->Get("geo");
    ASSERT_TRUE(geo.ok());
    const auto j = nlohmann::json::parse(*geo);
    EXPECT_EQ(j["version"], "1.1.0");
    EXPECT_EQ(j["primary_column"], "geometry");
    EXPECT_EQ(j["columns"]["geometry"]["encoding"], "WKB");
    EXPECT_EQ(j["columns"]["geometry"]["bbox"], nlohmann::json::parse("[13.0,50.0,15.0,52.0]"));
    EXPECT_EQ(j["columns"]["geometry"]["covering"]["bbox"]["xmin"],
              nlohmann::json::parse(R"(["bbox","xmin"])"));
    std::filesystem::remove(path);
}

}  // namespace
}  // namespace trackd::archive
