#include "parquet_file_writer.hpp"

#include <algorithm>
#include <cstring>
#include <limits>

#include <arrow/api.h>
#include <arrow/io/file.h>
#include <fmt/format.h>
#include <parquet/arrow/writer.h>
#include <parquet/file_writer.h>
#include <parquet/properties.h>

#include "table_schema.hpp"

namespace trackd::archive {
namespace {

// Rows per row group: small enough to bound memory (about 10 MB of builders), large enough for
// good compression and few footer entries.
constexpr std::int64_t kRowGroupRows = 128LL * 1024;

void check(const arrow::Status& s, const char* what) {
    if (!s.ok()) throw std::runtime_error(std::string("parquet: ") + what + ": " + s.ToString());
}
template <class T>
T check(arrow::Result<T> r, const char* what) {
    check(r.status(), what);
    return std::move(r).ValueUnsafe();
}

std::shared_ptr<arrow::Field> field(const char* name, std::shared_ptr<arrow::DataType> type,
                                    bool nullable, int id) {
    return arrow::field(name, std::move(type), nullable,
                        arrow::key_value_metadata({"PARQUET:field_id"}, {std::to_string(id)}));
}

std::shared_ptr<arrow::Schema> arrow_schema() {
    using namespace field_id;
    auto bbox_type = arrow::struct_({field("xmin", arrow::float64(), false, bbox_xmin),
                                     field("ymin", arrow::float64(), false, bbox_ymin),
                                     field("xmax", arrow::float64(), false, bbox_xmax),
                                     field("ymax", arrow::float64(), false, bbox_ymax)});
    return arrow::schema({
        field("vehicle_id", arrow::utf8(), false, vehicle_id),
        field("recorded_at", arrow::timestamp(arrow::TimeUnit::MICRO, "UTC"), false, recorded_at),
        field("longitude", arrow::float64(), false, longitude),
        field("latitude", arrow::float64(), false, latitude),
        field("altitude", arrow::float64(), false, altitude),
        field("geometry", arrow::binary(), false, geometry),
        field("bbox", bbox_type, false, bbox),
        field("speed_kmh", arrow::float32(), true, speed_kmh),
        field("heading_deg", arrow::float32(), true, heading_deg),
        field("accuracy_m", arrow::float32(), true, accuracy_m),
        field("attributes", arrow::utf8(), true, attributes),
        field("kafka_partition", arrow::int32(), false, kafka_partition),
        field("kafka_offset", arrow::int64(), false, kafka_offset),
        field("ingest_batch_id", arrow::int64(), false, ingest_batch_id),
    });
}

// Running min/max of one column, for the manifest's bounds.
template <class T>
struct Range {
    std::optional<T> lo;
    std::optional<T> hi;
    void add(const T& v) {
        if (!lo || v < *lo) lo = v;
        if (!hi || *hi < v) hi = v;
    }
};

// -0.0 and +0.0 compare equal; the spec requires a lower bound of -0.0 and an upper bound of
// +0.0 whenever zero is a value, which always holds for these choices.
std::string lower_double(double v) { return double_bound(v == 0.0 ? -0.0 : v); }
std::string upper_double(double v) { return double_bound(v == 0.0 ? 0.0 : v); }

}  // namespace

std::string point_z_wkb(double x, double y, double z) {
    std::string out(29, '\0');
    out[0] = 1;                       // little-endian
    const std::uint32_t type = 1001;  // ISO WKB Point Z
    std::memcpy(out.data() + 1, &type, 4);
    std::memcpy(out.data() + 5, &x, 8);
    std::memcpy(out.data() + 13, &y, 8);
    std::memcpy(out.data() + 21, &z, 8);
    return out;
}

struct ParquetFileWriter::Impl {
    FileIO* io = nullptr;
    std::string uri;
    std::int32_t day;
    std::shared_ptr<arrow::Schema> schema = arrow_schema();
    std::shared_ptr<arrow::io::OutputStream> sink;
    bool finished = false;
    std::unique_ptr<parquet::arrow::FileWriter> writer;

    arrow::StringBuilder vehicle_id;
    arrow::TimestampBuilder recorded_at{arrow::timestamp(arrow::TimeUnit::MICRO, "UTC"),
                                        arrow::default_memory_pool()};
    arrow::DoubleBuilder longitude, latitude, altitude;
    arrow::BinaryBuilder geometry;
    std::shared_ptr<arrow::StructBuilder> bbox;
    arrow::FloatBuilder speed, heading, accuracy;
    arrow::StringBuilder attributes;
    arrow::Int32Builder kafka_partition;
    arrow::Int64Builder kafka_offset, ingest_batch_id;

    std::int64_t buffered = 0;
    std::int64_t total = 0;
    std::int64_t null_speed = 0, null_heading = 0, null_accuracy = 0, null_attributes = 0;
    std::int64_t buffered_bytes = 0;
    Range<std::string> r_vehicle;
    Range<std::int64_t> r_time, r_offset, r_batch;
    Range<double> r_lon, r_lat, r_alt;
    Range<std::int32_t> r_partition;

    void flush() {
        if (buffered == 0) return;
        std::vector<std::shared_ptr<arrow::Array>> columns;
        auto finish = [&](arrow::ArrayBuilder& b) {
            columns.push_back(check(b.Finish(), "finish column"));
        };
        finish(vehicle_id);
        finish(recorded_at);
        finish(longitude);
        finish(latitude);
        finish(altitude);
        finish(geometry);
        finish(*bbox);
        finish(speed);
        finish(heading);
        finish(accuracy);
        finish(attributes);
        finish(kafka_partition);
        finish(kafka_offset);
        finish(ingest_batch_id);
        auto table = arrow::Table::Make(schema, columns, buffered);
        // One call, one row group: the file size is then known after every flush.
        check(writer->WriteTable(*table, kRowGroupRows), "write row group");
        buffered = 0;
        buffered_bytes = 0;
    }
};

ParquetFileWriter::ParquetFileWriter(FileIO& io, std::string uri, std::int32_t partition)
    : impl_(std::make_unique<Impl>()) {
    auto& m = *impl_;
    m.io = &io;
    m.uri = std::move(uri);
    m.day = partition;
    m.bbox = std::make_shared<arrow::StructBuilder>(
        m.schema->field(6)->type(), arrow::default_memory_pool(),
        std::vector<std::shared_ptr<arrow::ArrayBuilder>>{
            std::make_shared<arrow::DoubleBuilder>(), std::make_shared<arrow::DoubleBuilder>(),
            std::make_shared<arrow::DoubleBuilder>(), std::make_shared<arrow::DoubleBuilder>()});
    m.sink = m.io->open_output(m.uri);
    // zstd, as Iceberg's own writers default to; every reader the archive targets has it.
    auto props = parquet::WriterProperties::Builder()
                     .compression(parquet::Compression::ZSTD)
                     ->max_row_group_length(kRowGroupRows)
                     ->created_by("trackd")
                     ->build();
    m.writer =
        check(parquet::arrow::FileWriter::Open(*m.schema, arrow::default_memory_pool(), m.sink,
                                               props, parquet::default_arrow_writer_properties()),
              "open parquet writer");
}

ParquetFileWriter::~ParquetFileWriter() {
    // Abandoned (an exception before finish()): abort the stream first, so that the Parquet
    // writer's destructor cannot complete it: on S3 the upload is aborted and no object appears.
    if (impl_ && impl_->sink && !impl_->finished && !impl_->sink->closed()) {
        static_cast<void>(impl_->sink->Abort());
    }
}

void ParquetFileWriter::append(const ArchiveRow& r) {
    auto& m = *impl_;
    check(m.vehicle_id.Append(r.vehicle_id), "append");
    check(m.recorded_at.Append(r.recorded_at_us), "append");
    check(m.longitude.Append(r.longitude), "append");
    check(m.latitude.Append(r.latitude), "append");
    check(m.altitude.Append(r.altitude), "append");
    check(m.geometry.Append(point_z_wkb(r.longitude, r.latitude, r.altitude)), "append");
    check(m.bbox->Append(), "append");
    for (int i = 0; i < 4; ++i) {
        auto* child = static_cast<arrow::DoubleBuilder*>(m.bbox->child(i));
        check(child->Append(i % 2 == 0 ? r.longitude : r.latitude), "append");
    }
    auto opt_float = [](arrow::FloatBuilder& b, const std::optional<float>& v, std::int64_t& n) {
        if (v) {
            check(b.Append(*v), "append");
        } else {
            check(b.AppendNull(), "append");
            ++n;
        }
    };
    opt_float(m.speed, r.speed_kmh, m.null_speed);
    opt_float(m.heading, r.heading_deg, m.null_heading);
    opt_float(m.accuracy, r.accuracy_m, m.null_accuracy);
    if (r.attributes) {
        check(m.attributes.Append(*r.attributes), "append");
    } else {
        check(m.attributes.AppendNull(), "append");
        ++m.null_attributes;
    }
    check(m.kafka_partition.Append(r.kafka_partition), "append");
    check(m.kafka_offset.Append(r.kafka_offset), "append");
    check(m.ingest_batch_id.Append(r.ingest_batch_id), "append");

    m.r_vehicle.add(r.vehicle_id);
    m.r_time.add(r.recorded_at_us);
    m.r_lon.add(r.longitude);
    m.r_lat.add(r.latitude);
    m.r_alt.add(r.altitude);
    m.r_partition.add(r.kafka_partition);
    m.r_offset.add(r.kafka_offset);
    m.r_batch.add(r.ingest_batch_id);
    ++m.buffered;
    ++m.total;
    // A rough compressed size of the buffered rows, so files roll near their target.
    m.buffered_bytes += 24 + static_cast<std::int64_t>(r.vehicle_id.size() / 4) +
                        (r.attributes ? static_cast<std::int64_t>(r.attributes->size() / 4) : 0);
    if (m.buffered >= kRowGroupRows) m.flush();
}

std::int64_t ParquetFileWriter::approximate_bytes() const {
    const auto written = impl_->sink->Tell();
    return (written.ok() ? *written : 0) + impl_->buffered_bytes;
}

std::int64_t ParquetFileWriter::rows() const { return impl_->total; }

DataFile ParquetFileWriter::finish() {
    auto& m = *impl_;
    m.flush();
    // GeoParquet 1.1: WKB encoding, no crs (= OGC:CRS84, i.e. WGS 84 longitude/latitude, what
    // EPSG:4326 stores in PostGIS), the file's bbox, and the bbox struct column as covering.
    const std::string geo =
        fmt::format(R"({{"version":"1.1.0","primary_column":"geometry","columns":{{"geometry":{{)"
                    R"("encoding":"WKB","geometry_types":["Point Z"],"bbox":[{},{},{},{}],)"
                    R"("covering":{{"bbox":{{"xmin":["bbox","xmin"],"ymin":["bbox","ymin"],)"
                    R"("xmax":["bbox","xmax"],"ymax":["bbox","ymax"]}}}}}}}}}})",
                    m.r_lon.lo.value_or(0), m.r_lat.lo.value_or(0), m.r_lon.hi.value_or(0),
                    m.r_lat.hi.value_or(0));
    check(m.writer->AddKeyValueMetadata(arrow::key_value_metadata({"geo"}, {geo})),
          "add geo metadata");
    check(m.writer->Close(), "close parquet writer");
    const auto meta = m.writer->metadata();
    check(m.sink->Close(), "close data file");
    m.finished = true;
    // Durable (and on S3: uploaded whole) before any manifest names it.
    const auto size = m.io->sync_size(m.uri);

    DataFile f;
    f.path = m.uri;
    f.partition = m.day;
    f.record_count = m.total;
    f.file_size_in_bytes = size;
    const auto* schema = meta->schema();
    for (int rg = 0; rg < meta->num_row_groups(); ++rg) {
        const auto group = meta->RowGroup(rg);
        f.split_offsets.push_back(group->file_offset());
        for (int c = 0; c < group->num_columns(); ++c) {
            const int id = schema->Column(c)->schema_node()->field_id();
            f.column_sizes[id] += group->ColumnChunk(c)->total_compressed_size();
        }
    }
    using namespace field_id;
    for (const int id : {vehicle_id, recorded_at, longitude, latitude, altitude, geometry,
                         bbox_xmin, bbox_ymin, bbox_xmax, bbox_ymax, speed_kmh, heading_deg,
                         accuracy_m, attributes, kafka_partition, kafka_offset, ingest_batch_id}) {
        f.value_counts[id] = m.total;
        f.null_value_counts[id] = 0;
    }
    f.null_value_counts[speed_kmh] = m.null_speed;
    f.null_value_counts[heading_deg] = m.null_heading;
    f.null_value_counts[accuracy_m] = m.null_accuracy;
    f.null_value_counts[attributes] = m.null_attributes;
    for (const int id : {longitude, latitude, altitude, bbox_xmin, bbox_ymin, bbox_xmax, bbox_ymax,
                         speed_kmh, heading_deg, accuracy_m}) {
        f.nan_value_counts[id] = 0;  // validation refuses NaN before PostGIS
    }
    if (m.total > 0) {
        // Bounds only where the single-value serialisation is exact: UTF-8 bytes (full value,
        // not truncated), little-endian int, long, timestamptz (µs) and double.
        f.lower_bounds[vehicle_id] = *m.r_vehicle.lo;
        f.upper_bounds[vehicle_id] = *m.r_vehicle.hi;
        f.lower_bounds[recorded_at] = long_bound(*m.r_time.lo);
        f.upper_bounds[recorded_at] = long_bound(*m.r_time.hi);
        f.lower_bounds[longitude] = lower_double(*m.r_lon.lo);
        f.upper_bounds[longitude] = upper_double(*m.r_lon.hi);
        f.lower_bounds[latitude] = lower_double(*m.r_lat.lo);
        f.upper_bounds[latitude] = upper_double(*m.r_lat.hi);
        f.lower_bounds[kafka_partition] = int_bound(*m.r_partition.lo);
        f.upper_bounds[kafka_partition] = int_bound(*m.r_partition.hi);
        f.lower_bounds[kafka_offset] = long_bound(*m.r_offset.lo);
        f.upper_bounds[kafka_offset] = long_bound(*m.r_offset.hi);
        f.lower_bounds[ingest_batch_id] = long_bound(*m.r_batch.lo);
        f.upper_bounds[ingest_batch_id] = long_bound(*m.r_batch.hi);
    }
    return f;
}

}  // namespace trackd::archive
