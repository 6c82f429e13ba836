#include "json_writer.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

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

constexpr std::array<char, 200> kDigitPairs = [] {
    std::array<char, 200> t{};
    for (std::size_t i = 0; i < 100; ++i) {
        t[2 * i] = static_cast<char>('0' + i / 10);
        t[2 * i + 1] = static_cast<char>('0' + i % 10);
    }
    return t;
}();

void write_pair(char* p, std::uint32_t v) { std::memcpy(p, &kDigitPairs[2 * std::size_t{v}], 2); }

// The decimal digits of `v` written backwards so that they end just before `end`; returns where
// they start. Eight digits at a time in 32-bit arithmetic: std::to_chars took 22 ns for the 16
// digits of a coordinate, as long as Dragonbox's search for them.
char* write_digits_before(char* end, std::uint64_t v) {
    while (v >= 100000000) {
        const auto low = static_cast<std::uint32_t>(v % 100000000);
        v /= 100000000;
        end -= 8;
        write_pair(end, low / 1000000);
        write_pair(end + 2, low / 10000 % 100);
        write_pair(end + 4, low / 100 % 100);
        write_pair(end + 6, low % 100);
    }
    auto w = static_cast<std::uint32_t>(v);
    while (w >= 100) {
        end -= 2;
        write_pair(end, w % 100);
        w /= 100;
    }
    if (w >= 10) {
        end -= 2;
        write_pair(end, w);
    } else {
        *--end = static_cast<char>('0' + w);
    }
    return end;
}

// The shortest text that reads back as `v`, exactly as fmt's "{}" writes it (fixed notation for
// decimal exponents -4..15, else 1.5e-05 / 1e+16), from Dragonbox's shortest decimal
// significand and exponent. fmt's own writer, which also handles widths, precisions and locales,
// made a coordinate cost 59 ns against 43 here (a feature has five floats).
template <typename F>
void append_float(std::string& out, F v) {
    if (!std::isfinite(v)) {
        out += "null";
        return;
    }
    // The significand's digits are written into buf[..23), the text composed from buf[24] on (at
    // most a sign, 17 digits, "0.0000" or a point, and "e+308") and appended once.
    std::array<char, 64> buf;  // NOLINT(cppcoreguidelines-pro-type-member-init): written below
    char* const digits_end = buf.data() + 23;
    char* const text = buf.data() + 24;
    char* p = text;
    if (std::signbit(v)) {
        *p++ = '-';
        v = -v;
    }
    if (v == 0) {
        *p++ = '0';
        out.append(text, p);
        return;
    }
    const auto dec = fmt::detail::dragonbox::to_decimal(v);
    const char* const first = write_digits_before(digits_end, dec.significand);
    const auto n = static_cast<int>(digits_end - first);
    const int point = n + dec.exponent;  // digits before the decimal point
    const int output_exp = point - 1;
    const auto copy = [&](int from, int to) {
        std::memcpy(p, first + from, static_cast<std::size_t>(to - from));
        p += to - from;
    };
    if (output_exp < -4 || output_exp >= 16) {
        *p++ = first[0];
        if (n > 1) {
            *p++ = '.';
            copy(1, n);
        }
        *p++ = 'e';
        *p++ = output_exp < 0 ? '-' : '+';
        const int e = output_exp < 0 ? -output_exp : output_exp;
        if (e >= 100) *p++ = static_cast<char>('0' + e / 100);
        write_pair(p, static_cast<std::uint32_t>(e % 100));
        p += 2;
    } else if (dec.exponent >= 0) {
        copy(0, n);
        std::memset(p, '0', static_cast<std::size_t>(dec.exponent));
        p += dec.exponent;
    } else if (point > 0) {
        copy(0, point);
        *p++ = '.';
        copy(point, n);
    } else {
        *p++ = '0';
        *p++ = '.';
        std::memset(p, '0', static_cast<std::size_t>(-point));
        p += -point;
        copy(0, n);
    }
    out.append(text, p);
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
