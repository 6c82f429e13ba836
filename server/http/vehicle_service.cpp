#include "vehicle_service.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>

#include <fmt/format.h>

#include "trackd/core/time.hpp"
#include "trackd/db/binary.hpp"

#include "feature_page.hpp"
#include "feature_writer.hpp"
#include "links.hpp"
#include "params.hpp"
#include "problem.hpp"
#include "sql_builder.hpp"

namespace trackd::http {
namespace {

// The default track window when `from` is not given.
constexpr std::int64_t kDefaultTrackWindowUs = 24LL * 3600 * 1000000;

[[noreturn]] void vehicle_not_found(const std::string& id) {
    throw ProblemError(ProblemKind::resource_not_found,
                       "vehicle_id: no vehicle '" + id + "' is known", "vehicle_id");
}

// A vehicle with no positions in the asked window still exists if trackd ever saw it.
const Statement kVehicleExists{
    "vehicle_exists",
    "SELECT 1 FROM trackd.vehicle_current_state WHERE vehicle_id = $1 UNION ALL "
    "SELECT 1 FROM trackd.vehicle_telemetry_history WHERE vehicle_id = $1 LIMIT 1"};

// A longitude/latitude box holding every point within radius_m (geodesic, WGS 84) of
// (lon, lat). Along any path, latitude changes by at most distance / M, M >= a(1 - e^2) being
// the meridian's radius of curvature, and longitude by at most distance / (a cos(lat)) at the
// path's highest |lat| (a parallel's radius is N cos(lat) >= a cos(lat)). 1% more, for rounding.
// Near a pole or across the antimeridian the box spans every longitude.
struct Box {
    double xmin = -180, ymin = -90, xmax = 180, ymax = 90;
};
Box nearby_box(double lon, double lat, double radius_m) {
    constexpr double kA = 6378137.0;                       // WGS 84 semi-major axis
    constexpr double kMinMeridianRadius = 6335439.327292;  // a (1 - e^2)
    constexpr double kDegPerRad = 57.29577951308232;
    Box box;
    const double dlat = radius_m / kMinMeridianRadius * kDegPerRad * 1.01;
    box.ymin = lat - dlat;
    box.ymax = lat + dlat;
    if (box.ymin <= -90 || box.ymax >= 90) {
        box.ymin = std::max(box.ymin, -90.0);
        box.ymax = std::min(box.ymax, 90.0);
        return box;
    }
    const double polar = std::max(std::fabs(box.ymin), std::fabs(box.ymax));
    const double dlon = radius_m / (kA * std::cos(polar / kDegPerRad)) * kDegPerRad * 1.01;
    if (lon - dlon >= -180 && lon + dlon <= 180) {
        box.xmin = lon - dlon;
        box.xmax = lon + dlon;
    }
    return box;
}

// A vehicle's positions in [from, to] ($2, $3), after a cursor ($5..$8) when `cursor`, in time
// order (ties by ingest order), at most $4: one more than the limit, to tell whether the track
// was cut.
std::string track_window_sql(bool cursor) {
    return std::string(
               "SELECT recorded_at, geom, speed_kmh, heading_deg, accuracy_m, ingest_batch_id, "
               "kafka_partition, kafka_offset FROM trackd.vehicle_telemetry_history WHERE "
               "vehicle_id = $1 AND recorded_at >= $2::timestamptz AND recorded_at <= "
               "$3::timestamptz") +
           (cursor ? " AND (recorded_at, ingest_batch_id, kafka_partition, kafka_offset) > "
                     "($5::timestamptz, $6::int8, $7::int4, $8::int8)"
                   : "") +
           " ORDER BY recorded_at, ingest_batch_id, kafka_partition, kafka_offset LIMIT $4::int8";
}

// format=points: each position with the geodesic distance from the one before it on the page.
std::string track_points_sql(bool cursor) {
    return "SELECT (extract(epoch FROM recorded_at) * 1000000)::int8, ST_X(geom), ST_Y(geom), "
           "ST_Z(geom), speed_kmh, heading_deg, accuracy_m, "
           "coalesce(ST_Distance(lag(geom) OVER w::geography, geom::geography), 0), "
           "ingest_batch_id, kafka_partition, kafka_offset FROM (" +
           track_window_sql(cursor) +
           ") p WINDOW w AS (ORDER BY recorded_at, ingest_batch_id, kafka_partition, "
           "kafka_offset) ORDER BY recorded_at, ingest_batch_id, kafka_partition, kafka_offset";
}

// format=line: the page's positions as one line, its length, first and last times, whether the
// track was cut, and the cursor of its last position.
std::string track_line_sql(bool cursor) {
    return "WITH p0 AS (" + track_window_sql(cursor) +
           "), p AS (SELECT * FROM p0 ORDER BY recorded_at, ingest_batch_id, kafka_partition, "
           "kafka_offset LIMIT $4::int8 - 1), "
           "l AS (SELECT ST_MakeLine(geom ORDER BY recorded_at, ingest_batch_id, "
           "kafka_partition, kafka_offset) AS line, count(*) AS n, "
           "(extract(epoch FROM min(recorded_at)) * 1000000)::int8 AS t0, "
           "(extract(epoch FROM max(recorded_at)) * 1000000)::int8 AS t1 FROM p) "
           "SELECT n, t0, t1, "
           "CASE WHEN n >= 2 THEN ST_AsGeoJSON(ST_Force2D(line), 9) "
           "WHEN n = 1 THEN ST_AsGeoJSON(ST_Force2D(ST_PointN(line, 1)), 9) END, "
           "CASE WHEN n >= 2 THEN ST_Length(line::geography) ELSE 0 END, "
           "(SELECT count(*) FROM p0) > $4::int8 - 1, "
           "(SELECT format('%s_%s_%s_%s', (extract(epoch FROM recorded_at) * 1000000)::int8, "
           "ingest_batch_id, kafka_partition, kafka_offset) FROM p ORDER BY recorded_at DESC, "
           "ingest_batch_id DESC, kafka_partition DESC, kafka_offset DESC LIMIT 1) FROM l";
}

}  // namespace

void VehicleService::add_routes(Router& router) {
    router.add("GET", "/v1/vehicles", Access::read,
               [this](const Request& r, const auto&) { return list(r); });
    router.add("GET", "/v1/vehicles/nearby", Access::read,
               [this](const Request& r, const auto&) { return nearby(r); });
    router.add("GET", "/v1/vehicles/{}", Access::read,
               [this](const Request& r, const auto& a) { return get(r, a[0]); });
    router.add("GET", "/v1/vehicles/{}/track", Access::read,
               [this](const Request& r, const auto& a) { return track(r, a[0]); });
}

boost::asio::awaitable<Response> VehicleService::get(const Request& req,
                                                     const std::string& vehicle_id) {
    req.query.only({});
    check_identifier("vehicle_id", vehicle_id, kMaxIdentifierBytes);
    static const Statement st{"vehicle_get",
                              std::string("SELECT ") + kVehicleColumns +
                                  " FROM trackd.vehicle_current_state "
                                  "WHERE vehicle_id = $1",
                              db::Format::binary};
    const db::Params key{vehicle_id};
    const auto r = co_await ctx_.pool.run(st, key);
    if (r.rows() == 0) vehicle_not_found(vehicle_id);
    JsonWriter w;
    write_vehicle(w, r, 0);
    co_return geojson_response(w.take());
}

boost::asio::awaitable<Response> VehicleService::list(const Request& req) {
    const auto& q = req.query;
    q.only({"bbox", "updated_since", "limit", "after"});
    const FeaturePage page(req, ctx_.fallback_host,
                           parse_limit(q, kDefaultLimit, ctx_.http.max_limit));
    SqlBuilder sql(std::string("SELECT ") + kVehicleColumns +
                   " FROM trackd.vehicle_current_state WHERE true");
    auto statement = statement_for;
    if (const auto text = q.get("bbox")) {
        const BBox b = parse_bbox("bbox", *text);
        if (box_planned_each_time(b)) statement = planned_each_time;
        const std::string env = "ST_MakeEnvelope(" + sql.bind(fmt::format("{}", b.min_lon)) + ", " +
                                sql.bind(fmt::format("{}", b.min_lat)) + ", " +
                                sql.bind(fmt::format("{}", b.max_lon)) + ", " +
                                sql.bind(fmt::format("{}", b.max_lat)) + ", 4326)";
        sql += " AND " + vehicle_in_box(env);
    }
    if (const auto text = q.get("updated_since")) {
        sql += " AND last_updated >= " +
               sql.bind(format_rfc3339(parse_rfc3339("updated_since", *text))) + "::timestamptz";
    }
    if (const auto after = q.get("after")) {
        check_identifier("after", *after, kMaxIdentifierBytes);
        sql += " AND vehicle_id > " + sql.bind(*after);
    }
    // Ordered by the primary key, so that following `next` links returns every vehicle exactly
    // once.
    sql += " ORDER BY vehicle_id" + page.limit_clause();
    const auto st = statement(sql.sql(), db::Format::binary);
    const auto r = co_await ctx_.pool.run(st, sql.params());
    co_return page.respond(r, [&r](JsonWriter& w, int row) { write_vehicle(w, r, row); });
}

boost::asio::awaitable<Response> VehicleService::nearby(const Request& req) {
    const auto& q = req.query;
    q.only({"lon", "lat", "radius_m", "limit"});
    for (const char* name : {"lon", "lat", "radius_m"}) {
        if (!q.get(name)) bad_parameter(name, "required");
    }
    const double lon = parse_longitude("lon", *q.get("lon"));
    const double lat = parse_latitude("lat", *q.get("lat"));
    const double radius = parse_number("radius_m", *q.get("radius_m"));
    if (radius <= 0 || radius > kMaxNearbyRadiusM) {
        bad_parameter("radius_m",
                      fmt::format("{} is not in (0, {}] metres", radius, kMaxNearbyRadiusM));
    }
    const int limit = parse_limit(q, kDefaultLimit, ctx_.http.max_limit);
    // Candidates come from the cells' SP-GiST through a longitude/latitude box that contains
    // every point within the radius; ST_DWithin on geography then keeps those within the
    // geodesic (spheroid) radius, and the order is exact on PostGIS's geodesic distance.
    const auto box = nearby_box(lon, lat, radius);
    // The limit is SQL text, as in FeaturePage::limit_clause(): the generic plan is kept.
    const auto st = statement_for(
        std::string("WITH p AS (SELECT ST_SetSRID(ST_MakePoint($1, $2), 4326)::geography AS g) "
                    "SELECT ") +
            kVehicleColumns +
            ", ST_Distance(v.geom::geography, p.g) AS distance_m "
            "FROM trackd.vehicle_current_state v, p "
            "WHERE " +
            vehicle_in_box("ST_MakeEnvelope($4, $5, $6, $7, 4326)", "v.") +
            " AND ST_DWithin(v.geom::geography, p.g, $3) "
            "ORDER BY distance_m, vehicle_id LIMIT " +
            std::to_string(limit),
        db::Format::binary);
    const db::Params params{fmt::format("{}", lon),      fmt::format("{}", lat),
                            fmt::format("{}", radius),   fmt::format("{}", box.xmin),
                            fmt::format("{}", box.ymin), fmt::format("{}", box.xmax),
                            fmt::format("{}", box.ymax)};
    const auto r = co_await ctx_.pool.run(st, params);
    JsonWriter w;
    w.begin_object();
    w.key("type").value("FeatureCollection");
    w.key("features").begin_array();
    for (int i = 0; i < r.rows(); ++i)
        write_vehicle(w, r, i,
                      {{"distance_m", db::binary::float8(r.at_view(i, kVehicleColumnCount))}});
    w.end_array();
    w.key("numberReturned").value(r.rows());
    w.key("links").begin_array();
    write_link(w, "self", "application/geo+json", url_with(req, ctx_.fallback_host, {}));
    w.end_array();
    w.end_object();
    co_return geojson_response(w.take());
}

boost::asio::awaitable<Response> VehicleService::track(const Request& req,
                                                       const std::string& vehicle_id) {
    const auto& q = req.query;
    q.only({"from", "to", "format", "limit", "after"});
    check_identifier("vehicle_id", vehicle_id, kMaxIdentifierBytes);
    const std::int64_t to = q.get("to") ? parse_rfc3339("to", *q.get("to")) : core::now_us();
    const std::int64_t from =
        q.get("from") ? parse_rfc3339("from", *q.get("from"))
                      // Not before year 1: PostgreSQL would refuse the text of an earlier instant.
                      : std::max(to - kDefaultTrackWindowUs, earliest_time_us());
    if (from > to) {
        bad_parameter("from",
                      "'" + format_rfc3339(from) + "' is after to '" + format_rfc3339(to) + "'");
    }
    const std::string format = q.get("format").value_or("line");
    if (format != "line" && format != "points") {
        bad_parameter("format", "'" + format + "' is not line or points");
    }
    const int limit = parse_limit(q, ctx_.http.max_limit, ctx_.http.max_limit);
    db::Params params{vehicle_id, format_rfc3339(from), format_rfc3339(to),
                      std::to_string(limit + 1)};
    // A cut track goes on from where its page ended (the next link's `after`).
    const auto after = q.get("after");
    if (after) {
        const PositionCursor c = parse_position_cursor("after", *after);
        params.insert(params.end(), {format_rfc3339(c.recorded_at_us), std::to_string(c.batch),
                                     std::to_string(c.partition), std::to_string(c.offset)});
    }
    const std::size_t with_cursor = after ? 1 : 0;
    // The link to the rest of a cut track: this request with `after` at its last position.
    const auto links = [&](JsonWriter& w, const std::string& cursor) {
        w.key("links").begin_array();
        write_link(w, "self", "application/geo+json", url_with(req, ctx_.fallback_host, {}));
        if (!cursor.empty()) {
            write_link(w, "next", "application/geo+json",
                       url_with(req, ctx_.fallback_host, {{"after", cursor}}));
        }
        w.end_array();
    };

    JsonWriter w;
    if (format == "points") {
        static const std::array<Statement, 2> st{
            Statement{"vehicle_track_points", track_points_sql(false)},
            Statement{"vehicle_track_points_after", track_points_sql(true)}};
        const auto r = co_await ctx_.pool.run(st.at(with_cursor), params);
        const int n = std::min(r.rows(), limit);
        if (n == 0) {
            const db::Params key{vehicle_id};
            const auto known = co_await ctx_.pool.run(kVehicleExists, key);
            if (known.rows() == 0) vehicle_not_found(vehicle_id);
        }
        w.begin_object();
        w.key("type").value("FeatureCollection");
        w.key("features").begin_array();
        for (int i = 0; i < n; ++i) {
            w.begin_object();
            w.key("type").value("Feature");
            w.key("id").value(r.at(i, 8) + "-" + r.at(i, 9) + "-" + r.at(i, 10));
            w.key("geometry").begin_object();
            w.key("type").value("Point");
            w.key("coordinates").begin_array().number_text(r.at(i, 1)).number_text(r.at(i, 2));
            w.end_array().end_object();
            w.key("properties").begin_object();
            w.key("vehicle_id").value(vehicle_id);
            w.key("recorded_at").value(format_rfc3339(std::stoll(r.at(i, 0))));
            for (const auto& [name, col] : {std::pair{"altitude_m", 3},
                                            {"speed_kmh", 4},
                                            {"heading_deg", 5},
                                            {"accuracy_m", 6}}) {
                w.key(name);
                if (const auto v = r.get(i, col)) {
                    w.number_text(*v);
                } else {
                    w.null();
                }
            }
            w.key("step_distance_m").number_text(r.at(i, 7));
            w.end_object();
            w.end_object();
        }
        w.end_array();
        w.key("numberReturned").value(n);
        const bool truncated = r.rows() > limit;
        w.key("truncated").value(truncated);
        links(w, truncated ? fmt::format("{}_{}_{}_{}", r.at(n - 1, 0), r.at(n - 1, 8),
                                         r.at(n - 1, 9), r.at(n - 1, 10))
                           : std::string());
        w.end_object();
        co_return geojson_response(w.take());
    }

    static const std::array<Statement, 2> st{
        Statement{"vehicle_track_line", track_line_sql(false)},
        Statement{"vehicle_track_line_after", track_line_sql(true)}};
    const auto r = co_await ctx_.pool.run(st.at(with_cursor), params);
    const auto n = std::stoll(r.at(0, 0));
    if (n == 0) {
        const db::Params key{vehicle_id};
        const auto known = co_await ctx_.pool.run(kVehicleExists, key);
        if (known.rows() == 0) vehicle_not_found(vehicle_id);
    }
    w.begin_object();
    w.key("type").value("Feature");
    w.key("id").value(vehicle_id);
    w.key("geometry");
    if (const auto g = r.get(0, 3)) {
        w.raw(*g);
    } else {
        w.null();
    }
    w.key("properties").begin_object();
    w.key("vehicle_id").value(vehicle_id);
    w.key("points").value(static_cast<std::int64_t>(n));
    w.key("distance_m").number_text(r.at(0, 4));
    w.key("from").value(format_rfc3339(from));
    w.key("to").value(format_rfc3339(to));
    w.key("first_at");
    if (n > 0) {
        w.value(format_rfc3339(std::stoll(r.at(0, 1))));
    } else {
        w.null();
    }
    w.key("last_at");
    if (n > 0) {
        w.value(format_rfc3339(std::stoll(r.at(0, 2))));
    } else {
        w.null();
    }
    const bool truncated = r.at(0, 5) == "t";
    w.key("truncated").value(truncated);
    w.end_object();
    links(w, truncated ? r.at(0, 6) : std::string());
    w.end_object();
    co_return geojson_response(w.take());
}

}  // namespace trackd::http
