// The fleet endpoints for vehicles: one vehicle's current state, current states in a bbox,
// the nearest vehicles to a point, one vehicle's track (docs/api.md).
#pragma once

#include "router.hpp"
#include "service_context.hpp"

namespace trackd::http {

class VehicleService {
  public:
    explicit VehicleService(ServiceContext& ctx) : ctx_(ctx) {}
    void add_routes(Router& router);

    boost::asio::awaitable<Response> get(const Request& req, const std::string& vehicle_id);
    boost::asio::awaitable<Response> list(const Request& req);
    boost::asio::awaitable<Response> nearby(const Request& req);
    boost::asio::awaitable<Response> track(const Request& req, const std::string& vehicle_id);

  private:
    ServiceContext& ctx_;
};

// The largest radius `nearby` accepts, in metres.
inline constexpr double kMaxNearbyRadiusM = 1'000'000;

}  // namespace trackd::http
