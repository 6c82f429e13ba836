// A small streaming JSON writer: every response body trackd builds goes through it, so that
// escaping and number formatting live in one place.
//
// Contract: the caller nests begin/end calls correctly; key() precedes each member value.
// Strings are escaped per RFC 8259 (invalid UTF-8 is never passed in: request text is
// validated on the way in, and PostgreSQL only returns valid UTF-8). Not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

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
    JsonWriter& value(double d);  // non-finite values become null
    JsonWriter& value(bool b);
    JsonWriter& null();
    // A number exactly as PostgreSQL printed it ("13.404954", "1e-05"); null if it is not a JSON
    // number (NaN, Infinity) so that a stray value can never break the document.
    JsonWriter& number_text(std::string_view text);
    // Text that is already a JSON value (ST_AsGeoJSON output, a jsonb column).
    JsonWriter& raw(std::string_view json);

    // Room for `bytes` of output up front, so that a large document is not copied as it grows.
    void reserve(std::size_t bytes) { out_.reserve(bytes); }
    [[nodiscard]] const std::string& str() const { return out_; }
    std::string take() { return std::move(out_); }

  private:
    void before_value();

    std::string out_;
    // One entry per open container: whether it already holds an element.
    std::vector<bool> has_element_;
    bool after_key_ = false;
};

void append_json_string(std::string& out, std::string_view s);

// Whether `text` is a JSON number (RFC 8259 grammar).
bool is_json_number(std::string_view text);

}  // namespace trackd::http
