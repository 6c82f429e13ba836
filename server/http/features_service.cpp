#include "features_service.hpp"

#include <array>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "trackd/core/log.hpp"

#include "feature_page.hpp"
#include "feature_writer.hpp"
#include "links.hpp"
#include "params.hpp"
#include "problem.hpp"
#include "sql_builder.hpp"

namespace trackd::http {
namespace {

enum class Kind { vehicles, positions, geofences };

struct Collection {
    Kind kind;
    const char* id;
    const char* title;
    const char* description;
};

constexpr std::array<Collection, 3> kCollections = {{
    {Kind::vehicles, "vehicles", "Vehicles (current state)",
     "The latest known position of every vehicle; temporal property last_updated."},
    {Kind::positions, "positions", "Vehicle positions (history)",
     "Every accepted position; temporal property recorded_at. Feature ids are "
     "<ingest_batch_id>-<kafka_partition>-<kafka_offset>."},
    {Kind::geofences, "geofences", "Geofence zones",
     "Named zones (MultiPolygon); temporal property updated_at."},
}};

constexpr const char* kCrs84 = "http://www.opengis.net/def/crs/OGC/1.3/CRS84";

const Collection& find_collection(const std::string& id) {
    for (const auto& c : kCollections) {
        if (id == c.id) return c;
    }
    throw ProblemError(
        ProblemKind::resource_not_found,
        "collectionId: no collection '" + id + "' (there are vehicles, positions and geofences)",
        "collectionId");
}

// What a collection's data covers, as the planner's statistics (ANALYZE, autovacuum) say: a
// bbox from PostGIS's estimated extents, a time interval from the column's histogram and most
// common values. Catalog reads only, never a scan of the data; absent members are unknown.
struct Extent {
    std::optional<std::array<double, 4>> bbox;
    std::optional<std::int64_t> from_us;
    std::optional<std::int64_t> to_us;
};

// One row per collection that has statistics: id, xmin, ymin, xmax, ymax, first, last (µs).
// Positions: the union over the history's partitions (autovacuum analyzes partitions, never the
// partitioned parent). ST_EstimatedExtent is asked only where statistics exist (it warns
// otherwise). Vehicles: from the positions' statistics (the current state has no GiST whose
// extent PostGIS could read instead since V0014; the statistics pad the extent by a small
// fraction of its size).
constexpr const char* kExtentsSql = R"SQL(
WITH t(coll, relname, geom_col, time_col) AS (
  SELECT 'vehicles', 'vehicle_current_state', 'geom', 'last_updated'
  UNION ALL SELECT 'geofences', 'geofence_zones', 'fence_geom', 'updated_at'
  UNION ALL SELECT 'positions', c.relname::text, 'geom', 'recorded_at'
    FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = 'trackd.vehicle_telemetry_history'::regclass),
space AS (
  SELECT coll, ST_Extent(ST_EstimatedExtent('trackd', relname, geom_col)::geometry) AS b
  FROM t WHERE EXISTS (SELECT 1 FROM pg_stats s WHERE s.schemaname = 'trackd'
                         AND s.tablename = t.relname AND s.attname = t.geom_col)
  GROUP BY coll),
times AS (
  SELECT coll, min(v) AS lo, max(v) AS hi
  FROM t JOIN pg_stats s ON s.schemaname = 'trackd' AND s.tablename = t.relname
                         AND s.attname = t.time_col,
       LATERAL (SELECT unnest(s.histogram_bounds::text::timestamptz[])
                UNION ALL SELECT unnest(s.most_common_vals::text::timestamptz[])) AS x(v)
  GROUP BY coll)
SELECT coalesce(space.coll, times.coll),
       greatest(ST_XMin(b), -180), greatest(ST_YMin(b), -90),
       least(ST_XMax(b), 180), least(ST_YMax(b), 90),
       (extract(epoch FROM lo) * 1000000)::int8, (extract(epoch FROM hi) * 1000000)::int8
FROM space FULL JOIN times ON times.coll = space.coll
)SQL";

boost::asio::awaitable<std::map<std::string, Extent>> load_extents(ConnectionPool& pool) {
    static const Statement st{"ogc_extents", kExtentsSql};
    std::map<std::string, Extent> out;
    try {
        const auto r = co_await pool.run(st);
        for (int i = 0; i < r.rows(); ++i) {
            Extent& e = out[r.at(i, 0)];
            if (r.get(i, 1)) {
                e.bbox = std::array<double, 4>{std::stod(r.at(i, 1)), std::stod(r.at(i, 2)),
                                               std::stod(r.at(i, 3)), std::stod(r.at(i, 4))};
            }
            if (r.get(i, 5)) e.from_us = std::stoll(r.at(i, 5));
            if (r.get(i, 6)) e.to_us = std::stoll(r.at(i, 6));
        }
    } catch (const ProblemError&) {
        // The database is unreachable: the landing pages still answer, with unknown extents.
        out.clear();
    } catch (const db::DbError& e) {
        core::log::warn("http: cannot read the collections' extents from the statistics",
                        {{"error", e.what()}});
        out.clear();
    }
    co_return out;
}

void write_collection(JsonWriter& w, const Collection& c, const std::string& base,
                      const Extent& extent) {
    const std::string self = base + "/collections/" + c.id;
    w.begin_object();
    w.key("id").value(c.id);
    w.key("title").value(c.title);
    w.key("description").value(c.description);
    w.key("itemType").value("feature");
    w.key("crs").begin_array().value(kCrs84).end_array();
    w.key("extent").begin_object();
    w.key("spatial").begin_object();
    w.key("bbox").begin_array().begin_array();
    // Unknown (no statistics yet): the whole world, which is always true.
    const auto bbox = extent.bbox.value_or(std::array<double, 4>{-180.0, -90.0, 180.0, 90.0});
    for (const double v : bbox) w.value(v);
    w.end_array().end_array();
    w.key("crs").value(kCrs84);
    w.end_object();
    if (extent.from_us || extent.to_us) {
        w.key("temporal").begin_object();
        w.key("interval").begin_array().begin_array();
        for (const auto& end : {extent.from_us, extent.to_us}) {
            if (end) {
                w.value(format_rfc3339(*end));
            } else {
                w.null();
            }
        }
        w.end_array().end_array();
        w.key("trs").value("http://www.opengis.net/def/uom/ISO-8601/0/Gregorian");
        w.end_object();
    }
    w.end_object();
    w.key("links").begin_array();
    write_link(w, "self", "application/json", self, "this collection");
    write_link(w, "items", "application/geo+json", self + "/items", c.title);
    w.end_array();
    w.end_object();
}

}  // namespace

void FeaturesService::add_routes(Router& router) {
    router.add("GET", "/", Access::landing,
               [this](const Request& r, const auto&) { return ready(landing(r)); });
    router.add("GET", "/conformance", Access::landing,
               [this](const Request& r, const auto&) { return ready(conformance(r)); });
    router.add("GET", "/collections", Access::landing,
               [this](const Request& r, const auto&) { return collections(r); });
    router.add("GET", "/collections/{}", Access::landing,
               [this](const Request& r, const auto& a) { return collection(r, a[0]); });
    router.add("GET", "/collections/{}/items", Access::read,
               [this](const Request& r, const auto& a) { return items(r, a[0]); });
    router.add("GET", "/collections/{}/items/{}", Access::read,
               [this](const Request& r, const auto& a) { return item(r, a[0], a[1]); });
}

Response FeaturesService::landing(const Request& req) const {
    req.query.only({"f"});
    check_format(req.query);
    const std::string base = base_url(req, ctx_.fallback_host);
    JsonWriter w;
    w.begin_object();
    w.key("title").value("trackd");
    w.key("description")
        .value("Vehicle positions from Kafka in PostGIS: current state, history and geofences.");
    w.key("links").begin_array();
    write_link(w, "self", "application/json", base + "/", "this document");
    write_link(w, "service-desc", "application/vnd.oai.openapi+json;version=3.0", base + "/api",
               "the API definition");
    write_link(w, "service-doc", "text/html", base + "/api", "the API definition");
    write_link(w, "conformance", "application/json", base + "/conformance", "conformance classes");
    write_link(w, "data", "application/json", base + "/collections", "collections");
    w.end_array();
    w.end_object();
    return json_response(w.take());
}

Response FeaturesService::conformance(const Request& req) {
    req.query.only({"f"});
    check_format(req.query);
    JsonWriter w;
    w.begin_object();
    w.key("conformsTo").begin_array();
    w.value("http://www.opengis.net/spec/ogcapi-features-1/1.0/conf/core");
    w.value("http://www.opengis.net/spec/ogcapi-features-1/1.0/conf/geojson");
    w.value("http://www.opengis.net/spec/ogcapi-features-1/1.0/conf/oas30");
    w.end_array();
    w.end_object();
    return json_response(w.take());
}

boost::asio::awaitable<Response> FeaturesService::collections(const Request& req) const {
    req.query.only({"f"});
    check_format(req.query);
    const std::string base = base_url(req, ctx_.fallback_host);
    JsonWriter w;
    w.begin_object();
    w.key("links").begin_array();
    write_link(w, "self", "application/json", base + "/collections", "this document");
    w.end_array();
    w.key("collections").begin_array();
    const auto extents = co_await load_extents(ctx_.pool);
    for (const auto& c : kCollections) {
        const auto it = extents.find(c.id);
        write_collection(w, c, base, it == extents.end() ? Extent{} : it->second);
    }
    w.end_array();
    w.end_object();
    co_return json_response(w.take());
}

boost::asio::awaitable<Response> FeaturesService::collection(const Request& req,
                                                             const std::string& id) const {
    req.query.only({"f"});
    check_format(req.query);
    const auto& c = find_collection(id);
    const auto extents = co_await load_extents(ctx_.pool);
    const auto it = extents.find(c.id);
    JsonWriter w;
    write_collection(w, c, base_url(req, ctx_.fallback_host),
                     it == extents.end() ? Extent{} : it->second);
    co_return json_response(w.take());
}

boost::asio::awaitable<Response> FeaturesService::items(const Request& req, const std::string& id) {
    const auto& c = find_collection(id);
    const auto& q = req.query;
    q.only({"bbox", "datetime", "limit", "after", "f"});
    check_format(q);
    FeaturePage page(req, ctx_.fallback_host, parse_limit(q, kDefaultLimit, ctx_.http.max_limit));

    const char* table = c.kind == Kind::vehicles    ? "trackd.vehicle_current_state"
                        : c.kind == Kind::positions ? "trackd.vehicle_telemetry_history"
                                                    : "trackd.geofence_zones";
    const char* time_column = c.kind == Kind::vehicles    ? "last_updated"
                              : c.kind == Kind::positions ? "recorded_at"
                                                          : "updated_at";
    const char* columns = c.kind == Kind::vehicles    ? kVehicleColumns
                          : c.kind == Kind::positions ? kPositionColumns
                                                      : kGeofenceColumns;
    // The filters, shared by the page query and the count.
    SqlBuilder sql(std::string("SELECT ") + columns + " FROM " + table + " WHERE true");
    std::string filters;
    // The history's statements are planned with their values: a generic plan cannot tell a
    // bbox of a street from one of the whole fleet, nor a minute from a day, and picks the same
    // indexes for both (docs/benchmarks.md, "The history's statements are planned with their
    // values"). So are the vehicles' in a large box (box_planned_each_time). The others keep
    // their cached plans, which suit any values.
    auto statement = c.kind == Kind::positions ? planned_each_time : statement_for;
    if (const auto text = q.get("bbox")) {
        const BBox b = parse_bbox("bbox", *text);
        if (c.kind == Kind::vehicles && box_planned_each_time(b)) statement = planned_each_time;
        const std::string env = "ST_MakeEnvelope(" + sql.bind(fmt::format("{}", b.min_lon)) + ", " +
                                sql.bind(fmt::format("{}", b.min_lat)) + ", " +
                                sql.bind(fmt::format("{}", b.max_lon)) + ", " +
                                sql.bind(fmt::format("{}", b.max_lat)) + ", 4326)";
        // For points the bounding-box test is exact; polygons need the real intersection.
        filters += c.kind == Kind::geofences  ? " AND ST_Intersects(fence_geom, " + env + ")"
                   : c.kind == Kind::vehicles ? " AND " + vehicle_in_box(env)
                                              : " AND geom && " + env;
    }
    if (const auto text = q.get("datetime")) {
        const TimeInterval iv = parse_datetime("datetime", *text);
        if (iv.from_us) {
            filters += std::string(" AND ") + time_column +
                       " >= " + sql.bind(format_rfc3339(*iv.from_us)) + "::timestamptz";
        }
        if (iv.to_us) {
            filters += std::string(" AND ") + time_column +
                       " <= " + sql.bind(format_rfc3339(*iv.to_us)) + "::timestamptz";
        }
    }
    const db::Params filter_params = sql.params();
    sql += filters;
    const auto after = q.get("after");
    std::string order;
    if (c.kind == Kind::positions) {
        if (after) {
            const PositionCursor cursor = parse_position_cursor("after", *after);
            sql += " AND (recorded_at, ingest_batch_id, kafka_partition, kafka_offset) > (" +
                   sql.bind(format_rfc3339(cursor.recorded_at_us)) + "::timestamptz, " +
                   sql.bind(std::to_string(cursor.batch)) + "::int8, " +
                   sql.bind(std::to_string(cursor.partition)) + "::int4, " +
                   sql.bind(std::to_string(cursor.offset)) + "::int8)";
        }
        order = " ORDER BY recorded_at, ingest_batch_id, kafka_partition, kafka_offset";
    } else {
        const char* key = c.kind == Kind::vehicles ? "vehicle_id" : "zone_name";
        if (after) {
            check_identifier("after", *after, kMaxIdentifierBytes);
            sql += std::string(" AND ") + key + " > " + sql.bind(*after);
        }
        order = std::string(" ORDER BY ") + key;
    }
    sql += order + " LIMIT " + sql.bind(page.fetch_limit());
    const auto format = c.kind == Kind::geofences ? db::Format::text : db::Format::binary;
    const auto page_st = statement(sql.sql(), format);
    const auto r = co_await ctx_.pool.run(page_st, sql.params());
    const auto count_st = statement(
        std::string("SELECT count(*) FROM ") + table + " WHERE true" + filters, db::Format::text);
    const auto count = co_await ctx_.pool.run(count_st, filter_params);

    page.set_number_matched(count.at(0, 0));
    page.set_time_stamp(format_rfc3339(std::chrono::duration_cast<std::chrono::seconds>(
                                           std::chrono::system_clock::now().time_since_epoch())
                                           .count() *
                                       1000000));
    page.add_link("collection", "application/json",
                  base_url(req, ctx_.fallback_host) + "/collections/" + c.id);
    const auto write_feature = [&](JsonWriter& w, int row) {
        switch (c.kind) {
            case Kind::vehicles:
                write_vehicle(w, r, row);
                break;
            case Kind::positions:
                write_position(w, r, row);
                break;
            case Kind::geofences:
                write_geofence(w, r, row);
                break;
        }
    };
    // Positions page on (recorded_at, ingest_batch_id, kafka_partition, kafka_offset).
    const auto cursor = [&](int row) {
        return c.kind == Kind::positions ? position_cursor(r, row) : r.at(row, 0);
    };
    co_return page.respond(r.rows(), write_feature, cursor);
}

boost::asio::awaitable<Response> FeaturesService::item(const Request& req, const std::string& id,
                                                       const std::string& feature_id) {
    const auto& c = find_collection(id);
    req.query.only({"f"});
    check_format(req.query);
    const auto not_found = [&]() {
        throw ProblemError(ProblemKind::resource_not_found,
                           "featureId: no feature '" + feature_id + "' in " + c.id, "featureId");
    };
    if (feature_id.empty() || feature_id.size() > kMaxIdentifierBytes) not_found();
    JsonWriter w;
    switch (c.kind) {
        case Kind::vehicles: {
            static const Statement st{"ogc_vehicle",
                                      std::string("SELECT ") + kVehicleColumns +
                                          " FROM trackd.vehicle_current_state "
                                          "WHERE vehicle_id = $1",
                                      db::Format::binary};
            const db::Params key{feature_id};
            const auto r = co_await ctx_.pool.run(st, key);
            if (r.rows() == 0) not_found();
            write_vehicle(w, r, 0);
            break;
        }
        case Kind::geofences: {
            static const Statement st{"ogc_geofence", std::string("SELECT ") + kGeofenceColumns +
                                                          " FROM trackd.geofence_zones "
                                                          "WHERE zone_name = $1"};
            const db::Params key{feature_id};
            const auto r = co_await ctx_.pool.run(st, key);
            if (r.rows() == 0) not_found();
            write_geofence(w, r, 0);
            break;
        }
        case Kind::positions: {
            std::array<std::int64_t, 3> v{};
            if (!parse_ints(feature_id, '-', v.data(), v.size()) || v[1] < INT32_MIN ||
                v[1] > INT32_MAX) {
                not_found();
            }
            static const Statement st{"ogc_position",
                                      std::string("SELECT ") + kPositionColumns +
                                          " FROM trackd.vehicle_telemetry_history WHERE "
                                          "ingest_batch_id = $1 AND kafka_partition = $2 AND "
                                          "kafka_offset = $3 LIMIT 1",
                                      db::Format::binary};
            const db::Params params{std::to_string(v[0]), std::to_string(v[1]),
                                    std::to_string(v[2])};
            const auto r = co_await ctx_.pool.run(st, params);
            if (r.rows() == 0) not_found();
            write_position(w, r, 0);
            break;
        }
    }
    std::string body = w.take();
    co_return geojson_response(std::move(body));
}

}  // namespace trackd::http
