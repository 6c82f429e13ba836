#include "manifest_writer.hpp"

#include <cerrno>
#include <cstring>
#include <iterator>
#include <stdexcept>

#include "protobuf_payload.hpp"

namespace trackd::fleet {
namespace {

constexpr std::size_t kDrainBytes = 1 << 18;

}  // namespace

ManifestWriter::ManifestWriter(const std::string& path, bool protobuf)
    : path_(path), protobuf_(protobuf) {
    file_ = std::fopen(path.c_str(), "w");
    if (file_ == nullptr) {
        throw std::runtime_error(
            fmt::format("--manifest: cannot open '{}': {}", path, std::strerror(errno)));
    }
}

ManifestWriter::~ManifestWriter() {
    if (file_ != nullptr) std::fclose(file_);
}

void ManifestWriter::write(std::int32_t partition, std::int64_t offset, const KindSpec& kind,
                           std::string_view vehicle_id,
                           std::optional<std::int64_t> recorded_at_ms) {
    auto out = std::back_inserter(buffer_);
    const auto reason =
        protobuf_ ? expected_protobuf_reason_code(kind) : expected_reason_code(kind);
    if (recorded_at_ms) {
        fmt::format_to(out, "{},{},{},{},{},{}\n", partition, offset, kind.name, reason, vehicle_id,
                       *recorded_at_ms * 1000);
    } else {
        fmt::format_to(out, "{},{},{},{},{},\n", partition, offset, kind.name, reason, vehicle_id);
    }
    if (buffer_.size() >= kDrainBytes) drain();
}

void ManifestWriter::drain() {
    if (buffer_.size() > 0 &&
        std::fwrite(buffer_.data(), 1, buffer_.size(), file_) != buffer_.size()) {
        failed_ = true;
    }
    buffer_.clear();
}

void ManifestWriter::close() {
    if (file_ == nullptr) return;
    drain();
    const bool flush_failed = std::fflush(file_) != 0;
    const bool close_failed = std::fclose(file_) != 0;
    file_ = nullptr;
    if (failed_ || flush_failed || close_failed) {
        throw std::runtime_error(fmt::format("--manifest: writing '{}' failed", path_));
    }
}

}  // namespace trackd::fleet
