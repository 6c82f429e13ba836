#include "trackd/core/json.hpp"

#include <fmt/format.h>

namespace trackd::core {

void append_json_escaped(std::string& out, std::string_view s) {
    for (const char c : s) {
        switch (c) {
            case '"':
                out += "\\\"";
                break;
            case '\\':
                out += "\\\\";
                break;
            case '\n':
                out += "\\n";
                break;
            case '\r':
                out += "\\r";
                break;
            case '\t':
                out += "\\t";
                break;
            default:
                if (static_cast<unsigned char>(c) < 0x20) {
                    out += fmt::format("\\u{:04x}", static_cast<int>(c));
                } else {
                    out += c;
                }
        }
    }
}

}  // namespace trackd::core
