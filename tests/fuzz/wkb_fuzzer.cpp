// Fuzzes validate::WkbReader::read_point, the reader of the `geom_hex` field. The first byte
// picks the form: odd -> the rest is the hex text as received (bad digits, odd lengths); even ->
// the rest is WKB bytes, hex-encoded here so that GEOS's WKB parser sees arbitrary binary.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "wkb_reader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static trackd::validate::WkbReader reader;
    if (size == 0) return 0;
    const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
    std::string hex;
    if ((data[0] & 1) != 0) {
        hex = rest;
    } else {
        static constexpr char kDigits[] = "0123456789abcdef";
        for (const unsigned char c : rest) {
            hex += kDigits[c >> 4];
            hex += kDigits[c & 15];
        }
    }
    trackd::validate::WkbReader::Point point;
    std::string why;
    const auto status = reader.read_point(hex, point, why);
    if (status == trackd::validate::WkbReader::Status::ok) {
        if (point.z && std::isnan(*point.z)) std::abort();  // a NaN Z is reported as no Z
    } else if (why.empty()) {
        std::abort();  // every failure says what was wrong
    }
    return 0;
}
