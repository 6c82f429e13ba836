-- V0010: the open ("hot") partition's indexes under postgis.defer_indexes become ones that
-- answer the API's and QGIS's history queries as fast as the closed GiST and btree do, at about
-- three quarters of their write cost (docs/ingest.md "History index layout"; measurements in
-- docs/benchmarks.md):
--   _time_brin     minmax BRIN on recorded_at (as in V0009): time windows;
--   _geom_spgist   SP-GiST on geom (PostGIS's spgist_geometry_ops_2d, a quadtree): bounding
--                  boxes, in place of V0009's inclusion BRIN, which scanned a whole batch's
--                  ranges and made a 0.01 degree box over the last 10 minutes 12x slower;
--   _vehicle_hash  hash on vehicle_id: a vehicle's track, in place of V0009's bloom BRIN (3x
--                  slower); a hash insert is one bucket page and no collation-aware comparisons,
--                  where the btree's text comparisons made it the second costliest index.
-- Closed partitions keep exactly the GiST and btree (trackd.history_closed_indexes()).
--
-- Run by `trackd migrate`, or by hand:  psql -1 -v ON_ERROR_STOP=1 -f V0010__history_hot_index_set.sql
-- No BEGIN/COMMIT here: the runner wraps each file in one transaction (psql does with -1).
-- Safe to run twice.
--
-- A partition that still has V0009's hot BRINs (open when this runs, postgis.defer_indexes on)
-- gets the new hot indexes and loses the two BRINs they replace, inside this transaction: its
-- writes wait meanwhile (an SP-GiST and a hash index over the open partition's rows; seconds
-- per million rows). Partitions without them (the default layout) are not touched.

CREATE OR REPLACE FUNCTION trackd.history_hot_indexes()
RETURNS TABLE (suffix text, definition text)
LANGUAGE sql
IMMUTABLE
AS $fn$
  VALUES ('_time_brin', 'USING brin (recorded_at) WITH (pages_per_range = 4, autosummarize = on)'),
         ('_geom_spgist', 'USING spgist (geom)'),
         ('_vehicle_hash', 'USING hash (vehicle_id)')
$fn$;
COMMENT ON FUNCTION trackd.history_hot_indexes() IS
  'Cheap indexes an open partition of trackd.vehicle_telemetry_history has while its closed indexes are deferred (postgis.defer_indexes), as name suffix and definition.';

DO $convert$
DECLARE
  r record;
  i record;
BEGIN
  FOR r IN
    SELECT c.relname
      FROM pg_catalog.pg_inherits h
      JOIN pg_catalog.pg_class c ON c.oid = h.inhrelid
     WHERE h.inhparent = 'trackd.vehicle_telemetry_history'::regclass
       AND (to_regclass(format('trackd.%I', c.relname || '_geom_brin')) IS NOT NULL
            OR to_regclass(format('trackd.%I', c.relname || '_vehicle_bloom')) IS NOT NULL)
  LOOP
    FOR i IN SELECT * FROM trackd.history_hot_indexes() LOOP
      EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON trackd.%I %s',
                     r.relname || i.suffix, r.relname, i.definition);
    END LOOP;
    EXECUTE format('DROP INDEX IF EXISTS trackd.%I', r.relname || '_geom_brin');
    EXECUTE format('DROP INDEX IF EXISTS trackd.%I', r.relname || '_vehicle_bloom');
  END LOOP;
END
$convert$;

INSERT INTO trackd.schema_migrations (version, name) VALUES (10, 'history_hot_index_set')
ON CONFLICT (version) DO NOTHING;
