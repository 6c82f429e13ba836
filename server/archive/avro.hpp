// A small Avro object-container encoder and decoder, for Iceberg manifests and manifest lists.
//
// Why not a library: Debian's Avro C file writer re-serialises the schema it stores and drops
// `field-id` and `logicalType`, which Iceberg readers need. Here the header carries the schema
// JSON text exactly as given, and records are encoded from that same schema.
//
// Values are dynamic (Value); the schema decides the wire type: int and long are both int64 in a
// Value, float and double both double, string and bytes both std::string, records and Avro maps
// both named fields. A union is encoded with its null branch for a null Value and otherwise with
// its first non-null branch. Not thread-safe per object; no global state.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace trackd::archive::avro {

class AvroError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

class Value {
  public:
    using Items = std::vector<Value>;
    using Fields = std::vector<std::pair<std::string, Value>>;

    Value() = default;
    Value(std::nullopt_t) {}  // NOLINT(google-explicit-constructor): null reads naturally
    Value(bool b) : v_(b) {}  // NOLINT(google-explicit-constructor)
    Value(int i) : v_(static_cast<std::int64_t>(i)) {}  // NOLINT
    Value(std::int64_t i) : v_(i) {}                    // NOLINT
    Value(double d) : v_(d) {}                          // NOLINT
    Value(std::string s) : v_(std::move(s)) {}          // NOLINT
    Value(const char* s) : v_(std::string(s)) {}        // NOLINT
    Value(Items items) : v_(std::move(items)) {}        // NOLINT
    Value(Fields fields) : v_(std::move(fields)) {}     // NOLINT
    template <class T>
    Value(const std::optional<T>& o) {  // NOLINT(google-explicit-constructor)
        if (o) *this = Value(*o);
    }

    [[nodiscard]] bool is_null() const { return std::holds_alternative<std::monostate>(v_); }
    [[nodiscard]] bool boolean() const;
    [[nodiscard]] std::int64_t integer() const;
    [[nodiscard]] double real() const;
    [[nodiscard]] const std::string& str() const;
    [[nodiscard]] const Items& items() const;
    [[nodiscard]] const Fields& fields() const;
    [[nodiscard]] Fields& fields();
    // The named field of a record, or a null Value when there is none.
    [[nodiscard]] const Value& operator[](std::string_view name) const;
    // Sets (or adds) a record field.
    void set(std::string_view name, Value v);

  private:
    std::variant<std::monostate, bool, std::int64_t, double, std::string, Items, Fields> v_;
};

struct Schema;
using SchemaPtr = std::shared_ptr<const Schema>;

struct Schema {
    enum class Type {
        null,
        boolean,
        int_,
        long_,
        float_,
        double_,
        bytes,
        string,
        record,
        enum_,
        array,
        map,
        union_,
        fixed
    };
    struct Field {
        std::string name;
        SchemaPtr type;
    };
    Type type = Type::null;
    std::string name;                  // record, enum, fixed
    std::vector<Field> fields;         // record
    SchemaPtr items;                   // array items, map values
    std::vector<SchemaPtr> branches;   // union
    std::vector<std::string> symbols;  // enum
    std::int64_t size = 0;             // fixed

    // Parses an Avro schema JSON text (named types may be referenced after their definition).
    static SchemaPtr parse(std::string_view text);
};

// Binary encoding of one value (Avro spec, "Binary Encoding").
void encode(const Schema& schema, const Value& value, std::string& out);

// Decodes one value; `pos` advances past it. Throws AvroError on truncated or invalid input.
Value decode(const Schema& schema, std::string_view data, std::size_t& pos);

// An object container file: header (magic, metadata with avro.schema = the exact text given,
// avro.codec = null, then `metadata`), one data block, sync marker.
std::string write_container(const std::string& schema_json,
                            const std::vector<std::pair<std::string, std::string>>& metadata,
                            const std::vector<Value>& records);

struct Container {
    std::map<std::string, std::string> metadata;  // includes avro.schema and avro.codec
    SchemaPtr schema;
    std::vector<Value> records;
};

// Reads a whole container file (codec null or deflate).
Container read_container(std::string_view file);

// Zig-zag varint, as used for every int and long (exposed for tests).
void write_long(std::string& out, std::int64_t v);
std::int64_t read_long(std::string_view data, std::size_t& pos);

}  // namespace trackd::archive::avro
