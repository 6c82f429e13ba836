// The schemas of framed Protobuf messages, by registry schema id, and whether each can be read
// as trackd.v1.Position (libprotobuf parses the .proto text or the FileDescriptorProto). The
// only user of libprotobuf's descriptors in trackd.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "trackd/core/rejection.hpp"

namespace google::protobuf {
class DescriptorPool;
class FileDescriptor;
}  // namespace google::protobuf

namespace trackd::decode {

struct SchemaVerdict {
    std::optional<core::Reason> reason;  // none: compatible
    std::string detail;
};

class SchemaCatalog {
  public:
    SchemaCatalog();
    ~SchemaCatalog();
    SchemaCatalog(SchemaCatalog&&) noexcept;
    SchemaCatalog& operator=(SchemaCatalog&&) noexcept;

    // The verdict for the message at `path` of schema `id`, or nullptr when the id has no
    // answer yet. Stays valid until the next add().
    const SchemaVerdict* verdict(std::uint32_t id, std::span<const int> path);
    void add(std::uint32_t id, std::string_view registry_answer);
    void add_unknown(std::uint32_t id, std::string detail);
    void forget(std::uint32_t id);
    [[nodiscard]] bool has(std::uint32_t id) const { return entries_.count(id) != 0; }

  private:
    struct Entry;
    std::unordered_map<std::uint32_t, std::unique_ptr<Entry>> entries_;
};

}  // namespace trackd::decode
