-- V0021: listing the history partitions takes no lock on any of them.
--
-- trackd.history_partitions() read each partition's bounds with pg_get_expr(relpartbound,
-- <partition>). Given a relation, PostgreSQL 15's pg_get_expr opens it to name its columns, and
-- so waits for its ACCESS SHARE lock. While anyone held an ACCESS EXCLUSIVE lock on any
-- partition (a DBA's VACUUM FULL, CLUSTER or ALTER TABLE on an old one), every caller waited:
-- trackd's index maintenance gave up after its 100 ms lock wait on every pass, so the
-- partitions being written got no BRIN summaries and no first ANALYZE for as long as the DBA
-- held it; trackd.create_history_partitions(), the sink's partition list, retention and
-- `trackd audit` waited up to their own lock timeouts.
--
-- A partition bound holds constants only, which pg_get_expr prints the same without the
-- relation: relation 0 reads nothing but the catalog. The function keeps its signature and
-- its answers.
--
-- trackd.analyze_new_history_partitions() (V0020) also checks a partition's size only inside
-- its per-partition block, so that a partition whose lock is held, or which is dropped
-- meanwhile, is passed over instead of failing the whole call.
--
-- Run by `trackd migrate`, or by hand:  psql -1 -v ON_ERROR_STOP=1 -f V0021__history_partitions_without_locks.sql
-- No BEGIN/COMMIT here: the runner wraps each file in one transaction (psql does with -1).
-- Safe to run twice.

CREATE OR REPLACE FUNCTION trackd.history_partitions()
RETURNS TABLE (partition_name text, range_from timestamptz, range_to timestamptz, is_default boolean)
LANGUAGE sql
STABLE
SET search_path = pg_catalog, pg_temp
SET timezone = 'UTC'
AS $fn$
  SELECT c.relname::text,
         CASE WHEN m.b IS NULL THEN NULL
              WHEN m.b[1] = 'MINVALUE' THEN '-infinity'::timestamptz
              WHEN m.b[1] = 'MAXVALUE' THEN 'infinity'::timestamptz
              ELSE regexp_replace(m.b[1], '^''(.*)''$', '\1')::timestamptz END,
         CASE WHEN m.b IS NULL THEN NULL
              WHEN m.b[2] = 'MINVALUE' THEN '-infinity'::timestamptz
              WHEN m.b[2] = 'MAXVALUE' THEN 'infinity'::timestamptz
              ELSE regexp_replace(m.b[2], '^''(.*)''$', '\1')::timestamptz END,
         c.relpartbound IS NOT NULL AND pg_get_expr(c.relpartbound, 0) = 'DEFAULT'
    FROM pg_inherits i
    JOIN pg_class c ON c.oid = i.inhrelid
    CROSS JOIN LATERAL (
      SELECT regexp_match(pg_get_expr(c.relpartbound, 0),
                          '^FOR VALUES FROM \((.*)\) TO \((.*)\)$') AS b
    ) m
   WHERE i.inhparent = 'trackd.vehicle_telemetry_history'::regclass
   ORDER BY 2 NULLS LAST, 1
$fn$;
COMMENT ON FUNCTION trackd.history_partitions() IS
  'Partitions of trackd.vehicle_telemetry_history with their [range_from, range_to) bounds; the DEFAULT partition has NULL bounds. Reads the catalog only: takes no lock on any partition.';

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
    SELECT p.partition_name, t.oid
      FROM trackd.history_partitions() p
      JOIN pg_class t ON t.relname = p.partition_name AND t.relnamespace = 'trackd'::regnamespace
     WHERE NOT p.is_default AND p.range_from <= now()
       AND p.range_to > now() - make_interval(secs => greatest(p_grace_s, 0))
       AND NOT EXISTS (SELECT 1 FROM pg_stats s
                        WHERE s.schemaname = 'trackd' AND s.tablename = p.partition_name
                          AND s.attname = 'recorded_at')
     ORDER BY p.range_from
  LOOP
    BEGIN
      -- The size takes the partition's ACCESS SHARE lock; NULL for one dropped meanwhile.
      IF pg_relation_size(r.oid) > 0 THEN
        EXECUTE format('ANALYZE trackd.%I', r.partition_name);
        v_total := v_total + 1;
      END IF;
    EXCEPTION
      WHEN lock_not_available THEN
        NULL;  -- busy (autovacuum, an index build, a DBA's ALTER TABLE): the next call
      WHEN undefined_table THEN
        NULL;  -- dropped meanwhile (postgis.retention)
    END;
  END LOOP;
  RETURN v_total;
END
$fn$;

INSERT INTO trackd.schema_migrations (version, name) VALUES (21, 'history_partitions_without_locks')
ON CONFLICT (version) DO NOTHING;
