// Coordinates in EPSG:<srid> to WGS 84 longitude/latitude, through PROJ.
//
// One PROJ context per transformer and one cached PJ per srid (created with
// proj_create_crs_to_crs + proj_normalize_for_visualization, so input is x/y or lon/lat and
// output lon/lat). Unknown srids are cached too, so a stream of them costs one PROJ database
// lookup each at most. Not thread-safe.
#pragma once

#include <string>
#include <unordered_map>

struct pj_ctx;
struct PJconsts;

namespace trackd::validate {

class CrsTransformer {
  public:
    CrsTransformer();
    ~CrsTransformer();
    CrsTransformer(const CrsTransformer&) = delete;
    CrsTransformer& operator=(const CrsTransformer&) = delete;

    enum class Status { ok, unknown_srid, failed };

    // (x, y) in EPSG:srid to (lon, lat) in EPSG:4326. On failure `why` says what went wrong.
    Status to_wgs84(int srid, double x, double y, double& lon, double& lat, std::string& why);

  private:
    // nullptr for an srid PROJ cannot transform from; `why` is set on a new failure.
    PJconsts* transform_for(int srid, std::string& why);

    pj_ctx* ctx_;
    std::unordered_map<int, PJconsts*> cache_;
    std::unordered_map<int, std::string> unknown_;  // srid -> why, for the detail
};

}  // namespace trackd::validate
