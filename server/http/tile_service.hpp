// Mapbox Vector Tiles made by PostGIS (docs/api.md, "Vector tiles"): GET
// /tiles/{collection}/{z}/{x}/{y}.mvt for `vehicles` (current state), `positions` (history, in a
// `datetime` interval, by default the last 15 minutes) and `geofences`, and a TileJSON 3.0
// document per collection at GET /tiles/{collection}.
//
// Contract: a tile is one ST_AsMVT statement over the Web Mercator tile (ST_TileEnvelope) with a
// 64/4096 buffer; rows are selected in EPSG:3857 (so that nothing near the antimeridian is lost
// to a wrapped box) behind an index-friendly EPSG:4326 box clamped to the world, and come in
// feature id order, so a tile is a pure function of the data. Feature ids are 52-bit hashes of
// the key (vehicle id, zone name, position feature id), exact in JavaScript. An empty tile is 204.
// Every answer carries a strong ETag (If-None-Match gives 304) and Cache-Control. z is 0..24,
// x and y 0..2^z-1; anything else is a 400 naming the parameter. Thread-safe (no state).
#pragma once

#include <string>

#include "router.hpp"
#include "service_context.hpp"

namespace trackd::http {

class TileService {
  public:
    static constexpr int kMaxZoom = 24;
    static constexpr int kExtent = 4096;
    static constexpr int kBuffer = 64;

    explicit TileService(ServiceContext& ctx) : ctx_(ctx) {}
    void add_routes(Router& router);

    boost::asio::awaitable<Response> tile(const Request& req, const std::string& collection,
                                          const std::string& z, const std::string& x,
                                          const std::string& y_mvt);
    Response tilejson(const Request& req, const std::string& collection) const;

  private:
    ServiceContext& ctx_;
};

// A strong entity tag of `body` ("\"<16 hex digits>\""): FNV-1a, 64 bits.
std::string entity_tag(const std::string& body);

}  // namespace trackd::http
