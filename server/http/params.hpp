// Query and path parameters: parsing and range checks.
//
// Contract: every function either returns a value that is safe to bind to SQL (finite, in range,
// ordered) or throws ProblemError 400 whose detail starts with the parameter's name and says
// what is wrong. Nothing here touches the database.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "request.hpp"

namespace trackd::http {

struct BBox {
    double min_lon = 0;
    double min_lat = 0;
    double max_lon = 0;
    double max_lat = 0;
};

// A closed time interval in microseconds since the Unix epoch; an absent end is open.
struct TimeInterval {
    std::optional<std::int64_t> from_us;
    std::optional<std::int64_t> to_us;
};

double parse_number(const std::string& name, const std::string& text);
double parse_longitude(const std::string& name, const std::string& text);
double parse_latitude(const std::string& name, const std::string& text);
bool parse_bool(const std::string& name, const std::string& text);

// "minLon,minLat,maxLon,maxLat", or the six-number 3D form (the heights are ignored).
// A box crossing the antimeridian (minLon > maxLon) is refused, as is any min above its max.
BBox parse_bbox(const std::string& name, const std::string& text);

// `f` (OGC API output format): absent or "json", the only format served.
void check_format(const QueryParams& q);

// `limit`: absent -> `fallback`; otherwise an integer in [1, max].
int parse_limit(const QueryParams& q, int fallback, int max);

// RFC 3339 date-time ("2026-11-30T01:02:03.456Z", "...+01:00") as core::parse_rfc3339 reads it;
// fractions beyond microseconds are truncated. Years 0001..9999, before and after the offset; no
// leap second (":60").
std::int64_t parse_rfc3339(const std::string& name, const std::string& s);

// The earliest instant parse_rfc3339 accepts (0001-01-01T00:00:00Z), in microseconds.
std::int64_t earliest_time_us();

// UTC, "Z", with the fraction trimmed of trailing zeros ("2026-11-30T01:02:03.456Z").
std::string format_rfc3339(std::int64_t us);
// The same, appended to out (a page writes one per feature: no string of its own).
void append_rfc3339(std::string& out, std::int64_t us);

// `n` whole numbers separated by `sep` ("1-2-3"), each an int64; false if `text` is not that.
bool parse_ints(const std::string& text, char sep, std::int64_t* out, std::size_t n);

// Where a page of positions ended, ordered as the pages are: (recorded_at, ingest_batch_id,
// kafka_partition, kafka_offset). As an `after` cursor: "<recorded_at µs>_<batch>_<partition>_
// <offset>" (feature_writer's position_cursor).
struct PositionCursor {
    std::int64_t recorded_at_us = 0;
    std::int64_t batch = 0;
    std::int64_t partition = 0;
    std::int64_t offset = 0;
};

// A cursor from a next link. Within what PostgreSQL reads back (years 1..9999, an int4
// partition), so that a forged cursor is a 400 and never a database error.
PositionCursor parse_position_cursor(const std::string& name, const std::string& text);

// OGC API `datetime`: an instant, or "start/end" with ".." or "" for an open end.
TimeInterval parse_datetime(const std::string& name, const std::string& text);

// An identifier in a path (vehicle id, zone name): 1..max_len bytes, no control characters.
void check_identifier(const std::string& name, const std::string& value, std::size_t max_len);

}  // namespace trackd::http
