#include "trackd/core/json.hpp"

#include <array>

#include <fmt/format.h>

namespace trackd::core {

namespace {

// Characters a JSON string must escape: controls, the quote and the backslash.
constexpr std::array<bool, 256> kNeedsEscape = [] {
    std::array<bool, 256> t{};
    for (int c = 0; c < 0x20; ++c) t[c] = true;
    t['"'] = true;
    t['\\'] = true;
    return t;
}();

}  // namespace

void append_json_escaped(std::string& out, std::string_view s) {
    // Runs of characters that need no escape are appended at once.
    std::size_t run = 0;
    for (std::size_t i = 0; i < s.size(); ++i) {
        const auto c = static_cast<unsigned char>(s[i]);
        if (!kNeedsEscape[c]) continue;
        out.append(s.data() + run, i - run);
        run = i + 1;
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
                out += fmt::format("\\u{:04x}", static_cast<int>(c));
        }
    }
    out.append(s.data() + run, s.size() - run);
}

}  // namespace trackd::core
