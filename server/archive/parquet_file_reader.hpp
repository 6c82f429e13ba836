// Reads the rows of one of the archive's Parquet data files back (Apache Arrow C++), for
// compaction: every column trackd writes except the derived ones (geometry and bbox come from
// longitude, latitude, altitude again when the rows are written anew).
#pragma once

#include <string>
#include <vector>

#include "file_io.hpp"
#include "parquet_file_writer.hpp"

namespace trackd::archive {

// Throws std::runtime_error when the file cannot be read or lacks a column.
std::vector<ArchiveRow> read_archive_rows(FileIO& io, const std::string& path);

}  // namespace trackd::archive
