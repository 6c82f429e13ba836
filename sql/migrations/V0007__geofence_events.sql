-- V0007: geofence enter/exit events, detected in the ingest transaction (docs/ingest.md,
-- "Geofence events"), and the per-zone debounce setting.
--
-- Run by `trackd migrate`, or by hand:  psql -1 -v ON_ERROR_STOP=1 -f V0007__geofence_events.sql
-- No BEGIN/COMMIT here: the runner wraps each file in one transaction (psql does with -1).
-- Safe to run twice.

-- zone_id: identifies one life of a zone. Replacing a zone's geometry (PUT on an existing name)
-- keeps it; deleting a zone and creating one with the same name gives a new id, so detection
-- state left from the old zone never applies to the new one.
-- dwell_s: the debounce. A vehicle must be seen inside for at least this many seconds before
-- its enter counts (and outside as long before its exit counts); 0 = every crossing counts.
ALTER TABLE trackd.geofence_zones
  ADD COLUMN IF NOT EXISTS zone_id bigint GENERATED ALWAYS AS IDENTITY;
ALTER TABLE trackd.geofence_zones
  ADD COLUMN IF NOT EXISTS dwell_s integer NOT NULL DEFAULT 0;
DO $constraints$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_constraint
                 WHERE conname = 'geofence_zones_dwell_s_range') THEN
    ALTER TABLE trackd.geofence_zones ADD CONSTRAINT geofence_zones_dwell_s_range
      CHECK (dwell_s BETWEEN 0 AND 86400);
  END IF;
END
$constraints$;
CREATE UNIQUE INDEX IF NOT EXISTS geofence_zones_zone_id_key ON trackd.geofence_zones (zone_id);
COMMENT ON COLUMN trackd.geofence_zones.zone_id IS
  'One life of the zone: kept when the geometry is replaced, new when the name is deleted and created again.';
COMMENT ON COLUMN trackd.geofence_zones.dwell_s IS
  'Debounce: seconds a vehicle must stay inside (outside) before its enter (exit) event counts; 0 = none.';

-- One row per enter or exit. event_id is handed out in commit order (trackd.geofence_event_ids
-- below), so "every event after id N" never misses an event that commits later: the live
-- stream (GET /v1/events/stream) resumes from an id.
CREATE TABLE IF NOT EXISTS trackd.geofence_events (
  event_id        bigint                PRIMARY KEY,
  vehicle_id      text                  NOT NULL,
  zone_name       text                  NOT NULL,
  kind            text                  NOT NULL CHECK (kind IN ('enter', 'exit')),
  event_time      timestamptz           NOT NULL,
  geom            geometry(Point, 4326) NOT NULL,
  kafka_partition int                   NOT NULL,
  kafka_offset    bigint                NOT NULL,
  ingest_batch_id bigint                NOT NULL
);
COMMENT ON TABLE trackd.geofence_events IS
  'Geofence enter/exit events (WGS 84, EPSG:4326), written by the ingest transaction of the position that caused them; event_id increases in commit order.';
COMMENT ON COLUMN trackd.geofence_events.event_time IS
  'recorded_at of the position where the vehicle crossed (vehicle time), also when a dwell time delayed the event.';
COMMENT ON COLUMN trackd.geofence_events.geom IS 'The position where the vehicle crossed.';
COMMENT ON COLUMN trackd.geofence_events.kafka_offset IS
  'Kafka partition/offset of that position (its row in the history).';
-- GET /v1/geofences/{zone_name}/events and GET /v1/vehicles/{vehicle_id}/events: a time range,
-- paged by event_id.
CREATE INDEX IF NOT EXISTS geofence_events_zone_time_idx
  ON trackd.geofence_events (zone_name, event_time, event_id);
CREATE INDEX IF NOT EXISTS geofence_events_vehicle_time_idx
  ON trackd.geofence_events (vehicle_id, event_time, event_id);

-- The event id counter: one row. An ingest transaction with events takes its ids here as its
-- last statements before COMMIT (UPDATE ... SET last_event_id = last_event_id + n RETURNING);
-- the row lock makes the next event-producing transaction wait until this one has committed,
-- so ids are gapless and in commit order. A plain sequence hands out ids in start order.
CREATE TABLE IF NOT EXISTS trackd.geofence_event_ids (
  one           boolean PRIMARY KEY DEFAULT true CHECK (one),
  last_event_id bigint  NOT NULL
);
INSERT INTO trackd.geofence_event_ids (one, last_event_id) VALUES (true, 0)
ON CONFLICT (one) DO NOTHING;
COMMENT ON TABLE trackd.geofence_event_ids IS
  'The last geofence event id handed out (one row); taken last in each ingest transaction, so ids follow commit order.';

-- Detection state per vehicle and zone: whether the vehicle counts as inside, and, while a
-- dwell time runs, the first position that contradicts that. Rows exist only for vehicles
-- inside a zone or with a pending change; no row means outside.
CREATE TABLE IF NOT EXISTS trackd.geofence_vehicle_state (
  vehicle_id        text                  NOT NULL,
  zone_id           bigint                NOT NULL,
  inside            boolean               NOT NULL,
  pending_time      timestamptz,
  pending_geom      geometry(Point, 4326),
  pending_partition int,
  pending_offset    bigint,
  ingest_batch_id   bigint                NOT NULL,
  PRIMARY KEY (vehicle_id, zone_id),
  CONSTRAINT geofence_vehicle_state_pending_complete CHECK (
    (pending_time IS NULL) = (pending_geom IS NULL) AND
    (pending_time IS NULL) = (pending_partition IS NULL) AND
    (pending_time IS NULL) = (pending_offset IS NULL))
);
CREATE INDEX IF NOT EXISTS geofence_vehicle_state_zone_idx
  ON trackd.geofence_vehicle_state (zone_id);
COMMENT ON TABLE trackd.geofence_vehicle_state IS
  'Geofence detection state of each vehicle in each zone it is inside (or about to enter/leave); maintained by the ingest.';
COMMENT ON COLUMN trackd.geofence_vehicle_state.pending_time IS
  'First position contradicting `inside` while the zone''s dwell time has not yet passed; NULL when none.';

GRANT SELECT, INSERT ON trackd.geofence_events TO trackd_ingest;
GRANT SELECT, UPDATE ON trackd.geofence_event_ids TO trackd_ingest;
GRANT SELECT, INSERT, UPDATE, DELETE ON trackd.geofence_vehicle_state TO trackd_ingest;
GRANT SELECT ON trackd.geofence_zones TO trackd_ingest;
GRANT SELECT ON trackd.geofence_events, trackd.geofence_event_ids TO trackd_api, trackd_readonly;
-- The API deletes a zone's state with the zone.
GRANT SELECT, DELETE ON trackd.geofence_vehicle_state TO trackd_api;
GRANT SELECT ON trackd.geofence_vehicle_state TO trackd_readonly;

INSERT INTO trackd.schema_migrations (version, name) VALUES (7, 'geofence_events')
ON CONFLICT (version) DO NOTHING;
