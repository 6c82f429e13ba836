#include "crs_transformer.hpp"

#include <cmath>
#include <string>

#include <proj.h>

#include "trackd/core/error.hpp"

namespace trackd::validate {
namespace {

// Unknown srids remembered at most; beyond that each costs a PROJ lookup again.
constexpr std::size_t kMaxUnknownCached = 4096;

bool is_2d_usable(PJ_TYPE type) {
    switch (type) {
        case PJ_TYPE_GEOGRAPHIC_2D_CRS:
        case PJ_TYPE_GEOGRAPHIC_3D_CRS:
        case PJ_TYPE_PROJECTED_CRS:
        case PJ_TYPE_COMPOUND_CRS:
            return true;
        default:
            return false;
    }
}

const char* type_name(PJ_TYPE type) {
    switch (type) {
        case PJ_TYPE_GEOCENTRIC_CRS:
            return "a geocentric CRS";
        case PJ_TYPE_VERTICAL_CRS:
            return "a vertical CRS";
        case PJ_TYPE_ENGINEERING_CRS:
            return "an engineering CRS";
        case PJ_TYPE_TEMPORAL_CRS:
            return "a temporal CRS";
        default:
            return "not a horizontal CRS";
    }
}

}  // namespace

CrsTransformer::CrsTransformer() : ctx_(proj_context_create()) {
    if (ctx_ == nullptr) throw core::StartupError("validate: cannot create a PROJ context");
    proj_log_level(ctx_, PJ_LOG_NONE);  // failures are reported through rejections
}

CrsTransformer::~CrsTransformer() {
    for (auto& [srid, pj] : cache_) proj_destroy(pj);
    proj_context_destroy(ctx_);
}

PJ* CrsTransformer::transform_for(int srid, std::string& why) {
    if (auto it = cache_.find(srid); it != cache_.end()) return it->second;
    if (auto it = unknown_.find(srid); it != unknown_.end()) {
        why = it->second;
        return nullptr;
    }
    const std::string name = "EPSG:" + std::to_string(srid);
    PJ* result = nullptr;
    PJ* source = srid > 0 ? proj_create(ctx_, name.c_str()) : nullptr;
    if (source == nullptr) {
        why = name + " is not a CRS PROJ knows";
    } else if (!is_2d_usable(proj_get_type(source))) {
        why = name + " is " + type_name(proj_get_type(source)) + ", not usable for points";
    } else {
        PJ* target = proj_create(ctx_, "EPSG:4326");
        PJ* raw = target != nullptr
                      ? proj_create_crs_to_crs_from_pj(ctx_, source, target, nullptr, nullptr)
                      : nullptr;
        if (raw != nullptr) {
            result = proj_normalize_for_visualization(ctx_, raw);
            proj_destroy(raw);
        }
        if (result == nullptr) why = "PROJ has no transformation from " + name + " to EPSG:4326";
        proj_destroy(target);
    }
    proj_destroy(source);
    if (result != nullptr) {
        cache_.emplace(srid, result);
    } else if (unknown_.size() < kMaxUnknownCached) {
        unknown_.emplace(srid, why);
    }
    return result;
}

CrsTransformer::Status CrsTransformer::to_wgs84(int srid, double x, double y, double& lon,
                                                double& lat, std::string& why) {
    PJ* pj = transform_for(srid, why);
    if (pj == nullptr) return Status::unknown_srid;
    proj_errno_reset(pj);
    const PJ_COORD out = proj_trans(pj, PJ_FWD, proj_coord(x, y, 0, HUGE_VAL));
    const int err = proj_errno(pj);
    if (err != 0 || !std::isfinite(out.xy.x) || !std::isfinite(out.xy.y)) {
        why = err != 0 ? proj_context_errno_string(ctx_, err) : "non-finite result";
        return Status::failed;
    }
    lon = out.xy.x;
    lat = out.xy.y;
    return Status::ok;
}

}  // namespace trackd::validate
