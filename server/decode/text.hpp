// Text helpers the decoders share for what a rejection's detail shows.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace trackd::decode {

// Quoted values in details are cut to about this many bytes.
inline constexpr std::size_t kMaxQuoted = 60;

// `s` cut to about kMaxQuoted bytes on a UTF-8 boundary, control bytes shown as '?'.
std::string shorten(std::string_view s);

// The first C0/C1 control character in UTF-8 text, or -1.
int first_control_character(std::string_view s);

}  // namespace trackd::decode
