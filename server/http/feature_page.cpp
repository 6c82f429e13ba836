#include "feature_page.hpp"

#include <algorithm>

#include "links.hpp"

namespace trackd::http {

namespace {
// The collection's head and tail (links) and one feature.
constexpr std::size_t kFirstReserve = 2048;
constexpr std::size_t kMaxFeatureReserve = 4096;
}  // namespace

void FeaturePage::add_link(std::string rel, std::string type, std::string href) {
    links_.push_back({std::move(rel), std::move(type), std::move(href)});
}

Response FeaturePage::respond(int rows, const WriteFeature& feature, const Cursor& cursor) const {
    const int n = std::min(rows, limit_);
    JsonWriter w;
    w.reserve(kFirstReserve);
    w.begin_object();
    w.key("type").value("FeatureCollection");
    w.key("features").begin_array();
    for (int i = 0; i < n; ++i) {
        const std::size_t before = w.str().size();
        feature(w, i);
        // Room for the rest from the first feature's size (190 bytes for a bare point, over
        // 300 with altitude and attributes), with a quarter to spare: the page is not copied
        // as it grows. Capped, so that one large geofence does not set aside room for a
        // hundred.
        if (i == 0 && n > 1) {
            const std::size_t each = std::min(w.str().size() - before, kMaxFeatureReserve);
            w.reserve(w.str().size() + (static_cast<std::size_t>(n) - 1) * (each + each / 4) +
                      kFirstReserve);
        }
    }
    w.end_array();
    if (number_matched_) w.key("numberMatched").raw(*number_matched_);
    w.key("numberReturned").value(n);
    if (time_stamp_) w.key("timeStamp").value(*time_stamp_);
    w.key("links").begin_array();
    write_link(w, "self", "application/geo+json", url_with(req_, fallback_host_, {}));
    if (rows > limit_) {
        write_link(w, "next", "application/geo+json",
                   url_with(req_, fallback_host_, {{"after", cursor(n - 1)}}));
    }
    for (const auto& link : links_) write_link(w, link.rel, link.type, link.href);
    w.end_array();
    w.end_object();
    return geojson_response(w.take());
}

Response FeaturePage::respond(const db::Result& r, const WriteFeature& feature) const {
    return respond(r.rows(), feature, [&r](int row) { return r.at(row, 0); });
}

}  // namespace trackd::http
