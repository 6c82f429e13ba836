#include "feature_page.hpp"

#include <algorithm>

#include "links.hpp"

namespace trackd::http {

void FeaturePage::add_link(std::string rel, std::string type, std::string href) {
    links_.push_back({std::move(rel), std::move(type), std::move(href)});
}

Response FeaturePage::respond(int rows, const WriteFeature& feature, const Cursor& cursor) const {
    const int n = std::min(rows, limit_);
    JsonWriter w;
    w.reserve(1024 + 256 * static_cast<std::size_t>(n));  // a point feature is ~190 bytes
    w.begin_object();
    w.key("type").value("FeatureCollection");
    w.key("features").begin_array();
    for (int i = 0; i < n; ++i) feature(w, i);
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
