-- V0019: every history partition gets a BRIN on recorded_at, so that a query by time window
-- over all vehicles (the OGC `positions` collection's datetime, QGIS's time filters, a DBA's
-- "what came in between") reads the pages of that window instead of the whole partition
-- (docs/ingest.md, "History index layout"; docs/benchmarks.md, "Time windows: a BRIN on every
-- partition").
--
-- Until now only an open partition under postgis.defer_indexes had one (the hot set, V0010, with
-- 4-page ranges). The closed set gains it, and the hot set's takes the same definition under the
-- same name, so a partition that closes keeps it, and new partitions are made with it. Rows
-- arrive in about the order of their recorded_at, so a range covers a few seconds of it. The
-- ranges are PostgreSQL's default 128 pages: every query through a BRIN reads every range's
-- summary, so the summaries' number is what a window costs on a large partition (4-page ranges
-- took 9 ms a query at 12M rows, which is over a second on a day partition of 1.7 billion; 128
-- pages 0.4 ms), while the window reads a few thousand heap pages either way. A plain minmax
-- summary: minmax_multi's, which late rows stretch less, cost five times as much to read.
-- trackd's index maintenance summarizes the new ranges of the partitions being written (V0017);
-- until then a range is read in full by such a query. A partition whose open range had V0010's
-- 4-page BRIN keeps it.
--
-- Each partition that lacks it gets it here, in this transaction. A BRIN is built in one read of
-- the partition, and the partition takes no writes until COMMIT (reads go on). To build them
-- without holding writes, run this before the migration; the migration then skips them:
--   SELECT format('CREATE INDEX CONCURRENTLY IF NOT EXISTS %I ON trackd.%I USING brin (recorded_at)',
--                 partition_name || '_time_brin', partition_name)
--     FROM trackd.history_partitions() WHERE NOT is_default \gexec
--
-- Run by `trackd migrate`, or by hand:  psql -1 -v ON_ERROR_STOP=1 -f V0019__history_time_brin.sql
-- No BEGIN/COMMIT here: the runner wraps each file in one transaction (psql does with -1).
-- Safe to run twice.

CREATE OR REPLACE FUNCTION trackd.history_hot_indexes()
RETURNS TABLE (suffix text, definition text)
LANGUAGE sql
IMMUTABLE
AS $fn$
  VALUES ('_time_brin', 'USING brin (recorded_at)'),
         ('_geom_spgist', 'USING spgist (geom) WHERE geom IS NOT NULL'),
         ('_vehicle_hash', 'USING hash (vehicle_id)')
$fn$;
COMMENT ON FUNCTION trackd.history_hot_indexes() IS
  'Cheap indexes an open partition of trackd.vehicle_telemetry_history has while its closed indexes are deferred (postgis.defer_indexes), as name suffix and definition.';

CREATE OR REPLACE FUNCTION trackd.history_closed_indexes()
RETURNS TABLE (suffix text, definition text)
LANGUAGE sql
IMMUTABLE
AS $fn$
  VALUES ('_geom_spgist', 'USING spgist (geom) WHERE geom IS NOT NULL'),
         ('_vehicle_time_idx', '(vehicle_id, recorded_at DESC)'),
         ('_time_brin', 'USING brin (recorded_at)')
$fn$;
COMMENT ON FUNCTION trackd.history_closed_indexes() IS
  'Indexes every closed partition of trackd.vehicle_telemetry_history has, as name suffix and definition (CREATE INDEX <partition><suffix> ON <partition> <definition>). A partition made before V0013 may have <partition>_geom_gist in place of _geom_spgist.';

DO $time_brin$
DECLARE
  r record;
BEGIN
  FOR r IN
    SELECT p.partition_name
      FROM trackd.history_partitions() p
     WHERE NOT p.is_default
       AND to_regclass(format('trackd.%I', p.partition_name || '_time_brin')) IS NULL
     ORDER BY 1
  LOOP
    EXECUTE format('CREATE INDEX %I ON trackd.%I %s', r.partition_name || '_time_brin',
                   r.partition_name,
                   (SELECT c.definition FROM trackd.history_closed_indexes() c
                     WHERE c.suffix = '_time_brin'));
  END LOOP;
END
$time_brin$;

INSERT INTO trackd.schema_migrations (version, name) VALUES (19, 'history_time_brin')
ON CONFLICT (version) DO NOTHING;
