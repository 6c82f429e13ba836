// The live map page (GET /map) and its files: web/map/ (the page, its script and style) and
// MapLibre GL JS's ES modules and CSS (web/node_modules/, installed by scripts/web.sh from
// web/package-lock.json), all embedded into the binary at build time, so the page needs nothing
// beyond this trackd. See docs/api.md, "Live map".
//
// Contract: the page and its files hold no data and are open (a browser cannot send a bearer
// token for a page it navigates to); everything the page shows comes from the API with the
// token the user enters. Each file has a strong ETag (If-None-Match gives 304), Cache-Control
// no-cache, nosniff, and the page a Content-Security-Policy that allows this origin only.
// JavaScript modules are text/javascript. Thread-safe (immutable).
#pragma once

#include <string>
#include <string_view>

#include "router.hpp"

namespace trackd::http {

class MapService {
  public:
    void add_routes(Router& router) const;
    static Response page(const Request& req);
    static Response file(const Request& req, const std::string& name);
};

// Embedded at build time (cmake/EmbedText.cmake).
extern const char* const kMapHtml;
extern const char* const kMapJs;
extern const char* const kMapCss;
extern const char* const kMaplibreJs;
extern const char* const kMaplibreWorkerJs;
extern const char* const kMaplibreCss;

}  // namespace trackd::http
