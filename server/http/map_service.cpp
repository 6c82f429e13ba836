#include "map_service.hpp"

#include <array>

#include "problem.hpp"
#include "tile_service.hpp"

namespace trackd::http {
namespace {

struct File {
    std::string_view name;
    std::string_view content_type;
    const char* const* text;
};

const std::array<File, 6> kFiles = {{
    {"", "text/html; charset=utf-8", &kMapHtml},
    {"map.js", "text/javascript; charset=utf-8", &kMapJs},
    {"map.css", "text/css; charset=utf-8", &kMapCss},
    {"maplibre-gl.mjs", "text/javascript; charset=utf-8", &kMaplibreJs},
    {"maplibre-gl-worker.mjs", "text/javascript; charset=utf-8", &kMaplibreWorkerJs},
    {"maplibre-gl.css", "text/css; charset=utf-8", &kMaplibreCss},
}};

// This origin only. MapLibre starts its worker from maplibre-gl-worker.mjs and makes images
// from blobs; it sets element styles from script.
constexpr const char* kPagePolicy =
    "default-src 'self'; script-src 'self'; worker-src 'self' blob:; connect-src 'self'; "
    "img-src 'self' data: blob:; style-src 'self' 'unsafe-inline'; object-src 'none'; "
    "base-uri 'none'; frame-ancestors 'none'";

Response serve(const Request& req, const File& f) {
    // MapLibre asks for its worker with ?v=<version>.
    req.query.only({"v"});
    static const std::array<std::string, kFiles.size()> kTags = [] {
        std::array<std::string, kFiles.size()> tags;
        for (std::size_t i = 0; i < kFiles.size(); ++i) tags[i] = entity_tag(*kFiles[i].text);
        return tags;
    }();
    const auto& tag = kTags[static_cast<std::size_t>(&f - kFiles.data())];
    Response r;
    r.headers.emplace_back("ETag", tag);
    r.headers.emplace_back("Cache-Control", "no-cache");
    r.headers.emplace_back("X-Content-Type-Options", "nosniff");
    if (f.name.empty()) r.headers.emplace_back("Content-Security-Policy", kPagePolicy);
    if (req.if_none_match == tag) {
        r.status = 304;
        r.content_type.clear();
        return r;
    }
    r.content_type = std::string(f.content_type);
    r.body = *f.text;
    return r;
}

}  // namespace

void MapService::add_routes(Router& router) const {
    router.add("GET", "/map", Access::open,
               [](const Request& r, const auto&) { return ready(page(r)); });
    router.add("GET", "/map/{}", Access::open,
               [](const Request& r, const auto& a) { return ready(file(r, a[0])); });
}

Response MapService::page(const Request& req) { return serve(req, kFiles[0]); }

Response MapService::file(const Request& req, const std::string& name) {
    for (const auto& f : kFiles) {
        if (!f.name.empty() && f.name == name) return serve(req, f);
    }
    throw ProblemError(ProblemKind::resource_not_found,
                       "file: the map has no file '" + name +
                           "' (map.js, map.css, maplibre-gl.mjs, maplibre-gl-worker.mjs, "
                           "maplibre-gl.css)",
                       "file");
}

}  // namespace trackd::http
