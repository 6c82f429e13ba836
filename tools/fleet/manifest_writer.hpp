// The manifest: one CSV line per delivered message, so tests can compare what trackd stored
// with what was sent, exactly.
//
// Format (no header): partition,offset,kind,expected_reason,vehicle_id,recorded_at_us
// expected_reason is empty for accepted kinds; recorded_at_us is empty when the payload has no
// parseable timestamp. Lines are in delivery-report order, not send order. Not thread-safe.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "message_kinds.hpp"

namespace trackd::fleet {

class ManifestWriter {
  public:
    // Opens (truncates) path; throws std::runtime_error when it cannot.
    // `protobuf`: the messages are Protobuf (expected reasons as protobuf_payload.hpp says).
    explicit ManifestWriter(const std::string& path, bool protobuf = false);
    ~ManifestWriter();
    ManifestWriter(const ManifestWriter&) = delete;
    ManifestWriter& operator=(const ManifestWriter&) = delete;

    void write(std::int32_t partition, std::int64_t offset, const KindSpec& kind,
               std::string_view vehicle_id, std::optional<std::int64_t> recorded_at_ms);

    // Flushes and closes; throws std::runtime_error on a write error.
    void close();

  private:
    void drain();

    std::string path_;
    std::FILE* file_ = nullptr;
    fmt::memory_buffer buffer_;
    bool protobuf_ = false;
    bool failed_ = false;
};

}  // namespace trackd::fleet
