-- V0020: trackd's index maintenance analyzes a history partition being written as soon as it
-- holds rows and has no statistics yet (docs/ingest.md, "History index layout").
--
-- A partition is made ahead, empty, and has no column statistics until autovacuum first
-- analyzes it: at its next visit of the database (autovacuum_naptime, a minute by default) or
-- later when its workers are busy vacuuming the last partition. Until then the planner does not
-- know that recorded_at follows the partition's physical order, and reads a time window over
-- every vehicle through the whole (vehicle_id, recorded_at) btree instead of the BRIN on
-- recorded_at (V0019): 49 ms for a 1 s window at 1.2M rows, against 3.5 ms once analyzed. Every
-- new partition went through that for its first minute or so.
--
--   * trackd.analyze_new_history_partitions() runs ANALYZE on each partition being written
--     (begun, and ended less than p_grace_s ago) that holds pages but has no statistics on
--     recorded_at; trackd's index maintenance calls it on each pass
--     (postgis.index_check_interval_s), on its own connection, after the BRIN summaries. Once a
--     partition has statistics autovacuum keeps them up to date as before (its 10 % rule).
--   * ANALYZE takes the partition's SHARE UPDATE EXCLUSIVE lock, as VACUUM does: COPY and reads
--     go on. A partition whose lock is busy for more than p_lock_timeout_ms (autovacuum is
--     analyzing it, an index build) is left for the next call.
--
-- Run by `trackd migrate`, or by hand:  psql -1 -v ON_ERROR_STOP=1 -f V0020__history_analyze_new_partitions.sql
-- No BEGIN/COMMIT here: the runner wraps each file in one transaction (psql does with -1).
-- Safe to run twice.

CREATE OR REPLACE FUNCTION trackd.analyze_new_history_partitions(p_grace_s int DEFAULT 3600,
                                                                 p_lock_timeout_ms int DEFAULT 100)
RETURNS int
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
  r       record;
  v_total int := 0;
BEGIN
  PERFORM set_config('lock_timeout', greatest(p_lock_timeout_ms, 1) || 'ms', true);
  FOR r IN
    SELECT p.partition_name
      FROM trackd.history_partitions() p
      JOIN pg_class t ON t.relname = p.partition_name AND t.relnamespace = 'trackd'::regnamespace
     WHERE NOT p.is_default AND p.range_from <= now()
       AND p.range_to > now() - make_interval(secs => greatest(p_grace_s, 0))
       AND pg_relation_size(t.oid) > 0  -- NULL, so left out, for one dropped meanwhile
       AND NOT EXISTS (SELECT 1 FROM pg_stats s
                        WHERE s.schemaname = 'trackd' AND s.tablename = p.partition_name
                          AND s.attname = 'recorded_at')
     ORDER BY p.range_from
  LOOP
    BEGIN
      EXECUTE format('ANALYZE trackd.%I', r.partition_name);
      v_total := v_total + 1;
    EXCEPTION
      WHEN lock_not_available THEN
        NULL;  -- busy (autovacuum, an index build): the next call
      WHEN undefined_table THEN
        NULL;  -- dropped meanwhile (postgis.retention)
    END;
  END LOOP;
  RETURN v_total;
END
$fn$;
COMMENT ON FUNCTION trackd.analyze_new_history_partitions(int, int) IS
  'Runs ANALYZE on each partition of trackd.vehicle_telemetry_history being written (begun, and ended less than p_grace_s ago) that holds pages but has no statistics on recorded_at yet, skipping one whose lock is busy for more than p_lock_timeout_ms. Returns how many it analyzed. trackd run calls it on each index maintenance pass.';

INSERT INTO trackd.schema_migrations (version, name) VALUES (20, 'history_analyze_new_partitions')
ON CONFLICT (version) DO NOTHING;
