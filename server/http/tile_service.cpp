#include "tile_service.hpp"

#include <array>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "trackd/core/hex.hpp"

#include "json_writer.hpp"
#include "links.hpp"
#include "params.hpp"
#include "problem.hpp"

namespace trackd::http {
namespace {

enum class Kind { vehicles, positions, geofences };

// Half the width of the Web Mercator world, in metres.
constexpr const char* kWorld = "20037508.342789244";
// 2^52 - 1: feature ids stay exact as JavaScript numbers.
constexpr const char* kIdMask = "4503599627370495";
// The default `datetime` of positions tiles: the last 15 minutes.
constexpr std::chrono::minutes kDefaultPositionsWindow{15};

// The tile, and the tile with its buffer, as SQL over $1 (z), $2 (x), $3 (y).
const std::string kTile = "ST_TileEnvelope($1::int, $2::int, $3::int)";
const std::string kTileWithBuffer =
    fmt::format("ST_TileEnvelope($1::int, $2::int, $3::int, margin => {}.0 / {})",
                TileService::kBuffer, TileService::kExtent);
// The buffered tile clamped to the world, in EPSG:4326: a box the GiST index on the 4326
// geometry can use. Clamped first, so that it never wraps at the antimeridian; Web Mercator
// maps a box to a box, so it selects what the exact 3857 test selects (and no pole, which has
// no Mercator y).
const std::string kBox4326 = fmt::format(
    "ST_Transform(ST_MakeEnvelope(greatest(ST_XMin({0}), -{1}), greatest(ST_YMin({0}), -{1}), "
    "least(ST_XMax({0}), {1}), least(ST_YMax({0}), {1}), 3857), 4326)",
    kTileWithBuffer, kWorld);

// RFC 3339 in UTC, the fraction trimmed as everywhere in the API ("2026-11-30T01:02:03.456Z"):
// JSON's ISO 8601 form of the UTC time, which needs no format string (and no ':' in the SQL).
std::string utc_text(const char* column) {
    return fmt::format("(to_json({0} AT TIME ZONE 'UTC') #>> '{{}}') || 'Z' AS {0}", column);
}

struct Collection {
    Kind kind;
    const char* id;
    const char* description;
    const char* table;
    const char* geom;
    std::string id_expr;     // the integer feature id
    std::string properties;  // the attribute columns
    std::string extra_filter;
    // TileJSON vector_layers fields: name -> type.
    std::vector<std::pair<const char*, const char*>> fields;
};

const std::array<Collection, 3>& collections() {
    static const std::array<Collection, 3> kCollections = {{
        {Kind::vehicles,
         "vehicles",
         "The latest known position of every vehicle.",
         "trackd.vehicle_current_state",
         "geom",
         fmt::format("hashtextextended(vehicle_id, 0) & {}", kIdMask),
         "vehicle_id, " + utc_text("last_updated") + ", speed_kmh, heading_deg",
         // The index is on the vehicle's grid cell, not on geom (V0011, V0016).
         " AND cell_corner && trackd.cell_corners_for(" + kBox4326 + ")",
         {{"vehicle_id", "String"},
          {"last_updated", "String"},
          {"speed_kmh", "Number"},
          {"heading_deg", "Number"}}},
        {Kind::positions,
         "positions",
         "Accepted positions in the `datetime` interval (default: the last 15 minutes).",
         "trackd.vehicle_telemetry_history",
         "geom",
         fmt::format("hashtextextended(ingest_batch_id || '-' || kafka_partition || '-' || "
                     "kafka_offset, 0) & {}",
                     kIdMask),
         "vehicle_id, ingest_batch_id || '-' || kafka_partition || '-' || kafka_offset AS "
         "feature_id, " +
             utc_text("recorded_at") + ", speed_kmh, heading_deg",
         " AND recorded_at >= coalesce($4::timestamptz, '-infinity')"
         " AND recorded_at <= coalesce($5::timestamptz, 'infinity')",
         {{"vehicle_id", "String"},
          {"feature_id", "String"},
          {"recorded_at", "String"},
          {"speed_kmh", "Number"},
          {"heading_deg", "Number"}}},
        {Kind::geofences,
         "geofences",
         "Geofence zones (polygons).",
         "trackd.geofence_zones",
         "fence_geom",
         fmt::format("hashtextextended(zone_name, 0) & {}", kIdMask),
         "zone_name, " + utc_text("updated_at"),
         "",
         {{"zone_name", "String"}, {"updated_at", "String"}}},
    }};
    return kCollections;
}

const Collection& find_collection(const std::string& id) {
    for (const auto& c : collections()) {
        if (id == c.id) return c;
    }
    throw ProblemError(
        ProblemKind::resource_not_found,
        "collection: no tile collection '" + id + "' (there are vehicles, positions and geofences)",
        "collection");
}

std::string tile_sql(const Collection& c) {
    return fmt::format(
        "SELECT ST_AsMVT(t, '{id}', {extent}, 'geom', 'id') FROM ("
        "SELECT {id_expr} AS id, {props}, "
        "ST_AsMVTGeom(ST_Transform({g}, 3857), {tile}, {extent}, {buffer}, true) AS geom "
        "FROM {table} WHERE {g} && {box} AND ST_Transform({g}, 3857) && {tile_buffer}{extra} "
        "ORDER BY 1) t",
        fmt::arg("id", c.id), fmt::arg("extent", TileService::kExtent),
        fmt::arg("id_expr", c.id_expr), fmt::arg("props", c.properties), fmt::arg("g", c.geom),
        fmt::arg("tile", kTile), fmt::arg("buffer", TileService::kBuffer),
        fmt::arg("table", c.table), fmt::arg("box", kBox4326),
        fmt::arg("tile_buffer", kTileWithBuffer), fmt::arg("extra", c.extra_filter));
}

// A tile coordinate: decimal digits only, in [0, limit).
std::int64_t parse_coordinate(const std::string& name, std::string_view text, std::int64_t limit) {
    std::int64_t v = -1;
    const char* b = text.data();
    const char* e = b + text.size();
    const bool digits = !text.empty() && text.size() <= 10 &&
                        text.find_first_not_of("0123456789") == std::string_view::npos;
    if (digits) std::from_chars(b, e, v);
    if (!digits || v < 0 || v >= limit) {
        bad_parameter(name, fmt::format("'{}' is not an integer in [0, {}]", text, limit - 1));
    }
    return v;
}

}  // namespace

std::string entity_tag(const std::string& body) {
    std::uint64_t h = 14695981039346656037ULL;
    for (const char ch : body) {
        h ^= static_cast<unsigned char>(ch);
        h *= 1099511628211ULL;
    }
    return fmt::format("\"{:016x}\"", h);
}

void TileService::add_routes(Router& router) {
    router.add("GET", "/tiles/{}", Access::landing,
               [this](const Request& r, const auto& a) { return ready(tilejson(r, a[0])); });
    router.add("GET", "/tiles/{}/{}/{}/{}", Access::read,
               [this](const Request& r, const auto& a) { return tile(r, a[0], a[1], a[2], a[3]); });
}

boost::asio::awaitable<Response> TileService::tile(const Request& req,
                                                   const std::string& collection,
                                                   const std::string& z, const std::string& x,
                                                   const std::string& y_mvt) {
    const auto& c = find_collection(collection);
    constexpr std::string_view kSuffix = ".mvt";
    const std::string_view y_text(y_mvt);
    if (y_text.size() <= kSuffix.size() || !y_text.ends_with(kSuffix)) {
        bad_parameter("y", "'" + y_mvt + "' is not <y>.mvt (the only tile format served)");
    }
    const auto zoom = parse_coordinate("z", z, kMaxZoom + 1);
    const std::int64_t n = std::int64_t{1} << zoom;
    const auto tx = parse_coordinate("x", x, n);
    const auto ty = parse_coordinate("y", y_text.substr(0, y_text.size() - kSuffix.size()), n);

    db::Params params{std::to_string(zoom), std::to_string(tx), std::to_string(ty)};
    if (c.kind == Kind::positions) {
        req.query.only({"datetime"});
        TimeInterval iv;
        if (const auto text = req.query.get("datetime")) {
            iv = parse_datetime("datetime", *text);
        } else {
            const auto now = std::chrono::duration_cast<std::chrono::microseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count();
            iv.from_us =
                now - std::chrono::duration_cast<std::chrono::microseconds>(kDefaultPositionsWindow)
                          .count();
        }
        params.emplace_back(iv.from_us ? std::optional(format_rfc3339(*iv.from_us)) : std::nullopt);
        params.emplace_back(iv.to_us ? std::optional(format_rfc3339(*iv.to_us)) : std::nullopt);
    } else {
        req.query.only({});
    }

    // The positions' tiles are planned with their values, as the positions collection's items
    // (features_service.cpp): a generic plan reads the same indexes for a tile of a continent
    // and one of a street.
    static const std::array<Statement, 3> kStatements = {
        Statement{"tile_vehicles", tile_sql(collections()[0])},
        planned_each_time(tile_sql(collections()[1])),
        Statement{"tile_geofences", tile_sql(collections()[2])},
    };
    const auto& st = kStatements.at(static_cast<std::size_t>(c.kind));
    const auto r = co_await ctx_.pool.run(st, params);
    // bytea in text form: "\x" and two hex digits a byte.
    const std::string hex = r.get(0, 0).value_or("\\x");
    if (hex.size() < 2 || hex.compare(0, 2, "\\x") != 0) {
        throw std::runtime_error("ST_AsMVT returned bytea in an unexpected text form");
    }
    std::string body((hex.size() - 2) / 2, '\0');
    if (!core::decode_hex(std::string_view(hex).substr(2),
                          {reinterpret_cast<unsigned char*>(body.data()), body.size()})) {
        throw std::runtime_error("ST_AsMVT returned bytea that is not hex");
    }

    Response res;
    const std::string tag = entity_tag(body);
    res.headers.emplace_back("ETag", tag);
    // Live data: a client may keep a tile but asks again (If-None-Match) before using it;
    // zones change rarely.
    res.headers.emplace_back(
        "Cache-Control", c.kind == Kind::geofences ? "private, max-age=60" : "private, no-cache");
    if (!req.if_none_match.empty() && req.if_none_match == tag) {
        res.status = 304;
        res.content_type.clear();
        co_return res;
    }
    if (body.empty()) {
        res.status = 204;
        res.content_type.clear();
        co_return res;
    }
    res.content_type = "application/vnd.mapbox-vector-tile";
    res.body = std::move(body);
    co_return res;
}

Response TileService::tilejson(const Request& req, const std::string& collection) const {
    const auto& c = find_collection(collection);
    req.query.only({});
    const std::string base = base_url(req, ctx_.fallback_host);
    JsonWriter w;
    w.begin_object();
    w.key("tilejson").value("3.0.0");
    w.key("name").value(c.id);
    w.key("description").value(c.description);
    w.key("scheme").value("xyz");
    w.key("tiles").begin_array().value(base + "/tiles/" + c.id + "/{z}/{x}/{y}.mvt").end_array();
    w.key("minzoom").value(0);
    w.key("maxzoom").value(kMaxZoom);
    w.key("bounds").begin_array();
    w.value(-180.0).value(-85.0511287798066).value(180.0).value(85.0511287798066);
    w.end_array();
    w.key("vector_layers").begin_array();
    w.begin_object();
    w.key("id").value(c.id);
    w.key("description").value(c.description);
    w.key("minzoom").value(0);
    w.key("maxzoom").value(kMaxZoom);
    w.key("fields").begin_object();
    for (const auto& [name, type] : c.fields) w.key(name).value(type);
    w.end_object();
    w.end_object();
    w.end_array();
    w.end_object();
    return json_response(w.take());
}

}  // namespace trackd::http
