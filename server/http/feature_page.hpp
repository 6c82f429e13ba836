// One page of a GeoJSON FeatureCollection read with keyset paging, as every list endpoint
// answers it (OGC API - Features: numberReturned, self and next links).
//
// Contract: the query asks for fetch_limit() rows (or limit_clause()), one more than the page
// holds; that row's presence is what says there is a next page. respond() writes the first `limit`
// rows as features, then numberMatched (when set), numberReturned, timeStamp (when set), and the
// links: self (the request's URL), next (the same URL with `after` set to the cursor of the page's
// last row) when there is more, then the added links. Not thread-safe: one per request, living no
// longer than the Request it was made for.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "trackd/db/connection.hpp"

#include "json_writer.hpp"
#include "request.hpp"

namespace trackd::http {

class FeaturePage {
  public:
    // Writes the Feature of one row.
    using WriteFeature = std::function<void(JsonWriter& w, int row)>;
    // The `after` value that starts the page following `row`.
    using Cursor = std::function<std::string(int row)>;

    FeaturePage(const Request& req, std::string fallback_host, int limit)
        : req_(req), fallback_host_(std::move(fallback_host)), limit_(limit) {}

    // The LIMIT to query with: one row more than the page.
    [[nodiscard]] std::string fetch_limit() const { return std::to_string(limit_ + 1); }
    // The same as SQL text, " LIMIT <n>", for statements on the current state whose plan does
    // not depend on their parameters. With a constant LIMIT PostgreSQL keeps the prepared
    // statement's generic plan; with LIMIT $n its estimate of a generic plan is worse than that
    // of a custom one, so it plans every execution again: for `inside a geofence` that planning
    // was half of the backend's CPU per request (docs/benchmarks.md). A statement per distinct
    // limit: ConnectionPool bounds how many a connection keeps.
    [[nodiscard]] std::string limit_clause() const { return " LIMIT " + fetch_limit(); }

    // OGC API - Features members: numberMatched (a JSON number) and timeStamp (RFC 3339).
    void set_number_matched(std::string number) { number_matched_ = std::move(number); }
    void set_time_stamp(std::string rfc3339) { time_stamp_ = std::move(rfc3339); }
    // A link written after self and next.
    void add_link(std::string rel, std::string type, std::string href);

    // `rows`: how many rows the query returned (fetch_limit() at most).
    [[nodiscard]] Response respond(int rows, const WriteFeature& feature,
                                   const Cursor& cursor) const;
    // The usual cursor: the row's first column (vehicle id, zone name, event id).
    [[nodiscard]] Response respond(const db::Result& r, const WriteFeature& feature) const;

  private:
    struct Link {
        std::string rel;
        std::string type;
        std::string href;
    };

    const Request& req_;
    std::string fallback_host_;
    int limit_;
    std::optional<std::string> number_matched_;
    std::optional<std::string> time_stamp_;
    std::vector<Link> links_;
};

}  // namespace trackd::http
