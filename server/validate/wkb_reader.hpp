// Hex WKB / EWKB to a point, through the GEOS C API (reentrant, one handle per reader).
//
// The hex text is checked and decoded here (into a reused buffer) and the bytes handed to
// GEOSWKBReader_read_r, which reads both ISO WKB and PostGIS EWKB (SRID flag, Z). Not
// thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

struct GEOSContextHandle_HS;
struct GEOSWKBReader_t;

namespace trackd::validate {

class WkbReader {
  public:
    WkbReader();
    ~WkbReader();
    WkbReader(const WkbReader&) = delete;
    WkbReader& operator=(const WkbReader&) = delete;

    struct Point {
        double x = 0, y = 0;
        std::optional<double> z;  // when the WKB has a Z that is not NaN
        int srid = 0;             // the EWKB SRID, 0 when none
    };

    enum class Status { ok, bad_wkb, not_a_point };

    // On failure `why` says what was wrong.
    Status read_point(std::string_view hex, Point& out, std::string& why);
    // The same for raw WKB bytes (Protobuf's geom_wkb).
    Status read_point_bytes(std::string_view wkb, Point& out, std::string& why);

  private:
    static void on_error(const char* message, void* self);

    GEOSContextHandle_HS* ctx_;
    GEOSWKBReader_t* reader_;
    std::vector<unsigned char> bytes_;
    std::string error_;  // GEOS's last error message
};

}  // namespace trackd::validate
