-- V0009: the history's GiST and btree become per-partition indexes, so that an open ("hot")
-- partition can be written without them and get them when it closes (postgis.defer_indexes,
-- docs/ingest.md "History index layout"; measurements in docs/benchmarks.md).
--
-- Run by `trackd migrate`, or by hand:  psql -1 -v ON_ERROR_STOP=1 -f V0009__history_index_layout.sql
-- No BEGIN/COMMIT here: the runner wraps each file in one transaction (psql does with -1).
-- Safe to run twice.
--
-- A partitioned index on the parent forces every partition to have it (ATTACH PARTITION builds
-- it), so the GiST on geom and the (vehicle_id, recorded_at DESC) btree move to the partitions:
-- the parent's indexes are dropped and every existing partition (and the DEFAULT one) gets
-- the same two indexes under its own name. Queries see the same indexes as before. This
-- rebuilds both indexes of every partition inside the migration's transaction, which holds an
-- ACCESS EXCLUSIVE lock on the history meanwhile: on a large history, stop ingest and run it
-- at a quiet time (6.1 s for 985,084 rows on 2 shared cores, bench/RESULTS.md).
-- The BRIN on ingest_batch_id stays a partitioned index on the parent: it is cheap everywhere.

-- The indexes of a closed partition (today's), by name suffix: <partition><suffix>.
CREATE OR REPLACE FUNCTION trackd.history_closed_indexes()
RETURNS TABLE (suffix text, definition text)
LANGUAGE sql
IMMUTABLE
AS $fn$
  VALUES ('_geom_gist', 'USING gist (geom)'),
         ('_vehicle_time_idx', '(vehicle_id, recorded_at DESC)')
$fn$;
COMMENT ON FUNCTION trackd.history_closed_indexes() IS
  'Indexes every closed partition of trackd.vehicle_telemetry_history has, as name suffix and definition (CREATE INDEX <partition><suffix> ON <partition> <definition>).';

-- The cheap indexes of an open partition under postgis.defer_indexes. Rows of one batch are
-- written in a space-filling-curve order of their position (Morton order of longitude and
-- latitude), so small BRIN ranges of one batch cover a small area: the inclusion BRIN serves
-- bounding boxes, the bloom BRIN a vehicle's track, the minmax BRIN time windows (batches are
-- written in time order). Dropped once the closed indexes are built. The geometry BRIN is
-- PostGIS's default BRIN operator class, brin_geometry_inclusion_ops_2d (named here without its
-- schema, which create_history_partitions' search_path does not include). Its ranges are 2
-- pages: a 0.01 degree box over 1M rows took 22-26 ms with 1-2 pages, 36 ms with 4, 75 with 8.
CREATE OR REPLACE FUNCTION trackd.history_hot_indexes()
RETURNS TABLE (suffix text, definition text)
LANGUAGE sql
IMMUTABLE
AS $fn$
  VALUES ('_time_brin', 'USING brin (recorded_at) WITH (pages_per_range = 4, autosummarize = on)'),
         ('_geom_brin', 'USING brin (geom) WITH (pages_per_range = 2, autosummarize = on)'),
         ('_vehicle_bloom', 'USING brin (vehicle_id text_bloom_ops (n_distinct_per_range = 300, false_positive_rate = 0.01)) WITH (pages_per_range = 4, autosummarize = on)')
$fn$;
COMMENT ON FUNCTION trackd.history_hot_indexes() IS
  'Cheap indexes an open partition of trackd.vehicle_telemetry_history has while its closed indexes are deferred (postgis.defer_indexes), as name suffix and definition.';

DROP INDEX IF EXISTS trackd.vehicle_telemetry_history_geom_gist;
DROP INDEX IF EXISTS trackd.vehicle_telemetry_history_vehicle_time_idx;

DO $move$
DECLARE
  r record;
  i record;
BEGIN
  FOR r IN
    SELECT c.relname
      FROM pg_catalog.pg_inherits h
      JOIN pg_catalog.pg_class c ON c.oid = h.inhrelid
     WHERE h.inhparent = 'trackd.vehicle_telemetry_history'::regclass
  LOOP
    FOR i IN SELECT * FROM trackd.history_closed_indexes() LOOP
      EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON trackd.%I %s',
                     r.relname || i.suffix, r.relname, i.definition);
    END LOOP;
  END LOOP;
END
$move$;

-- create_history_partitions gains p_hot: new partitions get the cheap indexes instead of the
-- closed ones (trackd passes postgis.defer_indexes). The indexes are made on the standalone
-- table before rows move in from DEFAULT and before it is attached, so an attached partition
-- always has one of the two sets. Otherwise as in V0002.
DROP FUNCTION IF EXISTS trackd.create_history_partitions(timestamptz, timestamptz, text);
CREATE OR REPLACE FUNCTION trackd.create_history_partitions(
  p_from     timestamptz,
  p_to       timestamptz,
  p_interval text DEFAULT 'day',
  p_hot      boolean DEFAULT false
)
RETURNS int
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET timezone = 'UTC' -- alignment, names and bounds in UTC whatever the caller's time zone
AS $fn$
DECLARE
  v_step      interval;
  v_fmt       text;
  v_lo        timestamptz;
  v_hi        timestamptz;
  v_name      text;
  v_clash     text;
  v_cols      text;
  v_move      boolean;
  v_moved     bigint;
  v_created   int := 0;
  i           record;
BEGIN
  CASE p_interval
    WHEN 'hour'  THEN v_step := interval '1 hour';  v_fmt := 'YYYYMMDDHH24';
    WHEN 'day'   THEN v_step := interval '1 day';   v_fmt := 'YYYYMMDD';
    WHEN 'week'  THEN v_step := interval '1 week';  v_fmt := 'YYYYMMDD';
    WHEN 'month' THEN v_step := interval '1 month'; v_fmt := 'YYYYMM';
    ELSE
      RAISE EXCEPTION 'trackd.create_history_partitions: unknown interval %', quote_nullable(p_interval)
        USING ERRCODE = 'invalid_parameter_value',
              HINT = 'p_interval must be one of ''hour'', ''day'', ''week'', ''month''.';
  END CASE;
  IF p_from IS NULL OR p_to IS NULL OR NOT isfinite(p_from) OR NOT isfinite(p_to) THEN
    RAISE EXCEPTION 'trackd.create_history_partitions: p_from and p_to must be finite timestamps, got % and %',
      quote_nullable(p_from), quote_nullable(p_to)
      USING ERRCODE = 'invalid_parameter_value';
  END IF;

  -- One partition manager at a time (several trackd instances, a DBA by hand).
  PERFORM pg_advisory_xact_lock(hashtext('trackd.vehicle_telemetry_history partitions'));

  v_move := to_regclass('trackd.vehicle_telemetry_history_default') IS NOT NULL
            AND EXISTS (SELECT 1 FROM trackd.vehicle_telemetry_history_default);
  SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) INTO v_cols
    FROM pg_attribute
   WHERE attrelid = 'trackd.vehicle_telemetry_history'::regclass AND attnum > 0 AND NOT attisdropped;

  v_lo := date_trunc(p_interval, p_from);
  WHILE v_lo < p_to LOOP
    v_hi := v_lo + v_step;
    v_name := 'vehicle_telemetry_history_p' || to_char(v_lo, v_fmt);

    SELECT p.partition_name INTO v_clash
      FROM trackd.history_partitions() p
     WHERE NOT p.is_default AND p.range_from < v_hi AND p.range_to > v_lo
     ORDER BY p.partition_name <> v_name -- an exact name match first
     LIMIT 1;

    IF v_clash = v_name THEN
      NULL; -- already there
    ELSIF v_clash IS NOT NULL THEN
      RAISE NOTICE 'trackd.create_history_partitions: skipped % [%, %): overlaps existing partition %',
        v_name, v_lo, v_hi, v_clash;
    ELSIF to_regclass(format('trackd.%I', v_name)) IS NOT NULL THEN
      RAISE WARNING 'trackd.create_history_partitions: skipped %: trackd.% exists but is not a partition of trackd.vehicle_telemetry_history',
        v_name, v_name;
    ELSE
      EXECUTE format(
        'CREATE TABLE trackd.%I (LIKE trackd.vehicle_telemetry_history'
        ' INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE INCLUDING COMPRESSION)', v_name);
      -- A partition wholly in the past is closed from the start: it gets the closed indexes.
      FOR i IN
        SELECT * FROM trackd.history_hot_indexes() WHERE p_hot AND v_hi > now()
        UNION ALL
        SELECT * FROM trackd.history_closed_indexes() WHERE NOT (p_hot AND v_hi > now())
      LOOP
        EXECUTE format('CREATE INDEX %I ON trackd.%I %s', v_name || i.suffix, v_name, i.definition);
      END LOOP;
      IF v_move THEN
        EXECUTE format(
          'WITH moved AS (DELETE FROM trackd.vehicle_telemetry_history_default'
          ' WHERE recorded_at >= $1 AND recorded_at < $2 RETURNING %1$s)'
          ' INSERT INTO trackd.%2$I (%1$s) SELECT %1$s FROM moved', v_cols, v_name)
          USING v_lo, v_hi;
        GET DIAGNOSTICS v_moved = ROW_COUNT;
        IF v_moved > 0 THEN
          RAISE NOTICE 'trackd.create_history_partitions: moved % rows from the default partition into %',
            v_moved, v_name;
        END IF;
      END IF;
      EXECUTE format(
        'ALTER TABLE trackd.vehicle_telemetry_history ATTACH PARTITION trackd.%I FOR VALUES FROM (%L) TO (%L)',
        v_name, v_lo, v_hi);
      EXECUTE format('GRANT SELECT, INSERT ON trackd.%I TO trackd_ingest', v_name);
      EXECUTE format('GRANT SELECT ON trackd.%I TO trackd_api, trackd_readonly', v_name);
      v_created := v_created + 1;
    END IF;
    v_lo := v_hi;
  END LOOP;
  RETURN v_created;
END
$fn$;
COMMENT ON FUNCTION trackd.create_history_partitions(timestamptz, timestamptz, text, boolean) IS
  'Creates the partitions of trackd.vehicle_telemetry_history for every hour/day/week/month (UTC) overlapping [p_from, p_to), moving matching rows out of the DEFAULT partition; skips existing or overlapping ranges. With p_hot, partitions not yet past get the cheap indexes (trackd.history_hot_indexes) instead of the closed ones. Returns the number created.';

-- What trackd's index maintenance (postgis.defer_indexes) works from: each time partition
-- with its upper bound and, per closed index, whether it exists and is valid; and which hot
-- indexes it still has. One row per partition.
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
                ORDER BY 1),
         ARRAY(SELECT ic.relname::text FROM trackd.history_closed_indexes() c
                 JOIN pg_class ic ON ic.relname = p.partition_name || c.suffix
                  AND ic.relnamespace = 'trackd'::regnamespace
                 JOIN pg_index x ON x.indexrelid = ic.oid
                WHERE NOT (x.indisvalid AND x.indisready)
                ORDER BY 1),
         ARRAY(SELECT p.partition_name || h.suffix FROM trackd.history_hot_indexes() h
                WHERE to_regclass(format('trackd.%I', p.partition_name || h.suffix)) IS NOT NULL
                ORDER BY 1)
    FROM trackd.history_partitions() p
   WHERE NOT p.is_default
$fn$;
COMMENT ON FUNCTION trackd.history_partition_indexes() IS
  'Per time partition of trackd.vehicle_telemetry_history: its upper bound, the closed indexes it lacks, those left invalid (an interrupted CREATE INDEX CONCURRENTLY), and the hot indexes it still has.';

-- When postgis.defer_indexes is switched on, the partitions already made ahead (by the
-- migrations, or by trackd before) have the closed indexes. trackd run calls this before it
-- ingests: every partition not yet past and still empty gets the hot indexes instead. A
-- partition with rows keeps what it has (dropping its GiST would slow its queries) and closes
-- as it is. Each partition is locked briefly (p_lock_timeout_ms, then skipped). Returns how many
-- it changed. SECURITY DEFINER like create_history_partitions: only fixed index definitions.
CREATE OR REPLACE FUNCTION trackd.defer_open_history_partition_indexes(p_lock_timeout_ms int DEFAULT 1000)
RETURNS int
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
  r        record;
  i        record;
  v_empty  boolean;
  v_done   int := 0;
BEGIN
  PERFORM set_config('lock_timeout', greatest(p_lock_timeout_ms, 1) || 'ms', true);
  FOR r IN
    SELECT p.partition_name FROM trackd.history_partition_indexes() p
     WHERE p.range_to > now() AND cardinality(p.hot_present) = 0
  LOOP
    BEGIN
      EXECUTE format('LOCK TABLE trackd.%I IN ACCESS EXCLUSIVE MODE', r.partition_name);
      EXECUTE format('SELECT NOT EXISTS (SELECT 1 FROM trackd.%I)', r.partition_name) INTO v_empty;
      IF v_empty THEN
        FOR i IN SELECT * FROM trackd.history_closed_indexes() LOOP
          EXECUTE format('DROP INDEX IF EXISTS trackd.%I', r.partition_name || i.suffix);
        END LOOP;
        FOR i IN SELECT * FROM trackd.history_hot_indexes() LOOP
          EXECUTE format('CREATE INDEX %I ON trackd.%I %s', r.partition_name || i.suffix,
                         r.partition_name, i.definition);
        END LOOP;
        v_done := v_done + 1;
      END IF;
    EXCEPTION WHEN lock_not_available THEN
      RAISE NOTICE 'trackd.defer_open_history_partition_indexes: % is busy, left as it is', r.partition_name;
    END;
  END LOOP;
  RETURN v_done;
END
$fn$;
COMMENT ON FUNCTION trackd.defer_open_history_partition_indexes(int) IS
  'Gives every empty partition of trackd.vehicle_telemetry_history not yet past the hot indexes instead of the closed ones (postgis.defer_indexes switched on). Returns the number changed.';

REVOKE ALL ON FUNCTION trackd.defer_open_history_partition_indexes(int) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION trackd.defer_open_history_partition_indexes(int) TO trackd_ingest;
REVOKE ALL ON FUNCTION trackd.create_history_partitions(timestamptz, timestamptz, text, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION trackd.create_history_partitions(timestamptz, timestamptz, text, boolean) TO trackd_ingest;
REVOKE ALL ON FUNCTION trackd.history_partition_indexes() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION trackd.history_partition_indexes() TO trackd_ingest, trackd_api, trackd_readonly;

INSERT INTO trackd.schema_migrations (version, name) VALUES (9, 'history_index_layout')
ON CONFLICT (version) DO NOTHING;
