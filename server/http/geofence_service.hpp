// The fleet endpoints for geofences: create/replace (validated with GEOS), list, read, delete,
// and the vehicles currently inside or outside a zone (docs/api.md).
#pragma once

#include "router.hpp"
#include "service_context.hpp"

namespace trackd::http {

class GeofenceService {
  public:
    explicit GeofenceService(ServiceContext& ctx) : ctx_(ctx) {}
    void add_routes(Router& router);

    boost::asio::awaitable<Response> put(const Request& req, const std::string& zone_name);
    boost::asio::awaitable<Response> get(const Request& req, const std::string& zone_name);
    boost::asio::awaitable<Response> list(const Request& req);
    boost::asio::awaitable<Response> remove(const Request& req, const std::string& zone_name);
    boost::asio::awaitable<Response> vehicles(const Request& req, const std::string& zone_name);

  private:
    ServiceContext& ctx_;
};

}  // namespace trackd::http
