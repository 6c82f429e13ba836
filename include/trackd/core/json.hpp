// JSON string escaping per RFC 8259, shared by the log lines and the HTTP responses.
#pragma once

#include <string>
#include <string_view>

namespace trackd::core {

// Appends `s` escaped (quotes, backslash, control characters), without surrounding quotes.
// `s` must be valid UTF-8; bytes >= 0x80 are copied unchanged.
void append_json_escaped(std::string& out, std::string_view s);

}  // namespace trackd::core
