// Hexadecimal digits: JSON \uXXXX escapes, WKB hex strings, URL percent-encoding.
//
// Contract: pure functions on views, no allocation, no exceptions; safe from any thread.
#pragma once

#include <cstddef>
#include <span>
#include <string_view>

namespace trackd::core {

// The value of one hex digit (0-9, a-f, A-F), or -1 for any other character.
constexpr int hex_digit_value(char c) noexcept {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// Decodes `hex`, two digits a byte, into `out`, which must hold hex.size() / 2 bytes. False when
// the length is odd or a character is not a hex digit (`out` may then be partly written).
constexpr bool decode_hex(std::string_view hex, std::span<unsigned char> out) noexcept {
    if (hex.size() % 2 != 0 || out.size() < hex.size() / 2) return false;
    for (std::size_t i = 0; i < hex.size() / 2; ++i) {
        const int hi = hex_digit_value(hex[2 * i]);
        const int lo = hex_digit_value(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) return false;
        out[i] = static_cast<unsigned char>(hi * 16 + lo);
    }
    return true;
}

}  // namespace trackd::core
