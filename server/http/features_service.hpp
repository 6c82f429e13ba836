// OGC API - Features, Part 1 (Core, GeoJSON, OpenAPI 3.0) over three collections:
// `vehicles` (current state), `positions` (history) and `geofences`.
//
// Contract: items are paged by keyset (`after`, carried by the `next` link), so following next
// links returns every matching feature exactly once; numberMatched is an exact count. A
// collection's extent (bbox, and the temporal interval) comes from PostgreSQL's statistics
// (ST_EstimatedExtent, pg_stats): catalog reads, never a scan of the data.
#pragma once

#include "router.hpp"
#include "service_context.hpp"

namespace trackd::http {

class FeaturesService {
  public:
    explicit FeaturesService(ServiceContext& ctx) : ctx_(ctx) {}
    void add_routes(Router& router);

    Response landing(const Request& req) const;
    Response conformance(const Request& req);
    boost::asio::awaitable<Response> collections(const Request& req) const;
    boost::asio::awaitable<Response> collection(const Request& req, const std::string& id) const;
    boost::asio::awaitable<Response> items(const Request& req, const std::string& id);
    boost::asio::awaitable<Response> item(const Request& req, const std::string& id,
                                          const std::string& feature_id);

  private:
    ServiceContext& ctx_;
};

}  // namespace trackd::http
