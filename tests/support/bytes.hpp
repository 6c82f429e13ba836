// Byte strings written out in a test: bytes({0xff, 0, 'a'}).
#pragma once

#include <initializer_list>
#include <string>

namespace trackd::test {

inline std::string bytes(std::initializer_list<int> b) {
    std::string s;
    for (const int c : b) s += static_cast<char>(c);
    return s;
}

}  // namespace trackd::test
