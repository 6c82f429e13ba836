#include "geofence_service.hpp"

#include <cmath>
#include <optional>

#include "trackd/db/binary.hpp"

#include "feature_page.hpp"
#include "feature_writer.hpp"
#include "fence_geometry.hpp"
#include "params.hpp"
#include "problem.hpp"
#include "sql_builder.hpp"

namespace trackd::http {
namespace {

// Zone names are identifiers people type; a short bound keeps them usable in URLs and logs.
constexpr std::size_t kMaxZoneNameBytes = 200;
// Longest debounce a zone may have (one day), as the database's constraint says.
constexpr int kMaxDwellS = 86400;

[[noreturn]] void zone_not_found(const std::string& name) {
    throw ProblemError(ProblemKind::resource_not_found,
                       "zone_name: no geofence '" + name + "' exists", "zone_name");
}

const Statement kZoneExists{"geofence_exists",
                            "SELECT 1 FROM trackd.geofence_zones WHERE zone_name = $1"};

// The vehicles inside a zone, counted up to sqrt($2 * fleet) ($2: the largest page plus one),
// and the fleet: the current state's rows by its statistics, at least 10,000 (a table not yet
// analyzed has none).
const Statement kZoneSize{
    "geofence_size",
    "WITH k AS (SELECT greatest(reltuples, 10000)::float8 AS fleet FROM pg_catalog.pg_class "
    "WHERE oid = 'trackd.vehicle_current_state'::regclass) SELECT (SELECT count(*) FROM (SELECT 1 "
    "FROM trackd.vehicle_current_state v JOIN trackd.geofence_zones z ON z.zone_name = $1 AND "
    "ST_Covers(z.fence_geom, v.geom) AND v.cell_corner && trackd.cell_corners_for(z.fence_geom) "
    "LIMIT (SELECT ceil(sqrt($2::float8 * fleet))::int8 FROM k)) s), (SELECT fleet FROM k)"};
constexpr auto kZoneSizeMaxAge = std::chrono::minutes(1);
constexpr std::size_t kMaxZoneSizes = 10000;  // names asked for, zones or not: then start over

bool json_content_type(const std::string& content_type) {
    std::string base = content_type.substr(0, content_type.find(';'));
    while (!base.empty() && base.back() == ' ') base.pop_back();
    for (auto& c : base) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return base == "application/json" || base == "application/geo+json";
}

}  // namespace

void GeofenceService::add_routes(Router& router) {
    router.add("GET", "/v1/geofences", Access::read,
               [this](const Request& r, const auto&) { return list(r); });
    router.add("GET", "/v1/geofences/{}", Access::read,
               [this](const Request& r, const auto& a) { return get(r, a[0]); });
    router.add("PUT", "/v1/geofences/{}", Access::write,
               [this](const Request& r, const auto& a) { return put(r, a[0]); });
    router.add("DELETE", "/v1/geofences/{}", Access::write,
               [this](const Request& r, const auto& a) { return remove(r, a[0]); });
    router.add("GET", "/v1/geofences/{}/vehicles", Access::read,
               [this](const Request& r, const auto& a) { return vehicles(r, a[0]); });
}

boost::asio::awaitable<Response> GeofenceService::put(const Request& req,
                                                      const std::string& zone_name) {
    req.query.only({"repair", "dwell_s"});
    check_identifier("zone_name", zone_name, kMaxZoneNameBytes);
    if (!json_content_type(req.content_type)) {
        throw ProblemError(ProblemKind::unsupported_media_type,
                           "Content-Type: '" + quotable(req.content_type) +
                               "' is not application/geo+json or application/json",
                           "Content-Type");
    }
    const bool repair =
        req.query.get("repair") ? parse_bool("repair", *req.query.get("repair")) : false;
    // Debounce of the zone's events; absent: 0 for a new zone, unchanged for an existing one.
    std::optional<std::string> dwell;
    if (const auto text = req.query.get("dwell_s")) {
        const double d = parse_number("dwell_s", *text);
        if (d < 0 || d > kMaxDwellS || d != std::floor(d)) {
            bad_parameter("dwell_s", "'" + *text + "' is not a whole number of seconds from 0 to " +
                                         std::to_string(kMaxDwellS));
        }
        dwell = std::to_string(static_cast<long>(d));
    }
    const FenceGeometry fence = parse_fence(req.body, repair);
    // xmax = 0 only for a freshly inserted row: tells 201 from 200.
    static const Statement st{
        "geofence_put",
        std::string("INSERT INTO trackd.geofence_zones AS z (zone_name, fence_geom, dwell_s) "
                    "VALUES ($1, $2::geometry, coalesce($3::int, 0)) ON CONFLICT (zone_name) DO "
                    "UPDATE SET fence_geom = EXCLUDED.fence_geom, "
                    "dwell_s = coalesce($3::int, z.dwell_s), updated_at = now() RETURNING ") +
            kGeofenceColumns + ", (xmax = 0)"};
    const db::Params params{zone_name, fence.ewkb_hex, dwell};
    const auto r = co_await ctx_.primary.run(st, params);
    forget_size(zone_name);
    const bool created = r.at(0, 6) == "t";
    JsonWriter w;
    write_geofence(w, r, 0);
    std::string body = w.take();
    // The repaired flag belongs to this answer, not to the stored zone: splice it in.
    body.insert(body.size() - 2,
                std::string(",\"repaired\":") + (fence.repaired ? "true" : "false"));
    Response resp = geojson_response(std::move(body), created ? 201 : 200);
    resp.headers.emplace_back("Location", "/v1/geofences/" + percent_encode(zone_name));
    co_return resp;
}

boost::asio::awaitable<Response> GeofenceService::get(const Request& req,
                                                      const std::string& zone_name) {
    req.query.only({});
    check_identifier("zone_name", zone_name, kMaxZoneNameBytes);
    static const Statement st{"geofence_get", std::string("SELECT ") + kGeofenceColumns +
                                                  " FROM trackd.geofence_zones "
                                                  "WHERE zone_name = $1"};
    const db::Params key{zone_name};
    const auto r = co_await ctx_.pool.run(st, key);
    if (r.rows() == 0) zone_not_found(zone_name);
    JsonWriter w;
    write_geofence(w, r, 0);
    co_return geojson_response(w.take());
}

boost::asio::awaitable<Response> GeofenceService::list(const Request& req) {
    const auto& q = req.query;
    q.only({"limit", "after"});
    const FeaturePage page(req, ctx_.fallback_host,
                           parse_limit(q, kDefaultLimit, ctx_.http.max_limit));
    SqlBuilder sql(std::string("SELECT ") + kGeofenceColumns +
                   " FROM trackd.geofence_zones WHERE true");
    if (const auto after = q.get("after")) {
        check_identifier("after", *after, kMaxIdentifierBytes);
        sql += " AND zone_name > " + sql.bind(*after);
    }
    sql += " ORDER BY zone_name" + page.limit_clause();
    const auto st = statement_for(sql.sql());
    const auto r = co_await ctx_.pool.run(st, sql.params());
    co_return page.respond(r, [&r](JsonWriter& w, int row) { write_geofence(w, r, row); });
}

boost::asio::awaitable<Response> GeofenceService::remove(const Request& req,
                                                         const std::string& zone_name) {
    req.query.only({});
    check_identifier("zone_name", zone_name, kMaxZoneNameBytes);
    // The zone's detection state goes with it (its events stay). No exit events are written.
    static const Statement st{"geofence_delete",
                              "WITH z AS (DELETE FROM trackd.geofence_zones WHERE zone_name = $1 "
                              "RETURNING zone_id), s AS (DELETE FROM trackd.geofence_vehicle_state "
                              "WHERE zone_id IN (SELECT zone_id FROM z)) SELECT count(*) FROM z"};
    const db::Params key{zone_name};
    const auto deleted = co_await ctx_.primary.run(st, key);
    forget_size(zone_name);
    if (deleted.at(0, 0) == "0") zone_not_found(zone_name);
    Response r;
    r.status = 204;
    r.content_type.clear();
    co_return r;
}

boost::asio::awaitable<Response> GeofenceService::vehicles(const Request& req,
                                                           const std::string& zone_name) {
    const auto& q = req.query;
    q.only({"state", "limit", "after"});
    check_identifier("zone_name", zone_name, kMaxZoneNameBytes);
    const std::string state = q.get("state").value_or("inside");
    if (state != "inside" && state != "outside") {
        bad_parameter("state", "'" + state + "' is not inside or outside");
    }
    const int limit = parse_limit(q, kDefaultLimit, ctx_.http.max_limit);
    const FeaturePage page(req, ctx_.fallback_host, limit);
    std::string after;
    if (const auto a = q.get("after")) {
        check_identifier("after", *a, kMaxIdentifierBytes);
        after = *a;
    }
    // Inside = covered by the zone, boundary included (ST_Covers). For most zones the vehicles
    // inside are read from the SP-GiST on the corners of their grid cells (V0011, V0016: the
    // cells reaching into the zone's bounding box hold every vehicle inside it) and sorted for
    // the page. A zone that holds much of the fleet is paged by walking the primary key and
    // testing each vehicle until the page is full (`_ST_Covers`: ST_Covers without its index
    // clause, so that PostgreSQL expects many to match and walks the key), instead of reading
    // every vehicle in the zone for each page (docs/benchmarks.md, "Vehicles inside a large
    // geofence"). Outside walks the key the same way and measures only the page: the geodesic
    // distance to the zone, on the spheroid. Where the key is walked the zone comes from a
    // MATERIALIZED CTE, which keeps the walk out of parallel workers: their start costs more
    // than the page. The first page has no `after` condition: in a generic plan
    // "vehicle_id > $2" would be planned as a range over the whole key.
    const bool is_inside = state == "inside";
    bool walk_the_key = !is_inside;
    if (is_inside) {
        walk_the_key = co_await holds_much_of_the_fleet(zone_name, limit + 1);
    }
    SqlBuilder sql("");
    if (walk_the_key) {
        sql +=
            "WITH z AS MATERIALIZED (SELECT fence_geom FROM trackd.geofence_zones WHERE "
            "zone_name = " +
            sql.bind(zone_name) + ") ";
    }
    sql += std::string("SELECT ") + kVehicleColumns;
    const std::string and_after = after.empty() ? "" : " AND v.vehicle_id > " + sql.bind(after);
    if (!is_inside) {
        sql +=
            ", ST_Distance(z.fence_geom::geography, v.geom::geography) FROM (SELECT v.* FROM "
            "trackd.vehicle_current_state v, z WHERE NOT ST_Covers(z.fence_geom, v.geom)" +
            and_after + " ORDER BY v.vehicle_id" + page.limit_clause() +
            ") v, z ORDER BY v.vehicle_id";
    } else if (walk_the_key) {
        sql += " FROM trackd.vehicle_current_state v, z WHERE _ST_Covers(z.fence_geom, v.geom)" +
               and_after + " ORDER BY v.vehicle_id" + page.limit_clause();
    } else {
        sql +=
            " FROM trackd.vehicle_current_state v JOIN trackd.geofence_zones z ON z.zone_name = " +
            sql.bind(zone_name) +
            " AND ST_Covers(z.fence_geom, v.geom) AND v.cell_corner && "
            "trackd.cell_corners_for(z.fence_geom)" +
            and_after + " ORDER BY v.vehicle_id" + page.limit_clause();
    }
    const auto st = statement_for(sql.sql(), db::Format::binary);
    const auto r = co_await ctx_.pool.run(st, sql.params());
    if (r.rows() == 0) {  // no vehicle, or no zone?
        const db::Params key{zone_name};
        const auto zone = co_await ctx_.pool.run(kZoneExists, key);
        if (zone.rows() == 0) zone_not_found(zone_name);
    }
    co_return page.respond(r, [&](JsonWriter& w, int row) {
        if (is_inside) {
            write_vehicle(w, r, row);
        } else {
            write_vehicle(
                w, r, row,
                {{"meters_outside", db::binary::float8(r.at_view(row, kVehicleColumnCount))}});
        }
    });
}

boost::asio::awaitable<bool> GeofenceService::holds_much_of_the_fleet(const std::string& zone_name,
                                                                      std::int64_t fetch) {
    const auto now = std::chrono::steady_clock::now();
    std::optional<ZoneSize> size;
    {
        const std::lock_guard lock(sizes_mutex_);
        const auto it = sizes_.find(zone_name);
        if (it != sizes_.end() && now - it->second.counted < kZoneSizeMaxAge) size = it->second;
    }
    if (!size) {
        const db::Params params{zone_name, std::to_string(ctx_.http.max_limit + 1)};
        const auto r = co_await ctx_.pool.run(kZoneSize, params);
        size = ZoneSize{std::stoll(r.at(0, 0)), std::stod(r.at(0, 1)), now};
        const std::lock_guard lock(sizes_mutex_);
        if (sizes_.size() >= kMaxZoneSizes) sizes_.clear();
        sizes_[zone_name] = *size;
    }
    co_return static_cast<double>(size->vehicles) >=
        std::ceil(std::sqrt(static_cast<double>(fetch) * size->fleet));
}

void GeofenceService::forget_size(const std::string& zone_name) {
    const std::lock_guard lock(sizes_mutex_);
    sizes_.erase(zone_name);
}

}  // namespace trackd::http
