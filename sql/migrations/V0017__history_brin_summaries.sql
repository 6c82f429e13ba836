-- V0017: trackd summarizes the history's BRIN ranges itself (docs/ingest.md, "History index
-- layout"; docs/operations.md, "PostgreSQL tuning").
--
-- The history's BRINs had autosummarize on: the BRIN on ingest_batch_id on every partition
-- (V0008) and, under postgis.defer_indexes, the open partition's BRIN on recorded_at (V0009,
-- V0010, 4-page ranges). Each range that fills asks autovacuum to summarize it. PostgreSQL keeps
-- those requests in one queue of 256 for the whole server and works through a database's share
-- once per autovacuum_naptime, so a heavy ingest overflows it: every request that does not fit
-- is dropped with a LOG line ("request for BRIN range summarization ... was not recorded",
-- hundreds a minute), and its range stays unsummarized, read in full by every query through the
-- index, until the next VACUUM of the partition. Now:
--   * new partitions get their BRINs without autosummarize: create_history_partitions makes the
--     partition's share of the parent's BRIN on ingest_batch_id on the standalone table, before
--     ATTACH, which would otherwise copy the parent's options (PostgreSQL 15 cannot change a
--     partitioned index's options); the hot set's BRIN on recorded_at loses the option;
--   * trackd.summarize_history_brins() summarizes the new ranges of every BRIN of the partitions
--     being written; trackd's index maintenance calls it on each pass
--     (postgis.index_check_interval_s), on its own connection;
--   * empty partitions made ahead lose the option now; a partition that holds rows keeps it
--     until it closes (changing it takes a lock that COPY would wait for).
--
-- Run by `trackd migrate`, or by hand:  psql -1 -v ON_ERROR_STOP=1 -f V0017__history_brin_summaries.sql
-- No BEGIN/COMMIT here: the runner wraps each file in one transaction (psql does with -1).
-- Safe to run twice.

CREATE OR REPLACE FUNCTION trackd.history_hot_indexes()
RETURNS TABLE (suffix text, definition text)
LANGUAGE sql
IMMUTABLE
AS $fn$
  VALUES ('_time_brin', 'USING brin (recorded_at) WITH (pages_per_range = 4)'),
         ('_geom_spgist', 'USING spgist (geom)'),
         ('_vehicle_hash', 'USING hash (vehicle_id)')
$fn$;
COMMENT ON FUNCTION trackd.history_hot_indexes() IS
  'Cheap indexes an open partition of trackd.vehicle_telemetry_history has while its closed indexes are deferred (postgis.defer_indexes), as name suffix and definition.';

-- As in V0009, with the partition's BRIN on ingest_batch_id made before ATTACH.
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
      -- The partition's share of the parent's BRIN on ingest_batch_id, made here so that it has
      -- no autosummarize (the parent's, V0008, does, and ATTACH would copy it); ATTACH takes it
      -- as the parent's index on the partition, under the name it would have given it.
      IF to_regclass('trackd.vehicle_telemetry_history_batch_brin') IS NOT NULL THEN
        EXECUTE format('CREATE INDEX %I ON trackd.%I USING brin (ingest_batch_id)',
                       v_name || '_ingest_batch_id_idx', v_name);
      END IF;
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

-- Summarizes the block ranges not yet summarized of every BRIN index on the history partitions
-- being written: those whose range has begun and ended less than p_grace_s ago (late rows go
-- there too). Returns the number of ranges summarized. Each index is locked SHARE UPDATE
-- EXCLUSIVE (as VACUUM does; COPY and reads go on) for at most p_lock_timeout_ms to wait: one
-- that a VACUUM or an index build holds is left for the next call. Keep the wait under
-- deadlock_timeout (1 s), after which PostgreSQL would cancel an autovacuum in the way.
-- SECURITY DEFINER like create_history_partitions: summarizing needs the index's owner.
CREATE OR REPLACE FUNCTION trackd.summarize_history_brins(p_grace_s int DEFAULT 3600,
                                                          p_lock_timeout_ms int DEFAULT 100)
RETURNS int
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
  r       record;
  v_n     int;
  v_total int := 0;
BEGIN
  PERFORM set_config('lock_timeout', greatest(p_lock_timeout_ms, 1) || 'ms', true);
  FOR r IN
    SELECT x.indexrelid
      FROM trackd.history_partitions() p
      JOIN pg_class t ON t.relname = p.partition_name AND t.relnamespace = 'trackd'::regnamespace
      JOIN pg_index x ON x.indrelid = t.oid
      JOIN pg_class i ON i.oid = x.indexrelid
      JOIN pg_am a ON a.oid = i.relam AND a.amname = 'brin'
     WHERE NOT p.is_default AND p.range_from <= now()
       AND p.range_to > now() - make_interval(secs => greatest(p_grace_s, 0))
       AND x.indisvalid
     ORDER BY p.range_from, i.relname
  LOOP
    BEGIN
      v_n := brin_summarize_new_values(r.indexrelid);
      v_total := v_total + v_n;
    EXCEPTION WHEN lock_not_available THEN
      NULL;  -- busy (a VACUUM, an index build): the next call
    END;
  END LOOP;
  RETURN v_total;
END
$fn$;
COMMENT ON FUNCTION trackd.summarize_history_brins(int, int) IS
  'Summarizes the new block ranges of every BRIN index on the partitions of trackd.vehicle_telemetry_history being written (begun, and ended less than p_grace_s ago), skipping an index busy for more than p_lock_timeout_ms. Returns the number of ranges summarized. trackd run calls it on each index maintenance pass.';

-- Empty partitions made ahead: their BRINs lose autosummarize now (a brief lock each; a busy one
-- is left as it is).
DO $off$
DECLARE
  r       record;
  v_empty boolean;
BEGIN
  PERFORM set_config('lock_timeout', '1000ms', true);
  FOR r IN
    SELECT t.relname AS partition_name, i.relname AS index_name
      FROM pg_inherits h
      JOIN pg_class t ON t.oid = h.inhrelid
      JOIN pg_index x ON x.indrelid = t.oid
      JOIN pg_class i ON i.oid = x.indexrelid
     WHERE h.inhparent = 'trackd.vehicle_telemetry_history'::regclass
       AND i.reloptions @> ARRAY['autosummarize=on']
     ORDER BY 1, 2
  LOOP
    BEGIN
      EXECUTE format('SELECT NOT EXISTS (SELECT 1 FROM trackd.%I)', r.partition_name) INTO v_empty;
      IF v_empty THEN
        EXECUTE format('ALTER INDEX trackd.%I SET (autosummarize = off)', r.index_name);
      END IF;
    EXCEPTION WHEN lock_not_available THEN
      RAISE NOTICE 'V0017: % is busy, keeps autosummarize', r.index_name;
    END;
  END LOOP;
END
$off$;

REVOKE ALL ON FUNCTION trackd.create_history_partitions(timestamptz, timestamptz, text, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION trackd.create_history_partitions(timestamptz, timestamptz, text, boolean) TO trackd_ingest;
REVOKE ALL ON FUNCTION trackd.summarize_history_brins(int, int) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION trackd.summarize_history_brins(int, int) TO trackd_ingest;

INSERT INTO trackd.schema_migrations (version, name) VALUES (17, 'history_brin_summaries')
ON CONFLICT (version) DO NOTHING;
