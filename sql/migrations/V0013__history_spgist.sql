-- V0013: history partitions index geom with SP-GiST instead of GiST (docs/ingest.md "History
-- index layout"; measurements in docs/benchmarks.md, "SP-GiST for every partition").
--
-- The GiST was the costliest thing a history row paid for: a GiST insert weighs every entry of
-- each node on its way down (and splits), about 7 µs a row here, more than half of the history
-- COPY; an SP-GiST insert (PostGIS's spgist_geometry_ops_2d, a quadtree) descends one quadrant
-- path, about 3.5 µs. Both answer && (bounding boxes: the API's bbox and OGC queries, QGIS's
-- map views, ST_Intersects and the other functions whose index support adds &&). V0010 gave the
-- open partition an SP-GiST under postgis.defer_indexes; now every partition has one, and a
-- partition that closes keeps it (only the btree is left to build then).
--
-- Run by `trackd migrate`, or by hand:  psql -1 -v ON_ERROR_STOP=1 -f V0013__history_spgist.sql
-- No BEGIN/COMMIT here: the runner wraps each file in one transaction (psql does with -1).
-- Safe to run twice.
--
-- Partitions that already hold rows keep their GiST: it answers the same queries, and building
-- an SP-GiST over them would take the migration minutes per million rows. history_partition_indexes
-- counts such a GiST as the partition's spatial index, so the indexer does not build a second one.
-- Empty partitions (those made ahead) get the SP-GiST now, under a brief lock each.

CREATE OR REPLACE FUNCTION trackd.history_closed_indexes()
RETURNS TABLE (suffix text, definition text)
LANGUAGE sql
IMMUTABLE
AS $fn$
  VALUES ('_geom_spgist', 'USING spgist (geom)'),
         ('_vehicle_time_idx', '(vehicle_id, recorded_at DESC)')
$fn$;
COMMENT ON FUNCTION trackd.history_closed_indexes() IS
  'Indexes every closed partition of trackd.vehicle_telemetry_history has, as name suffix and definition (CREATE INDEX <partition><suffix> ON <partition> <definition>). A partition made before V0013 may have <partition>_geom_gist in place of _geom_spgist.';

-- As in V0009, with two changes: a valid GiST made before V0013 stands for the SP-GiST, and an
-- index both sets name (the SP-GiST) is not a hot index to drop when the partition closes.
CREATE OR REPLACE FUNCTION trackd.history_partition_indexes()
RETURNS TABLE (partition_name text, range_to timestamptz, closed_missing text[],
               closed_invalid text[], hot_present text[])
LANGUAGE sql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
  SELECT p.partition_name, p.range_to,
         ARRAY(SELECT p.partition_name || c.suffix FROM trackd.history_closed_indexes() c
                WHERE to_regclass(format('trackd.%I', p.partition_name || c.suffix)) IS NULL
                  AND NOT (c.suffix = '_geom_spgist' AND EXISTS (
                        SELECT 1 FROM pg_class g JOIN pg_index x ON x.indexrelid = g.oid
                         WHERE g.relname = p.partition_name || '_geom_gist'
                           AND g.relnamespace = 'trackd'::regnamespace
                           AND x.indisvalid AND x.indisready))
                ORDER BY 1),
         ARRAY(SELECT ic.relname::text FROM trackd.history_closed_indexes() c
                 JOIN pg_class ic ON ic.relname = p.partition_name || c.suffix
                  AND ic.relnamespace = 'trackd'::regnamespace
                 JOIN pg_index x ON x.indexrelid = ic.oid
                WHERE NOT (x.indisvalid AND x.indisready)
                ORDER BY 1),
         ARRAY(SELECT p.partition_name || h.suffix FROM trackd.history_hot_indexes() h
                WHERE to_regclass(format('trackd.%I', p.partition_name || h.suffix)) IS NOT NULL
                  AND h.suffix NOT IN (SELECT c.suffix FROM trackd.history_closed_indexes() c)
                ORDER BY 1)
    FROM trackd.history_partitions() p
   WHERE NOT p.is_default
$fn$;
COMMENT ON FUNCTION trackd.history_partition_indexes() IS
  'Per time partition of trackd.vehicle_telemetry_history: its upper bound, the closed indexes it lacks, those left invalid (an interrupted CREATE INDEX CONCURRENTLY), and the hot indexes it still has (not counting those the closed set shares).';

DO $convert$
DECLARE
  r        record;
  v_empty  boolean;
BEGIN
  FOR r IN
    SELECT c.relname
      FROM pg_catalog.pg_inherits h
      JOIN pg_catalog.pg_class c ON c.oid = h.inhrelid
     WHERE h.inhparent = 'trackd.vehicle_telemetry_history'::regclass
       AND to_regclass(format('trackd.%I', c.relname || '_geom_gist')) IS NOT NULL
  LOOP
    -- A look first, which ingest and readers do not notice; the lock only for an empty one.
    EXECUTE format('SELECT NOT EXISTS (SELECT 1 FROM trackd.%I)', r.relname) INTO v_empty;
    IF v_empty THEN
      EXECUTE format('LOCK TABLE trackd.%I IN ACCESS EXCLUSIVE MODE', r.relname);
      EXECUTE format('SELECT NOT EXISTS (SELECT 1 FROM trackd.%I)', r.relname) INTO v_empty;
    END IF;
    IF v_empty THEN
      EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON trackd.%I USING spgist (geom)',
                     r.relname || '_geom_spgist', r.relname);
      EXECUTE format('DROP INDEX trackd.%I', r.relname || '_geom_gist');
    END IF;
  END LOOP;
END
$convert$;

INSERT INTO trackd.schema_migrations (version, name) VALUES (13, 'history_spgist')
ON CONFLICT (version) DO NOTHING;
