// Fuzzes http::parse_fence, the GeoJSON reader behind PUT /geofences/{zone_name}: every input
// must give a MultiPolygon or a ProblemError (400/422), never a crash, leak or another exception.
// The first byte chooses `repair` (GEOS make-valid), the rest is the request body.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "fence_geometry.hpp"
#include "problem.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    const bool repair = (data[0] & 1) != 0;
    const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
    try {
        const auto fence = trackd::http::parse_fence(body, repair);
        // EWKB MultiPolygon with SRID: at least byte order, type and SRID, as hex.
        if (fence.ewkb_hex.size() < 18) std::abort();
    } catch (const trackd::http::ProblemError& e) {
        const int status = trackd::http::info(e.problem().kind).status;
        if (status != 400 && status != 422) std::abort();
    }
    return 0;
}
