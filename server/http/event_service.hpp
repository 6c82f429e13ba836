// The geofence event endpoints (docs/api.md, "Geofence events"): a zone's or a vehicle's events
// in a time range, and the live stream of committed events as Server-Sent Events.
//
// Contract: the list endpoints page by (event_time, event_id) with `after=<event_id>`. The
// stream starts after the Last-Event-ID header (or the `last_event_id` parameter), or at the
// newest committed event when neither is given, and sends every later event exactly once in
// event_id order (ids follow commit order, see V0007). A stream holds no pooled connection while
// it waits: it borrows one per poll, and only when the shared watermark (the newest committed
// id, read at most once per poll interval for all streams) says there is something to send.
// Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>

#include "router.hpp"
#include "service_context.hpp"

namespace trackd::http {

class EventService {
  public:
    // How often a stream looks for new events, and how long it stays silent before a comment
    // line keeps the connection (and proxies) from timing out.
    static constexpr std::chrono::milliseconds kPollInterval{250};
    static constexpr std::chrono::seconds kHeartbeat{15};

    explicit EventService(ServiceContext& ctx) : ctx_(ctx) {}
    void add_routes(Router& router);

    boost::asio::awaitable<Response> zone_events(const Request& req, const std::string& zone_name);
    boost::asio::awaitable<Response> vehicle_events(const Request& req,
                                                    const std::string& vehicle_id);
    boost::asio::awaitable<Response> stream(const Request& req);

    // The newest committed event id, at most kPollInterval old.
    boost::asio::awaitable<std::int64_t> latest_event_id();
    // Up to `limit` SSE messages for events after `after`; advances `after`.
    boost::asio::awaitable<std::string> events_after(std::int64_t& after, int limit);

  private:
    boost::asio::awaitable<Response> list(const Request& req, const char* key_column,
                                          const std::string& key);

    ServiceContext& ctx_;
    std::mutex mutex_;
    std::chrono::steady_clock::time_point latest_read_at_{};
    std::int64_t latest_ = -1;
    bool reading_ = false;  // a stream is reading latest_ anew
};

}  // namespace trackd::http
