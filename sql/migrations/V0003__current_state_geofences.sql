-- V0003: the latest position of every vehicle, and the geofence zones.
--
-- Run by `trackd migrate`, or by hand:  psql -1 -v ON_ERROR_STOP=1 -f V0003__current_state_geofences.sql
-- No BEGIN/COMMIT here: the runner wraps each file in one transaction (psql does with -1).
-- Safe to run twice.

-- One row per vehicle, upserted by each ingest batch only when the new position is newer
-- (ON CONFLICT ... WHERE EXCLUDED.last_updated > vehicle_current_state.last_updated), so late or
-- replayed messages never move a vehicle back in time. Dashboards read this, not the history.
CREATE TABLE IF NOT EXISTS trackd.vehicle_current_state (
  vehicle_id      text                   PRIMARY KEY,
  last_updated    timestamptz            NOT NULL,
  geom            geometry(PointZ, 4326) NOT NULL,
  speed_kmh       real,
  heading_deg     real,
  accuracy_m      real,
  attributes      jsonb,
  ingest_batch_id bigint                 NOT NULL,
  kafka_partition int                    NOT NULL,
  kafka_offset    bigint                 NOT NULL
);
COMMENT ON TABLE trackd.vehicle_current_state IS
  'Latest known position of each vehicle (one row per vehicle); only ever moves forward in time. Positions are WGS 84 (EPSG:4326) with altitude in Z.';
COMMENT ON COLUMN trackd.vehicle_current_state.last_updated IS 'recorded_at of the position held here (vehicle time, not ingest time).';
COMMENT ON COLUMN trackd.vehicle_current_state.attributes IS 'Message fields beyond the known ones, as sent.';
COMMENT ON COLUMN trackd.vehicle_current_state.ingest_batch_id IS 'The ingest transaction that last updated the row.';

-- GiST: bbox and nearby queries. last_updated: "vehicles seen in the last N minutes", stale vehicles.
CREATE INDEX IF NOT EXISTS vehicle_current_state_geom_gist
  ON trackd.vehicle_current_state USING gist (geom);
CREATE INDEX IF NOT EXISTS vehicle_current_state_last_updated_idx
  ON trackd.vehicle_current_state (last_updated);

-- Named areas that the API tests positions against. MultiPolygon so that one zone may have
-- several parts; invalid polygons are refused here because spatial predicates on them give
-- wrong answers (or errors) later.
CREATE TABLE IF NOT EXISTS trackd.geofence_zones (
  zone_name  text                         PRIMARY KEY,
  fence_geom geometry(MultiPolygon, 4326) NOT NULL,
  created_at timestamptz                  NOT NULL DEFAULT now(),
  updated_at timestamptz                  NOT NULL DEFAULT now(),
  CONSTRAINT geofence_zones_fence_geom_valid CHECK (ST_IsValid(fence_geom))
);
COMMENT ON TABLE trackd.geofence_zones IS
  'Named geofence zones (WGS 84, EPSG:4326), maintained through the trackd API; geometries must be valid (ST_IsValid).';
COMMENT ON COLUMN trackd.geofence_zones.updated_at IS 'Set by the writer on every change.';

CREATE INDEX IF NOT EXISTS geofence_zones_fence_geom_gist
  ON trackd.geofence_zones USING gist (fence_geom);

GRANT SELECT, INSERT, UPDATE ON trackd.vehicle_current_state TO trackd_ingest;
GRANT SELECT ON trackd.vehicle_current_state TO trackd_api, trackd_readonly;
GRANT SELECT, INSERT, UPDATE, DELETE ON trackd.geofence_zones TO trackd_api;
GRANT SELECT ON trackd.geofence_zones TO trackd_readonly;

INSERT INTO trackd.schema_migrations (version, name) VALUES (3, 'current_state_geofences')
ON CONFLICT (version) DO NOTHING;
