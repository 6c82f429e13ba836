-- V0008: cheaper ingest (measurements in bench/RESULTS.md, docs/benchmarks.md).
--
-- Run by `trackd migrate`, or by hand:  psql -1 -v ON_ERROR_STOP=1 -f V0008__ingest_performance.sql
-- No BEGIN/COMMIT here: the runner wraps each file in one transaction (psql does with -1).
-- Safe to run twice.

-- Every current-state update moves the position, so it is never HOT and inserts into every
-- index of trackd.vehicle_current_state; on a live stream that upsert is half of the database's
-- work per message. The geography GiST (V0005) was the dearest of those indexes and served only
-- GET /v1/vehicles/nearby, which now finds its candidates through the geometry GiST with a
-- bounding box that contains the whole radius, then keeps those within the geodesic radius
-- (server/http/vehicle_service.cpp): the same answers from one index less to maintain.
DROP INDEX IF EXISTS trackd.vehicle_current_state_geog_gist;

-- The history's BRIN on ingest_batch_id summarizes new page ranges as they fill
-- (autosummarize), instead of waiting for a vacuum of an insert-only table: until then a lookup
-- of one batch (the archive's range scans) reads every unsummarized page. Rebuilt on the
-- parent so that existing and future partitions both get the option.
DO $brin$
BEGIN
  IF NOT EXISTS (
    SELECT 1
      FROM pg_catalog.pg_class c
      JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = 'trackd' AND c.relname = 'vehicle_telemetry_history_batch_brin'
       AND c.reloptions @> ARRAY['autosummarize=on']
  ) THEN
    DROP INDEX IF EXISTS trackd.vehicle_telemetry_history_batch_brin;
    CREATE INDEX vehicle_telemetry_history_batch_brin
      ON trackd.vehicle_telemetry_history USING brin (ingest_batch_id)
      WITH (autosummarize = on);
  END IF;
END
$brin$;

INSERT INTO trackd.schema_migrations (version, name) VALUES (8, 'ingest_performance')
ON CONFLICT (version) DO NOTHING;
