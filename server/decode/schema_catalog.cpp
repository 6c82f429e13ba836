#include "schema_catalog.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <google/protobuf/compiler/parser.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <simdjson.h>

#include "trackd/decode/protobuf_decoder.hpp"
#include "trackd/v1/position.pb.h"

#include "text.hpp"

namespace trackd::decode {
namespace {

namespace pb = google::protobuf;
using core::Reason;

class TextErrors final : public pb::io::ErrorCollector {
  public:
    void AddError(int line, pb::io::ColumnNumber column, const std::string& message) override {
        if (first.empty()) first = fmt::format("line {}:{}: {}", line + 1, column + 1, message);
    }
    std::string first;
};

class BuildErrors final : public pb::DescriptorPool::ErrorCollector {
  public:
    void AddError(const std::string& /*filename*/, const std::string& element_name,
                  const pb::Message* /*descriptor*/, ErrorLocation /*location*/,
                  const std::string& message) override {
        if (first.empty()) first = element_name.empty() ? message : element_name + ": " + message;
    }
    std::string first;
};

int base64_value(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62;
    if (c == '/' || c == '_') return 63;
    return -1;
}

// Standard or URL-safe base64, padding optional; nullopt when `s` is not base64.
std::optional<std::string> decode_base64(std::string_view s) {
    while (!s.empty() && s.back() == '=') s.remove_suffix(1);
    if (s.empty() || s.size() % 4 == 1) return std::nullopt;
    std::string out;
    out.reserve(s.size() * 3 / 4);
    std::uint32_t acc = 0;
    int bits = 0;
    for (const char c : s) {
        const int v = base64_value(c);
        if (v < 0) return std::nullopt;
        acc = (acc << 6) | static_cast<std::uint32_t>(v);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out += static_cast<char>((acc >> bits) & 0xFF);
        }
    }
    return out;
}

const char* type_name(const pb::FieldDescriptor& f) {
    if (f.is_map()) return "map";
    return f.type_name();
}

// Why the message `m` cannot be read as trackd.v1.Position, or "".
std::string incompatibility(const pb::Descriptor& m) {
    const pb::Descriptor& ref = *trackd::v1::Position::descriptor();
    for (int i = 0; i < ref.field_count(); ++i) {
        const pb::FieldDescriptor& want = *ref.field(i);
        const pb::FieldDescriptor* have = m.FindFieldByNumber(want.number());
        const auto what =
            fmt::format("field {} ({} {})", want.number(), type_name(want), want.name());
        if (have == nullptr) {
            if (want.number() <= 2) {
                return fmt::format("message {} has no {}, which trackd requires", m.full_name(),
                                   what);
            }
            continue;
        }
        bool same = have->type() == want.type() && have->is_repeated() == want.is_repeated() &&
                    have->is_map() == want.is_map();
        if (same && want.type() == pb::FieldDescriptor::TYPE_MESSAGE) {
            if (want.is_map()) {
                const auto* hk = have->message_type()->map_key();
                const auto* hv = have->message_type()->map_value();
                const auto* wk = want.message_type()->map_key();
                const auto* wv = want.message_type()->map_value();
                same = hk->type() == wk->type() && hv->type() == wv->type();
            } else {
                same = have->message_type()->full_name() == want.message_type()->full_name();
            }
        }
        if (!same) {
            std::string have_type = have->is_repeated() && !have->is_map() ? "repeated " : "";
            have_type += type_name(*have);
            if (have->type() == pb::FieldDescriptor::TYPE_MESSAGE && !have->is_map()) {
                have_type += " " + have->message_type()->full_name();
            }
            return fmt::format("message {}: field {} is {} {}, but trackd reads {}", m.full_name(),
                               want.number(), have_type, have->name(), what);
        }
    }
    return "";
}

// Builds `file` in `pool`, with the imports trackd itself knows (google/protobuf/*.proto);
// nullptr with `why` set when it does not build.
const pb::FileDescriptor* build(pb::DescriptorPool& pool, pb::FileDescriptorProto file,
                                std::string& why) {
    for (const auto& dep : file.dependency()) {
        if (pool.FindFileByName(dep) != nullptr) continue;
        const pb::FileDescriptor* known = pb::DescriptorPool::generated_pool()->FindFileByName(dep);
        if (known == nullptr) {
            why = fmt::format(
                "imports \"{}\", which trackd does not know (schema references "
                "are not fetched)",
                dep);
            return nullptr;
        }
        pb::FileDescriptorProto proto;
        known->CopyTo(&proto);
        if (build(pool, std::move(proto), why) == nullptr) return nullptr;
    }
    if (file.name().empty()) file.set_name("registry_schema.proto");
    BuildErrors errors;
    const pb::FileDescriptor* out = pool.BuildFileCollectingErrors(file, &errors);
    if (out == nullptr) why = "does not build: " + errors.first;
    return out;
}

// Parses a schema (text or serialized descriptor) into `pool`; nullptr with `why` set on error.
const pb::FileDescriptor* parse(pb::DescriptorPool& pool, std::string_view schema, bool serialized,
                                std::string& why) {
    pb::FileDescriptorProto file;
    if (serialized) {
        if (!file.ParseFromArray(schema.data(), static_cast<int>(schema.size()))) {
            why = "is not a serialized FileDescriptorProto";
            return nullptr;
        }
    } else {
        pb::io::ArrayInputStream in(schema.data(), static_cast<int>(schema.size()));
        TextErrors errors;
        pb::io::Tokenizer tokenizer(&in, &errors);
        pb::compiler::Parser parser;
        parser.RecordErrorsTo(&errors);
        if (!parser.Parse(&tokenizer, &file)) {
            why = "is not a .proto file: " + errors.first;
            return nullptr;
        }
    }
    return build(pool, std::move(file), why);
}

// The message at `path` (first index: a top-level message, then nested ones), or nullptr.
const pb::Descriptor* message_at(const pb::FileDescriptor& file, std::span<const int> path) {
    if (path.empty() || path[0] >= file.message_type_count()) return nullptr;
    const pb::Descriptor* m = file.message_type(path[0]);
    for (std::size_t i = 1; i < path.size(); ++i) {
        if (path[i] >= m->nested_type_count()) return nullptr;
        m = m->nested_type(path[i]);
    }
    return m;
}

std::string path_text(std::span<const int> path) {
    return fmt::format("[{}]", fmt::join(path, ","));
}

}  // namespace

struct SchemaCatalog::Entry {
    std::optional<SchemaVerdict> whole;  // an unknown id, or a schema that does not parse
    pb::DescriptorPool pool;
    const pb::FileDescriptor* file = nullptr;
    std::vector<std::pair<std::vector<int>, SchemaVerdict>> by_path;
};

SchemaCatalog::SchemaCatalog() = default;
SchemaCatalog::~SchemaCatalog() = default;
SchemaCatalog::SchemaCatalog(SchemaCatalog&&) noexcept = default;
SchemaCatalog& SchemaCatalog::operator=(SchemaCatalog&&) noexcept = default;

const SchemaVerdict* SchemaCatalog::verdict(std::uint32_t id, std::span<const int> path) {
    const auto it = entries_.find(id);
    if (it == entries_.end()) return nullptr;
    Entry& e = *it->second;
    if (e.whole) return &*e.whole;
    for (const auto& [p, v] : e.by_path) {
        if (std::equal(p.begin(), p.end(), path.begin(), path.end())) return &v;
    }
    SchemaVerdict v;
    const pb::Descriptor* m = message_at(*e.file, path);
    if (m == nullptr) {
        v = {Reason::incompatible_schema,
             fmt::format("schema id {}: message index {} names no message of the schema", id,
                         path_text(path))};
    } else if (auto why = incompatibility(*m); !why.empty()) {
        v = {Reason::incompatible_schema, fmt::format("schema id {}: {}", id, why)};
    }
    e.by_path.emplace_back(std::vector<int>(path.begin(), path.end()), std::move(v));
    return &e.by_path.back().second;
}

void SchemaCatalog::add(std::uint32_t id, std::string_view registry_answer) {
    auto e = std::make_unique<Entry>();
    const auto refuse = [&](std::string why) {
        e->whole =
            SchemaVerdict{Reason::incompatible_schema, fmt::format("schema id {}: {}", id, why)};
    };
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    std::string_view schema;
    if (parser.parse(registry_answer.data(), registry_answer.size()).get(doc) !=
            simdjson::SUCCESS ||
        doc["schema"].get(schema) != simdjson::SUCCESS) {
        refuse("the registry's answer is not a JSON object with a \"schema\" string");
    } else {
        std::string_view type = "PROTOBUF";
        if (doc["schemaType"].error() == simdjson::SUCCESS &&
            doc["schemaType"].get(type) != simdjson::SUCCESS) {
            type = "?";
        }
        if (type != "PROTOBUF") {
            refuse(fmt::format("is a {} schema, not PROTOBUF", shorten(type)));
        } else {
            std::string why;
            // A base64 FileDescriptorProto (what a client that registered a descriptor gets
            // back), else .proto text; text always has characters base64 does not.
            const auto bytes = decode_base64(schema);
            e->file =
                bytes ? parse(e->pool, *bytes, true, why) : parse(e->pool, schema, false, why);
            if (e->file == nullptr) refuse("the schema " + why);
        }
    }
    entries_[id] = std::move(e);
}

void SchemaCatalog::add_unknown(std::uint32_t id, std::string detail) {
    auto e = std::make_unique<Entry>();
    e->whole = SchemaVerdict{Reason::unknown_schema, std::move(detail)};
    entries_[id] = std::move(e);
}

void SchemaCatalog::forget(std::uint32_t id) { entries_.erase(id); }

std::string schema_incompatibility(std::string_view schema, bool serialized_descriptor,
                                   const std::vector<int>& indexes) {
    pb::DescriptorPool pool;
    std::string why;
    const pb::FileDescriptor* file = parse(pool, schema, serialized_descriptor, why);
    if (file == nullptr) return "the schema " + why;
    const pb::Descriptor* m = message_at(*file, indexes);
    if (m == nullptr) return "message index " + path_text(indexes) + " names no message";
    return incompatibility(*m);
}

}  // namespace trackd::decode
