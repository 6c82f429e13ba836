// Writes one Parquet data file of the archive table (Apache Arrow C++; only this area links it).
//
// Every column carries its Iceberg field id (PARQUET:field_id), the file carries GeoParquet 1.1
// `geo` metadata for `geometry` with the `bbox` struct column as its covering, and the metrics the
// manifest needs are gathered while rows are appended. Rows must arrive in the table's sort order
// (vehicle_id, recorded_at); the caller sorts. One writer per file, one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "file_io.hpp"
#include "manifest.hpp"

namespace arrow::io {
class OutputStream;
}

namespace trackd::archive {

// One history row as the archive reads it from PostGIS.
struct ArchiveRow {
    std::string vehicle_id;
    std::int64_t recorded_at_us = 0;  // since the Unix epoch, UTC
    double longitude = 0;
    double latitude = 0;
    double altitude = 0;
    std::optional<float> speed_kmh;
    std::optional<float> heading_deg;
    std::optional<float> accuracy_m;
    std::optional<std::string> attributes;  // JSON object text
    std::int32_t kafka_partition = 0;
    std::int64_t kafka_offset = 0;
    std::int64_t ingest_batch_id = 0;
};

// ISO WKB of a Point Z (little-endian, type 1001): what the geometry column holds.
std::string point_z_wkb(double x, double y, double z);

class ParquetFileWriter {
  public:
    // Writes `uri` through `io` as a stream (local: a file, fsynced at finish; S3: an upload
    // in parts, completed at finish, so the object appears whole), which is what the manifest
    // records. `partition`: the partition value (day or hour of recorded_at) of every row.
    ParquetFileWriter(FileIO& io, std::string uri, std::int32_t partition);
    ~ParquetFileWriter();
    ParquetFileWriter(const ParquetFileWriter&) = delete;
    ParquetFileWriter& operator=(const ParquetFileWriter&) = delete;

    void append(const ArchiveRow& row);
    // Bytes in the file so far (complete row groups) plus an estimate of the buffered rows.
    [[nodiscard]] std::int64_t approximate_bytes() const;
    [[nodiscard]] std::int64_t rows() const;
    // Flushes, writes the footer, closes and makes the file durable (fsync, or the upload
    // completed); returns the manifest's view of the file.
    DataFile finish();

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace trackd::archive
