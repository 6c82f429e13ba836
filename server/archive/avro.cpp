#include "avro.hpp"

#include <array>
#include <cstring>
#include <random>

#include <nlohmann/json.hpp>
#include <zlib.h>

namespace trackd::archive::avro {
namespace {

using json = nlohmann::json;

constexpr std::string_view kMagic{"Obj\x01", 4};

[[noreturn]] void fail(const std::string& what) { throw AvroError("avro: " + what); }

const Value& null_value() {
    static const Value v;
    return v;
}

struct Parser {
    std::map<std::string, SchemaPtr> named;

    SchemaPtr primitive(const std::string& name) {
        static const std::map<std::string, Schema::Type> kPrimitives = {
            {"null", Schema::Type::null},    {"boolean", Schema::Type::boolean},
            {"int", Schema::Type::int_},     {"long", Schema::Type::long_},
            {"float", Schema::Type::float_}, {"double", Schema::Type::double_},
            {"bytes", Schema::Type::bytes},  {"string", Schema::Type::string}};
        if (auto it = kPrimitives.find(name); it != kPrimitives.end()) {
            auto s = std::make_shared<Schema>();
            s->type = it->second;
            return s;
        }
        if (auto it = named.find(name); it != named.end()) return it->second;
        fail("unknown type '" + name + "'");
    }

    SchemaPtr parse(const json& j) {
        if (j.is_string()) return primitive(j.get<std::string>());
        if (j.is_array()) {
            auto s = std::make_shared<Schema>();
            s->type = Schema::Type::union_;
            for (const auto& b : j) s->branches.push_back(parse(b));
            return s;
        }
        if (!j.is_object() || !j.contains("type")) fail("schema node without a type");
        const auto& t = j.at("type");
        if (!t.is_string()) return parse(t);  // {"type": {...}} or {"type": [...]}
        const auto type = t.get<std::string>();
        auto s = std::make_shared<Schema>();
        if (type == "record" || type == "error") {
            s->type = Schema::Type::record;
            s->name = j.at("name").get<std::string>();
            named[s->name] = s;  // recursive references resolve to the (complete) record later
            for (const auto& f : j.at("fields")) {
                s->fields.push_back({f.at("name").get<std::string>(), parse(f.at("type"))});
            }
        } else if (type == "enum") {
            s->type = Schema::Type::enum_;
            s->name = j.at("name").get<std::string>();
            s->symbols = j.at("symbols").get<std::vector<std::string>>();
            named[s->name] = s;
        } else if (type == "array") {
            s->type = Schema::Type::array;
            s->items = parse(j.at("items"));
        } else if (type == "map") {
            s->type = Schema::Type::map;
            s->items = parse(j.at("values"));
        } else if (type == "fixed") {
            s->type = Schema::Type::fixed;
            s->name = j.at("name").get<std::string>();
            s->size = j.at("size").get<std::int64_t>();
            named[s->name] = s;
        } else {
            return primitive(type);  // {"type": "long", "logicalType": ...}
        }
        return s;
    }
};

void write_bytes(std::string& out, std::string_view s) {
    write_long(out, static_cast<std::int64_t>(s.size()));
    out.append(s);
}

std::string_view read_bytes(std::string_view data, std::size_t& pos) {
    const auto n = read_long(data, pos);
    if (n < 0 || static_cast<std::uint64_t>(n) > data.size() - pos) fail("truncated bytes");
    auto s = data.substr(pos, static_cast<std::size_t>(n));
    pos += static_cast<std::size_t>(n);
    return s;
}

template <class T>
void write_le(std::string& out, T v) {
    char buf[sizeof(T)];
    std::memcpy(buf, &v, sizeof(T));  // x86-64 and aarch64 are little-endian, as Avro is
    out.append(buf, sizeof(T));
}

template <class T>
T read_le(std::string_view data, std::size_t& pos) {
    if (data.size() - pos < sizeof(T)) fail("truncated number");
    T v;
    std::memcpy(&v, data.data() + pos, sizeof(T));
    pos += sizeof(T);
    return v;
}

std::string inflate_raw(std::string_view in) {
    z_stream zs{};
    if (inflateInit2(&zs, -15) != Z_OK) fail("inflateInit2 failed");
    std::string out;
    std::array<char, 65536> buf{};
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    zs.avail_in = static_cast<uInt>(in.size());
    int rc = Z_OK;
    while (rc != Z_STREAM_END) {
        zs.next_out = reinterpret_cast<Bytef*>(buf.data());
        zs.avail_out = static_cast<uInt>(buf.size());
        rc = inflate(&zs, Z_NO_FLUSH);
        if (rc != Z_OK && rc != Z_STREAM_END) {
            inflateEnd(&zs);
            fail("corrupt deflate block");
        }
        out.append(buf.data(), buf.size() - zs.avail_out);
        if (rc == Z_OK && zs.avail_in == 0 && zs.avail_out != 0) break;
    }
    inflateEnd(&zs);
    return out;
}

}  // namespace

bool Value::boolean() const {
    if (const auto* b = std::get_if<bool>(&v_)) return *b;
    throw AvroError("avro: value is not a boolean");
}
std::int64_t Value::integer() const {
    if (const auto* i = std::get_if<std::int64_t>(&v_)) return *i;
    throw AvroError("avro: value is not an integer");
}
double Value::real() const {
    if (const auto* d = std::get_if<double>(&v_)) return *d;
    if (const auto* i = std::get_if<std::int64_t>(&v_)) return static_cast<double>(*i);
    throw AvroError("avro: value is not a number");
}
const std::string& Value::str() const {
    if (const auto* s = std::get_if<std::string>(&v_)) return *s;
    throw AvroError("avro: value is not a string");
}
const Value::Items& Value::items() const {
    if (const auto* a = std::get_if<Items>(&v_)) return *a;
    static const Items kEmpty;
    if (is_null()) return kEmpty;
    throw AvroError("avro: value is not an array");
}
const Value::Fields& Value::fields() const {
    if (const auto* f = std::get_if<Fields>(&v_)) return *f;
    static const Fields kEmpty;
    if (is_null()) return kEmpty;
    throw AvroError("avro: value is not a record");
}
Value::Fields& Value::fields() {
    if (is_null()) v_ = Fields{};
    if (auto* f = std::get_if<Fields>(&v_)) return *f;
    throw AvroError("avro: value is not a record");
}
const Value& Value::operator[](std::string_view name) const {
    for (const auto& [k, v] : fields()) {
        if (k == name) return v;
    }
    return null_value();
}
void Value::set(std::string_view name, Value v) {
    for (auto& [k, old] : fields()) {
        if (k == name) {
            old = std::move(v);
            return;
        }
    }
    fields().emplace_back(std::string(name), std::move(v));
}

SchemaPtr Schema::parse(std::string_view text) {
    json j;
    try {
        j = json::parse(text);
    } catch (const json::exception& e) {
        fail(std::string("schema is not JSON: ") + e.what());
    }
    Parser p;
    try {
        return p.parse(j);
    } catch (const json::exception& e) {
        fail(std::string("invalid schema: ") + e.what());
    }
}

void write_long(std::string& out, std::int64_t v) {
    auto z = (static_cast<std::uint64_t>(v) << 1) ^ static_cast<std::uint64_t>(v >> 63);
    while (z >= 0x80) {
        out.push_back(static_cast<char>((z & 0x7f) | 0x80));
        z >>= 7;
    }
    out.push_back(static_cast<char>(z));
}

std::int64_t read_long(std::string_view data, std::size_t& pos) {
    std::uint64_t z = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (pos >= data.size()) fail("truncated varint");
        const auto b = static_cast<unsigned char>(data[pos++]);
        z |= static_cast<std::uint64_t>(b & 0x7f) << shift;
        if ((b & 0x80) == 0) {
            return static_cast<std::int64_t>((z >> 1) ^ (~(z & 1) + 1));
        }
    }
    fail("varint too long");
}

void encode(const Schema& s, const Value& v, std::string& out) {
    using T = Schema::Type;
    switch (s.type) {
        case T::null:
            if (!v.is_null()) fail("non-null value for a null schema");
            return;
        case T::boolean:
            out.push_back(v.boolean() ? '\1' : '\0');
            return;
        case T::int_:
        case T::long_:
        case T::enum_:
            write_long(out, v.integer());
            return;
        case T::float_:
            write_le(out, static_cast<float>(v.real()));
            return;
        case T::double_:
            write_le(out, v.real());
            return;
        case T::bytes:
        case T::string:
            write_bytes(out, v.str());
            return;
        case T::fixed:
            if (static_cast<std::int64_t>(v.str().size()) != s.size) fail("fixed size mismatch");
            out.append(v.str());
            return;
        case T::record:
            for (const auto& f : s.fields) {
                try {
                    encode(*f.type, v[f.name], out);
                } catch (const AvroError& e) {
                    throw AvroError(std::string(e.what()) + " (in " + s.name + "." + f.name + ")");
                }
            }
            return;
        case T::array: {
            const auto& items = v.items();
            if (!items.empty()) {
                write_long(out, static_cast<std::int64_t>(items.size()));
                for (const auto& item : items) encode(*s.items, item, out);
            }
            write_long(out, 0);
            return;
        }
        case T::map: {
            const auto& entries = v.fields();
            if (!entries.empty()) {
                write_long(out, static_cast<std::int64_t>(entries.size()));
                for (const auto& [k, item] : entries) {
                    write_bytes(out, k);
                    encode(*s.items, item, out);
                }
            }
            write_long(out, 0);
            return;
        }
        case T::union_: {
            for (std::size_t i = 0; i < s.branches.size(); ++i) {
                const bool null_branch = s.branches[i]->type == T::null;
                if (null_branch == v.is_null()) {
                    write_long(out, static_cast<std::int64_t>(i));
                    encode(*s.branches[i], v, out);
                    return;
                }
            }
            fail(v.is_null() ? "null for a union without null" : "no non-null union branch");
        }
    }
}

Value decode(const Schema& s, std::string_view data, std::size_t& pos) {
    using T = Schema::Type;
    switch (s.type) {
        case T::null:
            return {};
        case T::boolean:
            if (pos >= data.size()) fail("truncated boolean");
            return Value(data[pos++] != 0);
        case T::int_:
        case T::long_:
        case T::enum_:
            return Value(read_long(data, pos));
        case T::float_:
            return Value(static_cast<double>(read_le<float>(data, pos)));
        case T::double_:
            return Value(read_le<double>(data, pos));
        case T::bytes:
        case T::string:
            return Value(std::string(read_bytes(data, pos)));
        case T::fixed: {
            if (static_cast<std::int64_t>(data.size() - pos) < s.size) fail("truncated fixed");
            std::string v(data.substr(pos, static_cast<std::size_t>(s.size)));
            pos += static_cast<std::size_t>(s.size);
            return Value(std::move(v));
        }
        case T::record: {
            Value::Fields fields;
            fields.reserve(s.fields.size());
            for (const auto& f : s.fields) fields.emplace_back(f.name, decode(*f.type, data, pos));
            return Value(std::move(fields));
        }
        case T::array:
        case T::map: {
            Value::Items items;
            Value::Fields entries;
            for (;;) {
                auto n = read_long(data, pos);
                if (n == 0) break;
                if (n < 0) {  // a negative count is followed by the block's size in bytes
                    n = -n;
                    read_long(data, pos);
                }
                for (std::int64_t i = 0; i < n; ++i) {
                    if (s.type == T::array) {
                        items.push_back(decode(*s.items, data, pos));
                    } else {
                        std::string key(read_bytes(data, pos));
                        entries.emplace_back(std::move(key), decode(*s.items, data, pos));
                    }
                }
            }
            return s.type == T::array ? Value(std::move(items)) : Value(std::move(entries));
        }
        case T::union_: {
            const auto i = read_long(data, pos);
            if (i < 0 || static_cast<std::size_t>(i) >= s.branches.size()) fail("bad union index");
            return decode(*s.branches[static_cast<std::size_t>(i)], data, pos);
        }
    }
    fail("unreachable");
}

std::string write_container(const std::string& schema_json,
                            const std::vector<std::pair<std::string, std::string>>& metadata,
                            const std::vector<Value>& records) {
    const auto schema = Schema::parse(schema_json);
    std::string out(kMagic);
    std::vector<std::pair<std::string, std::string>> meta = {{"avro.schema", schema_json},
                                                             {"avro.codec", "null"}};
    meta.insert(meta.end(), metadata.begin(), metadata.end());
    write_long(out, static_cast<std::int64_t>(meta.size()));
    for (const auto& [k, v] : meta) {
        write_bytes(out, k);
        write_bytes(out, v);
    }
    write_long(out, 0);
    std::array<char, 16> sync{};
    std::random_device rd;
    for (auto& c : sync) c = static_cast<char>(rd() & 0xff);
    out.append(sync.data(), sync.size());
    if (!records.empty()) {
        std::string block;
        for (const auto& r : records) encode(*schema, r, block);
        write_long(out, static_cast<std::int64_t>(records.size()));
        write_long(out, static_cast<std::int64_t>(block.size()));
        out.append(block);
        out.append(sync.data(), sync.size());
    }
    return out;
}

Container read_container(std::string_view file) {
    if (file.substr(0, 4) != kMagic) fail("not an Avro object container file");
    std::size_t pos = 4;
    Container c;
    for (;;) {
        auto n = read_long(file, pos);
        if (n == 0) break;
        if (n < 0) {
            n = -n;
            read_long(file, pos);
        }
        for (std::int64_t i = 0; i < n; ++i) {
            std::string k(read_bytes(file, pos));
            c.metadata[k] = std::string(read_bytes(file, pos));
        }
    }
    if (file.size() - pos < 16) fail("truncated header");
    const auto sync = file.substr(pos, 16);
    pos += 16;
    const auto schema_it = c.metadata.find("avro.schema");
    if (schema_it == c.metadata.end()) fail("no avro.schema in the header");
    c.schema = Schema::parse(schema_it->second);
    const auto codec_it = c.metadata.find("avro.codec");
    const std::string codec = codec_it == c.metadata.end() ? "null" : codec_it->second;
    if (codec != "null" && codec != "deflate") fail("unsupported codec '" + codec + "'");
    while (pos < file.size()) {
        const auto count = read_long(file, pos);
        const auto raw = read_bytes(file, pos);
        std::string inflated;
        std::string_view block = raw;
        if (codec == "deflate") {
            inflated = inflate_raw(raw);
            block = inflated;
        }
        std::size_t bpos = 0;
        for (std::int64_t i = 0; i < count; ++i)
            c.records.push_back(decode(*c.schema, block, bpos));
        if (file.size() - pos < 16 || file.substr(pos, 16) != sync) fail("sync marker mismatch");
        pos += 16;
    }
    return c;
}

}  // namespace trackd::archive::avro
