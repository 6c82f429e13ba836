// A small streaming JSON writer: every response body trackd builds goes through it, so that
// escaping and number formatting live in one place.
//
// Contract: the caller nests begin/end calls correctly; key() precedes each member value.
// Strings are escaped per RFC 8259 (invalid UTF-8 is never passed in: request text is
// validated on the way in, and PostgreSQL only returns valid UTF-8). Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace trackd::http {

class JsonWriter {
  public:
    JsonWriter& begin_object();
    JsonWriter& end_object();
    JsonWriter& begin_array();
    JsonWriter& end_array();
    JsonWriter& key(std::string_view k);
    JsonWriter& value(std::string_view s);
    JsonWriter& value(const char* s) { return value(std::string_view(s)); }
    JsonWriter& value(const std::string& s) { return value(std::string_view(s)); }
    JsonWriter& value(std::int64_t n);
    JsonWriter& value(int n) { return value(static_cast<std::int64_t>(n)); }
    // Floats in their shortest exact text; non-finite values become null.
    JsonWriter& value(double d);
    JsonWriter& value(float f);
    JsonWriter& value(bool b);
    JsonWriter& null();
    // A number exactly as PostgreSQL printed it ("13.404954", "1e-05"); null if it is not a JSON
    // number (NaN, Infinity) so that a stray value can never break the document.
    JsonWriter& number_text(std::string_view text);
    // Text that is already a JSON value (ST_AsGeoJSON output, a jsonb column).
    JsonWriter& raw(std::string_view json);

    // For a writer of a fixed-shape value composed from literal fragments (the point feature of
    // every API page): the comma before a value, then the output, to which the caller appends
    // exactly one complete JSON value with append_json_string / append_json_number and literals.
    std::string& value_buffer() {
        before_value();
        return out_;
    }

    // Room for `bytes` of output up front, so that a large document is not copied as it grows.
    void reserve(std::size_t bytes) { out_.reserve(bytes); }
    [[nodiscard]] const std::string& str() const { return out_; }
    std::string take() { return std::move(out_); }

  private:
    static constexpr int kMaxDepth = 64;

    // The comma between elements: each value, key and container calls it first.
    void before_value() {
        if (after_key_) {
            after_key_ = false;
            return;
        }
        if (depth_ > 0) {
            const std::uint64_t bit = std::uint64_t{1} << (depth_ - 1);
            if ((has_element_ & bit) != 0) out_ += ',';
            has_element_ |= bit;
        }
    }
    void open(char c);

    std::string out_;
    // Bit d: the container open at depth d already holds an element.
    std::uint64_t has_element_ = 0;
    int depth_ = 0;
    bool after_key_ = false;
};

void append_json_string(std::string& out, std::string_view s);
// The shortest text that reads back as the same value; null when it is not finite.
void append_json_number(std::string& out, double v);
void append_json_number(std::string& out, float v);
void append_json_number(std::string& out, std::int64_t v);

// Whether `text` is a JSON number (RFC 8259 grammar).
bool is_json_number(std::string_view text);

}  // namespace trackd::http
