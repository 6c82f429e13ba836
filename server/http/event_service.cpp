#include "event_service.hpp"

#include <charconv>

#include "trackd/events/counters.hpp"

#include "feature_page.hpp"
#include "params.hpp"
#include "problem.hpp"
#include "sql_builder.hpp"

namespace trackd::http {
namespace {

// As for the geofence endpoints.
constexpr std::size_t kMaxZoneNameBytes = 200;

// 9 columns: event_id, vehicle_id, zone_name, kind, event_time (µs), lon, lat, kafka_partition,
// kafka_offset.
const char* const kEventColumns =
    "event_id, vehicle_id, zone_name, kind, (extract(epoch FROM event_time) * 1000000)::int8, "
    "ST_X(geom), ST_Y(geom), kafka_partition, kafka_offset";

void write_event(JsonWriter& w, const db::Result& r, int row) {
    w.begin_object();
    w.key("type").value("Feature");
    w.key("id").number_text(r.at(row, 0));
    w.key("geometry").begin_object();
    w.key("type").value("Point");
    w.key("coordinates").begin_array();
    w.number_text(r.at(row, 5));
    w.number_text(r.at(row, 6));
    w.end_array();
    w.end_object();
    w.key("properties").begin_object();
    w.key("event_id").number_text(r.at(row, 0));
    w.key("vehicle_id").value(r.at(row, 1));
    w.key("zone_name").value(r.at(row, 2));
    w.key("kind").value(r.at(row, 3));
    w.key("event_time").value(format_rfc3339(std::stoll(r.at(row, 4))));
    w.key("kafka_partition").number_text(r.at(row, 7));
    w.key("kafka_offset").number_text(r.at(row, 8));
    w.end_object();
    w.end_object();
}

std::int64_t parse_event_id(const std::string& name, const std::string& text) {
    std::int64_t v = 0;
    const char* b = text.data();
    const char* e = b + text.size();
    auto [ptr, ec] = std::from_chars(b, e, v);
    if (text.empty() || ec != std::errc{} || ptr != e || v < 0) {
        bad_parameter(name,
                      "'" + quotable(text) + "' is not an event id (a whole number, 0 or more)");
    }
    return v;
}

// One GET /v1/events/stream response: polls for events after its position.
class EventStream : public BodyStream {
  public:
    EventStream(EventService& service, std::int64_t after) : service_(service), after_(after) {
        events::stream_clients_connected().inc();
        events::stream_clients_open().inc();
    }
    ~EventStream() override { events::stream_clients_open().dec(); }
    EventStream(const EventStream&) = delete;
    EventStream& operator=(const EventStream&) = delete;

    boost::asio::awaitable<std::string> next() override {
        const std::int64_t latest = co_await service_.latest_event_id();
        if (latest <= after_) co_return std::string();
        std::string text = co_await service_.events_after(after_, kPage);
        co_return text;
    }
    [[nodiscard]] std::chrono::milliseconds poll_interval() const override {
        return EventService::kPollInterval;
    }
    [[nodiscard]] std::chrono::milliseconds heartbeat() const override {
        return EventService::kHeartbeat;
    }

  private:
    static constexpr int kPage = 500;
    EventService& service_;
    std::int64_t after_;
};

}  // namespace

void EventService::add_routes(Router& router) {
    router.add("GET", "/v1/geofences/{}/events", Access::read,
               [this](const Request& r, const auto& a) { return zone_events(r, a[0]); });
    router.add("GET", "/v1/vehicles/{}/events", Access::read,
               [this](const Request& r, const auto& a) { return vehicle_events(r, a[0]); });
    router.add("GET", "/v1/events/stream", Access::read,
               [this](const Request& r, const auto&) { return stream(r); });
}

boost::asio::awaitable<Response> EventService::zone_events(const Request& req,
                                                           const std::string& zone_name) {
    check_identifier("zone_name", zone_name, kMaxZoneNameBytes);
    co_return co_await list(req, "zone_name", zone_name);
}

boost::asio::awaitable<Response> EventService::vehicle_events(const Request& req,
                                                              const std::string& vehicle_id) {
    check_identifier("vehicle_id", vehicle_id, kMaxIdentifierBytes);
    co_return co_await list(req, "vehicle_id", vehicle_id);
}

boost::asio::awaitable<Response> EventService::list(const Request& req, const char* key_column,
                                                    const std::string& key) {
    const auto& q = req.query;
    q.only({"from", "to", "limit", "after"});
    const FeaturePage page(req, ctx_.fallback_host,
                           parse_limit(q, kDefaultLimit, ctx_.http.max_limit));
    std::optional<std::int64_t> from;
    std::optional<std::int64_t> to;
    if (const auto t = q.get("from")) from = parse_rfc3339("from", *t);
    if (const auto t = q.get("to")) to = parse_rfc3339("to", *t);
    if (from && to && *from > *to) {
        bad_parameter("from",
                      "'" + format_rfc3339(*from) + "' is after to '" + format_rfc3339(*to) + "'");
    }
    // Time order, ties by id; the page key is the last event's (event_time, event_id), found
    // from its id. Answered from the (key, event_time, event_id) indexes of V0007.
    SqlBuilder sql(std::string("SELECT ") + kEventColumns + " FROM trackd.geofence_events WHERE " +
                   key_column + " = ");
    sql += sql.bind(key);
    if (from) sql += " AND event_time >= " + sql.bind(format_rfc3339(*from)) + "::timestamptz";
    if (to) sql += " AND event_time <= " + sql.bind(format_rfc3339(*to)) + "::timestamptz";
    // The cursor is the previous page's last event; 0 starts at the first, as the stream's
    // last_event_id=0 does.
    const std::int64_t after = q.get("after") ? parse_event_id("after", *q.get("after")) : 0;
    if (after > 0) {
        sql +=
            " AND (event_time, event_id) > (SELECT event_time, event_id FROM "
            "trackd.geofence_events WHERE event_id = " +
            sql.bind(std::to_string(after)) + "::int8)";
    }
    sql += " ORDER BY event_time, event_id LIMIT " + sql.bind(page.fetch_limit());
    const auto st = statement_for(sql.sql());
    const auto r = co_await ctx_.pool.run(st, sql.params());
    // An id of no event compares with nothing, so its page is empty, as if there were no more:
    // only then is the cursor looked up, and a 400 answers one that names no event.
    if (r.rows() == 0 && after > 0) {
        static const Statement exists{"event_exists",
                                      "SELECT 1 FROM trackd.geofence_events WHERE event_id = $1"};
        const db::Params id{std::to_string(after)};
        const auto found = co_await ctx_.pool.run(exists, id);
        if (found.rows() == 0) {
            bad_parameter("after", "'" + std::to_string(after) +
                                       "' is the id of no event; copy it from a next link, or "
                                       "leave it out (or 0) to start at the first event");
        }
    }
    co_return page.respond(r, [&r](JsonWriter& w, int row) { write_event(w, r, row); });
}

boost::asio::awaitable<std::int64_t> EventService::latest_event_id() {
    const auto now = std::chrono::steady_clock::now();
    {
        // One stream reads it for all; the others take the last value meanwhile.
        const std::lock_guard lock(mutex_);
        if (latest_ >= 0 && (now - latest_read_at_ < kPollInterval || reading_)) co_return latest_;
        reading_ = true;
    }
    static const Statement st{"events_latest",
                              "SELECT last_event_id FROM trackd.geofence_event_ids"};
    std::int64_t latest = 0;
    try {
        const auto r = co_await ctx_.pool.run(st);
        latest = r.rows() == 0 ? 0 : std::stoll(r.at(0, 0));
    } catch (...) {
        const std::lock_guard lock(mutex_);
        reading_ = false;
        throw;
    }
    const std::lock_guard lock(mutex_);
    reading_ = false;
    latest_ = std::max(latest_, latest);
    latest_read_at_ = now;
    co_return latest_;
}

boost::asio::awaitable<std::string> EventService::events_after(std::int64_t& after, int limit) {
    static const Statement st{"events_after", std::string("SELECT ") + kEventColumns +
                                                  " FROM trackd.geofence_events WHERE event_id > "
                                                  "$1::int8 ORDER BY event_id LIMIT $2::int"};
    const db::Params params{std::to_string(after), std::to_string(limit)};
    const auto r = co_await ctx_.pool.run(st, params);
    std::string out;
    for (int i = 0; i < r.rows(); ++i) {
        JsonWriter w;
        write_event(w, r, i);
        out += "id: " + r.at(i, 0) + "\nevent: " + r.at(i, 3) + "\ndata: " + w.take() + "\n\n";
        after = std::stoll(r.at(i, 0));
    }
    co_return out;
}

boost::asio::awaitable<Response> EventService::stream(const Request& req) {
    req.query.only({"last_event_id"});
    std::optional<std::int64_t> after;
    // The header wins: it is what a reconnecting EventSource sends.
    if (!req.last_event_id.empty()) {
        after = parse_event_id("Last-Event-ID", req.last_event_id);
    } else if (const auto t = req.query.get("last_event_id")) {
        after = parse_event_id("last_event_id", *t);
    }
    if (!after) after = co_await latest_event_id();
    const std::int64_t start = *after;
    Response r;
    r.content_type = "text/event-stream";
    r.headers.emplace_back("Cache-Control", "no-store");
    r.headers.emplace_back("X-Accel-Buffering", "no");
    // First bytes at once, so a client sees the stream open; `retry` is EventSource's
    // reconnection delay.
    r.body = ": trackd geofence events after " + std::to_string(start) + "\nretry: 1000\n\n";
    r.stream = std::make_shared<EventStream>(*this, start);
    co_return r;
}

}  // namespace trackd::http
