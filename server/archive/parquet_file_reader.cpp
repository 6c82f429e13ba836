#include "parquet_file_reader.hpp"

#include <arrow/api.h>
#include <arrow/io/file.h>
#include <parquet/arrow/reader.h>

namespace trackd::archive {
namespace {

void check(const arrow::Status& s, const std::string& what) {
    if (!s.ok()) throw std::runtime_error("parquet: " + what + ": " + s.ToString());
}
template <class T>
T check(arrow::Result<T> r, const std::string& what) {
    check(r.status(), what);
    return std::move(r).ValueUnsafe();
}

template <class A>
std::shared_ptr<A> column(const arrow::Table& t, const char* name, const std::string& path) {
    const auto c = t.GetColumnByName(name);
    if (!c) throw std::runtime_error("parquet: " + path + " has no column " + name);
    // One chunk: CombineChunks below.
    return std::static_pointer_cast<A>(c->chunk(0));
}

}  // namespace

std::vector<ArchiveRow> read_archive_rows(FileIO& io, const std::string& path) {
    auto file = io.open_input(path);
    auto reader =
        check(parquet::arrow::OpenFile(file, arrow::default_memory_pool()), "read " + path);
    auto table = check(reader->ReadTable(), "read " + path);
    table = check(table->CombineChunks(), "combine " + path);
    std::vector<ArchiveRow> rows(static_cast<std::size_t>(table->num_rows()));
    if (rows.empty()) return rows;
    const auto vehicle = column<arrow::StringArray>(*table, "vehicle_id", path);
    const auto time = column<arrow::TimestampArray>(*table, "recorded_at", path);
    const auto lon = column<arrow::DoubleArray>(*table, "longitude", path);
    const auto lat = column<arrow::DoubleArray>(*table, "latitude", path);
    const auto alt = column<arrow::DoubleArray>(*table, "altitude", path);
    const auto speed = column<arrow::FloatArray>(*table, "speed_kmh", path);
    const auto heading = column<arrow::FloatArray>(*table, "heading_deg", path);
    const auto accuracy = column<arrow::FloatArray>(*table, "accuracy_m", path);
    const auto attributes = column<arrow::StringArray>(*table, "attributes", path);
    const auto kpart = column<arrow::Int32Array>(*table, "kafka_partition", path);
    const auto koff = column<arrow::Int64Array>(*table, "kafka_offset", path);
    const auto batch = column<arrow::Int64Array>(*table, "ingest_batch_id", path);
    const auto opt = [](const arrow::FloatArray& a, std::int64_t i) -> std::optional<float> {
        if (a.IsNull(i)) return std::nullopt;
        return a.Value(i);
    };
    for (std::int64_t i = 0; i < table->num_rows(); ++i) {
        auto& r = rows[static_cast<std::size_t>(i)];
        r.vehicle_id = vehicle->GetString(i);
        r.recorded_at_us = time->Value(i);
        r.longitude = lon->Value(i);
        r.latitude = lat->Value(i);
        r.altitude = alt->Value(i);
        r.speed_kmh = opt(*speed, i);
        r.heading_deg = opt(*heading, i);
        r.accuracy_m = opt(*accuracy, i);
        if (!attributes->IsNull(i)) r.attributes = attributes->GetString(i);
        r.kafka_partition = kpart->Value(i);
        r.kafka_offset = koff->Value(i);
        r.ingest_batch_id = batch->Value(i);
    }
    return rows;
}

}  // namespace trackd::archive
