// The fleet endpoints for geofences: create/replace (validated with GEOS), list, read, delete,
// and the vehicles currently inside or outside a zone (docs/api.md).
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

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
    // Whether `zone_name` holds so many vehicles that a page of `fetch` rows inside it is found
    // faster by walking the primary key than by reading every vehicle in it: at least
    // sqrt(fetch * fleet) of them. The zone's vehicles are counted (up to that bound for the
    // largest page, http.max_limit) at most once a minute, and again after the zone is written;
    // a stale count costs time, never rows, since both ways are exact.
    boost::asio::awaitable<bool> holds_much_of_the_fleet(const std::string& zone_name,
                                                         std::int64_t fetch);
    void forget_size(const std::string& zone_name);

    struct ZoneSize {
        std::int64_t vehicles = 0;  // counted up to the bound for the largest page
        double fleet = 0;           // the current state's rows (statistics), at least 10,000
        std::chrono::steady_clock::time_point counted;
    };

    ServiceContext& ctx_;
    std::mutex sizes_mutex_;  // guards sizes_: requests on every I/O thread share the service
    std::unordered_map<std::string, ZoneSize> sizes_;
};

}  // namespace trackd::http
