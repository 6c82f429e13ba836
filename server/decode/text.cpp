#include "text.hpp"

namespace trackd::decode {

std::string shorten(std::string_view s) {
    std::size_t cut = s.size();
    if (cut > kMaxQuoted) {
        cut = kMaxQuoted;
        while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
    }
    std::string out(s.substr(0, cut));
    for (char& c : out) {
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) c = '?';
    }
    if (cut < s.size()) out += "...";
    return out;
}

int first_control_character(std::string_view s) {
    for (std::size_t i = 0; i < s.size(); ++i) {
        const auto b = static_cast<unsigned char>(s[i]);
        if (b < 0x20 || b == 0x7F) return b;
        if (b == 0xC2 && i + 1 < s.size()) {
            const auto next = static_cast<unsigned char>(s[i + 1]);
            if (next >= 0x80 && next <= 0x9F) return next;  // U+0080..U+009F
        }
    }
    return -1;
}

}  // namespace trackd::decode
