// A fresh database with fixed fixture data and an in-process trackd HTTP server on a free port,
// for the HTTP API integration tests.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "trackd/config/config.hpp"
#include "trackd/db/connection.hpp"
#include "trackd/db/migrations.hpp"
#include "trackd/http/server.hpp"

#include "support/http_client.hpp"
#include "support/test_database.hpp"

namespace trackd::test {

inline constexpr const char* kReadToken = "read-token-0123456789abcdef";
inline constexpr const char* kWriteToken = "write-token-0123456789abcdef";

// Vehicles (current state), their history and two zones. Positions are chosen so that the
// expected answers are known by construction:
// - zone "square": the box 13.0..13.1 x 52.0..52.1; in-1, in-2 inside, "edge" exactly on its
//   east edge (inside: the boundary counts), out-1 and out-2 outside.
// - zone "donut": a MultiPolygon: box 14.0..14.2 x 52.0..52.2 with the hole
//   14.05..14.15 x 52.05..52.15, plus the box 14.5..14.6 x 52.0..52.1. "ring" is in the first
//   part, "hole" in the hole (outside), "hole-edge" on the hole's boundary (inside), "partb" in
//   the second part.
// - p-00 .. p-36: a row of vehicles at latitude 50 for paging.
// - history: in-1 has 6 positions on 2025-06-01 10:00..10:05 (one per minute, moving east) and
//   one on 2025-06-02; out-1 has one.
inline const char* kFixtureSql = R"SQL(
INSERT INTO trackd.vehicle_current_state (vehicle_id, last_updated, geom, speed_kmh, heading_deg,
  accuracy_m, attributes, ingest_batch_id, kafka_partition, kafka_offset)
SELECT id, t::timestamptz, ST_SetSRID(ST_MakePoint(lon, lat, 35), 4326), 42.5, 90, 4,
       '{"fleet":"north"}', 1, 0, n
FROM (VALUES
  ('in-1', 13.05, 52.05, '2025-06-01T10:05:00Z', 1),
  ('in-2', 13.02, 52.08, '2025-06-01T10:00:00Z', 2),
  ('edge', 13.1, 52.05, '2025-06-01T09:00:00Z', 3),
  ('out-1', 13.2, 52.05, '2025-06-01T09:30:00Z', 4),
  ('out-2', 12.9, 51.9, '2025-06-01T08:00:00Z', 5),
  ('ring', 14.02, 52.1, '2025-06-01T10:00:00Z', 6),
  ('hole', 14.1, 52.1, '2025-06-01T10:00:00Z', 7),
  ('hole-edge', 14.05, 52.1, '2025-06-01T10:00:00Z', 8),
  ('partb', 14.55, 52.05, '2025-06-01T10:00:00Z', 9)
) AS v(id, lon, lat, t, n);
INSERT INTO trackd.vehicle_current_state (vehicle_id, last_updated, geom, ingest_batch_id,
  kafka_partition, kafka_offset)
SELECT 'p-' || lpad(i::text, 2, '0'), '2025-05-01T00:00:00Z'::timestamptz + i * interval '1 min',
       ST_SetSRID(ST_MakePoint(10 + i * 0.01, 50, 0), 4326), 1, 1, i
FROM generate_series(0, 36) i;
INSERT INTO trackd.vehicle_telemetry_history (vehicle_id, recorded_at, geom, speed_kmh,
  ingest_batch_id, kafka_partition, kafka_offset)
SELECT 'in-1', '2025-06-01T10:00:00Z'::timestamptz + i * interval '1 min',
       ST_SetSRID(ST_MakePoint(13.0 + i * 0.01, 52.05 + (i % 2) * 0.003, 35), 4326), 40, 7, 0, 100 + i
FROM generate_series(0, 5) i;
INSERT INTO trackd.vehicle_telemetry_history (vehicle_id, recorded_at, geom, ingest_batch_id,
  kafka_partition, kafka_offset) VALUES
  ('in-1', '2025-06-02T10:00:00Z', ST_SetSRID(ST_MakePoint(13.3, 52.3, 0), 4326), 8, 0, 200),
  ('out-1', '2025-06-01T09:30:00Z', ST_SetSRID(ST_MakePoint(13.2, 52.05, 0), 4326), 8, 1, 201);
INSERT INTO trackd.geofence_zones (zone_name, fence_geom) VALUES
  ('square', ST_Multi(ST_GeomFromText('POLYGON((13 52, 13.1 52, 13.1 52.1, 13 52.1, 13 52))', 4326))),
  ('donut', ST_GeomFromText('MULTIPOLYGON(((14 52, 14.2 52, 14.2 52.2, 14 52.2, 14 52),
      (14.05 52.05, 14.05 52.15, 14.15 52.15, 14.15 52.05, 14.05 52.05)),
      ((14.5 52, 14.6 52, 14.6 52.1, 14.5 52.1, 14.5 52)))', 4326));
)SQL";

inline config::Config http_test_config(const std::string& dsn) {
    config::Config c;
    c.pg.dsn = dsn;
    c.http.listen = "127.0.0.1:0";  // any free port; the server tells which
    c.http.threads = 2;
    c.http.pool_size = 3;
    c.http.statement_timeout_ms = 5000;
    c.http.max_limit = 1000;
    c.http.max_body_bytes = 64 * 1024;
    c.http.max_header_bytes = 4096;
    c.http.tokens = {{"dashboard", {"read", kReadToken}}, {"ops", {"write", kWriteToken}}};
    return c;
}

class HttpFixture : public ::testing::Test {
  protected:
    HttpFixture() : db_("http", Schema::migrated) {
        db::Connection conn(db_.dsn(), "test");
        conn.exec_script(kFixtureSql);
        conn.exec_script("ANALYZE");
    }

    // Starts the server; `adjust` may change the configuration first.
    void start(const std::function<void(config::Config&)>& adjust = {}) {
        auto c = http_test_config(db_.dsn());
        if (adjust) adjust(c);
        config_ = c;
        server_ = std::make_unique<http::Server>(config_);
        server_->start();
        read_ = std::make_unique<HttpClient>(server_->port(), kReadToken);
        write_ = std::make_unique<HttpClient>(server_->port(), kWriteToken);
    }
    void SetUp() override { start(); }

    db::Result sql(const std::string& text, const db::Params& params = {}) {
        db::Connection conn(db_.dsn(), "test");
        return conn.query(text, params);
    }

    TestDatabase db_;
    config::Config config_;
    std::unique_ptr<http::Server> server_;
    std::unique_ptr<HttpClient> read_;
    std::unique_ptr<HttpClient> write_;
};

}  // namespace trackd::test
