#include "json_writer.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <stdexcept>

#include <fmt/compile.h>

#include "trackd/core/json.hpp"

namespace trackd::http {

void append_json_string(std::string& out, std::string_view s) {
    out += '"';
    core::append_json_escaped(out, s);
    out += '"';
}

bool is_json_number(std::string_view t) {
    std::size_t i = 0;
    const auto digit = [&](std::size_t k) { return k < t.size() && t[k] >= '0' && t[k] <= '9'; };
    if (i < t.size() && t[i] == '-') ++i;
    if (!digit(i)) return false;
    if (t[i] == '0') {
        ++i;
    } else {
        while (digit(i)) ++i;
    }
    if (i < t.size() && t[i] == '.') {
        ++i;
        if (!digit(i)) return false;
        while (digit(i)) ++i;
    }
    if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
        ++i;
        if (i < t.size() && (t[i] == '+' || t[i] == '-')) ++i;
        if (!digit(i)) return false;
        while (digit(i)) ++i;
    }
    return i == t.size();
}

void JsonWriter::open(char c) {
    before_value();
    out_ += c;
    if (depth_ == kMaxDepth) throw std::logic_error("JsonWriter: more than 64 nested containers");
    has_element_ &= ~(std::uint64_t{1} << depth_);
    ++depth_;
}

JsonWriter& JsonWriter::begin_object() {
    open('{');
    return *this;
}

JsonWriter& JsonWriter::end_object() {
    out_ += '}';
    --depth_;
    return *this;
}

JsonWriter& JsonWriter::begin_array() {
    open('[');
    return *this;
}

JsonWriter& JsonWriter::end_array() {
    out_ += ']';
    --depth_;
    return *this;
}

JsonWriter& JsonWriter::key(std::string_view k) {
    before_value();
    append_json_string(out_, k);
    out_ += ':';
    after_key_ = true;
    return *this;
}

JsonWriter& JsonWriter::value(std::string_view s) {
    before_value();
    append_json_string(out_, s);
    return *this;
}

JsonWriter& JsonWriter::value(std::int64_t n) {
    append_json_number(value_buffer(), n);
    return *this;
}

namespace {

template <typename F>
void append_float(std::string& out, F v) {
    if (!std::isfinite(v)) {
        out += "null";
        return;
    }
    // fmt's "{}" (Dragonbox) is the shortest text too, and faster than std::to_chars here.
    std::array<char, 32> buf{};
    const auto end = fmt::format_to(buf.data(), FMT_COMPILE("{}"), v);
    out.append(buf.data(), end);
}

}  // namespace

void append_json_number(std::string& out, double v) { append_float(out, v); }
void append_json_number(std::string& out, float v) { append_float(out, v); }
void append_json_number(std::string& out, std::int64_t v) {
    std::array<char, 24> buf{};
    const auto r = std::to_chars(buf.data(), buf.data() + buf.size(), v);
    out.append(buf.data(), r.ptr);
}

JsonWriter& JsonWriter::value(double d) {
    append_json_number(value_buffer(), d);
    return *this;
}

JsonWriter& JsonWriter::value(float f) {
    append_json_number(value_buffer(), f);
    return *this;
}

JsonWriter& JsonWriter::value(bool b) {
    before_value();
    out_ += b ? "true" : "false";
    return *this;
}

JsonWriter& JsonWriter::null() {
    before_value();
    out_ += "null";
    return *this;
}

JsonWriter& JsonWriter::number_text(std::string_view text) {
    before_value();
    out_ += is_json_number(text) ? text : std::string_view("null");
    return *this;
}

JsonWriter& JsonWriter::raw(std::string_view json) {
    before_value();
    out_ += json;
    return *this;
}

}  // namespace trackd::http
