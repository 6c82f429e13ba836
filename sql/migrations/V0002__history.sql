-- V0002: the position history, partitioned by time, and the functions that manage its partitions.
--
-- Run by `trackd migrate`, or by hand:  psql -1 -v ON_ERROR_STOP=1 -f V0002__history.sql
-- No BEGIN/COMMIT here: the runner wraps each file in one transaction (psql does with -1).
-- Safe to run twice.

-- Every accepted position, append-only. Range partitions on recorded_at keep indexes small,
-- make retention a DROP TABLE instead of a DELETE, and let time-bounded queries skip partitions.
-- No primary key: a unique key on a partitioned table must contain recorded_at, and enforcing
-- one would slow COPY. Exactly-once comes from the offsets in trackd.kafka_offsets instead.
CREATE TABLE IF NOT EXISTS trackd.vehicle_telemetry_history (
  vehicle_id      text                   NOT NULL,
  recorded_at     timestamptz            NOT NULL,
  geom            geometry(PointZ, 4326) NOT NULL,
  speed_kmh       real,
  heading_deg     real,
  accuracy_m      real,
  attributes      jsonb,
  ingest_batch_id bigint                 NOT NULL,
  kafka_partition int                    NOT NULL,
  kafka_offset    bigint                 NOT NULL
) PARTITION BY RANGE (recorded_at);

COMMENT ON TABLE trackd.vehicle_telemetry_history IS
  'Every accepted vehicle position (one row per Kafka message), partitioned by recorded_at. Query this parent table: it covers all partitions. Positions are WGS 84 (EPSG:4326) with altitude in Z.';
COMMENT ON COLUMN trackd.vehicle_telemetry_history.recorded_at IS 'When the vehicle recorded the position (from the message), not when it was ingested.';
COMMENT ON COLUMN trackd.vehicle_telemetry_history.geom IS 'Position, longitude/latitude in EPSG:4326, Z = altitude in metres (0 when the message had none).';
COMMENT ON COLUMN trackd.vehicle_telemetry_history.attributes IS 'Message fields beyond the known ones, as sent.';
COMMENT ON COLUMN trackd.vehicle_telemetry_history.ingest_batch_id IS 'The ingest transaction that wrote the row (trackd.ingest_batch_id_seq); the archive copies rows by it.';
COMMENT ON COLUMN trackd.vehicle_telemetry_history.kafka_partition IS 'Kafka partition the message came from.';
COMMENT ON COLUMN trackd.vehicle_telemetry_history.kafka_offset IS 'Kafka offset of the message within its partition.';

-- Catches every row no other partition accepts (late, far past, far future), so no position is
-- ever refused for lack of a partition. create_history_partitions() moves rows out of it when it
-- creates a partition for their range. Kept small in practice; hence its own recorded_at index,
-- which makes those moves cheap.
CREATE TABLE IF NOT EXISTS trackd.vehicle_telemetry_history_default
  PARTITION OF trackd.vehicle_telemetry_history DEFAULT;
COMMENT ON TABLE trackd.vehicle_telemetry_history_default IS
  'Rows of trackd.vehicle_telemetry_history outside every time partition. Should stay small: create partitions for the range (trackd.create_history_partitions) to move them out.';
CREATE INDEX IF NOT EXISTS vehicle_telemetry_history_default_recorded_at_idx
  ON trackd.vehicle_telemetry_history_default (recorded_at);

-- Indexes on the parent are created on every partition, present and future.
-- GiST: bbox, nearby and geofence queries. Btree: a vehicle's track, newest first.
-- BRIN: ingest_batch_id grows with insertion order, so a tiny BRIN serves the archive's range scans.
CREATE INDEX IF NOT EXISTS vehicle_telemetry_history_geom_gist
  ON trackd.vehicle_telemetry_history USING gist (geom);
CREATE INDEX IF NOT EXISTS vehicle_telemetry_history_vehicle_time_idx
  ON trackd.vehicle_telemetry_history (vehicle_id, recorded_at DESC);
CREATE INDEX IF NOT EXISTS vehicle_telemetry_history_batch_brin
  ON trackd.vehicle_telemetry_history USING brin (ingest_batch_id);

-- The time partitions with their bounds, read from the catalog. range_from/range_to are NULL for
-- the DEFAULT partition, -infinity/infinity for MINVALUE/MAXVALUE bounds.
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
         c.relpartbound IS NOT NULL AND pg_get_expr(c.relpartbound, c.oid) = 'DEFAULT'
    FROM pg_inherits i
    JOIN pg_class c ON c.oid = i.inhrelid
    CROSS JOIN LATERAL (
      SELECT regexp_match(pg_get_expr(c.relpartbound, c.oid),
                          '^FOR VALUES FROM \((.*)\) TO \((.*)\)$') AS b
    ) m
   WHERE i.inhparent = 'trackd.vehicle_telemetry_history'::regclass
   ORDER BY 2 NULLS LAST, 1
$fn$;
COMMENT ON FUNCTION trackd.history_partitions() IS
  'Partitions of trackd.vehicle_telemetry_history with their [range_from, range_to) bounds; the DEFAULT partition has NULL bounds.';

-- Creates the partitions for every p_interval ('hour', 'day', 'week' or 'month') overlapping
-- [p_from, p_to), aligned on date_trunc(p_interval, ...) in UTC (weeks start on Monday), named
-- vehicle_telemetry_history_pYYYYMMDDHH (hour), _pYYYYMMDD (day, week) or _pYYYYMM (month).
-- Returns how many it created. Re-running is harmless: an interval that already has a partition,
-- or overlaps one made at another interval, is skipped.
--
-- Rows already in the DEFAULT partition for a new range would make CREATE TABLE ... PARTITION OF
-- fail, so each partition is created standalone, those rows are moved into it, then it is
-- attached. ATTACH also takes a weaker lock on the parent than CREATE ... PARTITION OF, so ingest
-- keeps writing meanwhile.
--
-- SECURITY DEFINER because attaching a partition requires owning the parent table; this lets
-- trackd_ingest create partitions ahead of time without owning anything. Its inputs are a time
-- range and a fixed list of intervals, and every identifier goes through format('%I').
CREATE OR REPLACE FUNCTION trackd.create_history_partitions(
  p_from     timestamptz,
  p_to       timestamptz,
  p_interval text DEFAULT 'day'
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

  -- Rows need moving only if the default partition has any; checked once, it is usually empty.
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
      -- e.g. a detached old partition kept around; never touch it, rows go to DEFAULT meanwhile.
      RAISE WARNING 'trackd.create_history_partitions: skipped %: trackd.% exists but is not a partition of trackd.vehicle_telemetry_history',
        v_name, v_name;
    ELSE
      EXECUTE format(
        'CREATE TABLE trackd.%I (LIKE trackd.vehicle_telemetry_history'
        ' INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE INCLUDING COMPRESSION)', v_name);
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
      -- Same access as on the parent, for queries and COPY aimed at one partition.
      EXECUTE format('GRANT SELECT, INSERT ON trackd.%I TO trackd_ingest', v_name);
      EXECUTE format('GRANT SELECT ON trackd.%I TO trackd_api, trackd_readonly', v_name);
      v_created := v_created + 1;
    END IF;
    v_lo := v_hi;
  END LOOP;
  RETURN v_created;
END
$fn$;
COMMENT ON FUNCTION trackd.create_history_partitions(timestamptz, timestamptz, text) IS
  'Creates the partitions of trackd.vehicle_telemetry_history for every hour/day/week/month (UTC) overlapping [p_from, p_to), moving matching rows out of the DEFAULT partition; skips existing or overlapping ranges. Returns the number created.';

-- Drops every time partition whose upper bound is at or before p_before (never the DEFAULT
-- partition) and returns how many. Rows are gone for good: the archive adds a guard so that
-- nothing it has not committed to Iceberg is dropped. Owner only: not granted to any role.
CREATE OR REPLACE FUNCTION trackd.drop_history_partitions_before(p_before timestamptz)
RETURNS int
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET timezone = 'UTC'
AS $fn$
DECLARE
  r         record;
  v_dropped int := 0;
BEGIN
  IF p_before IS NULL OR NOT isfinite(p_before) THEN
    RAISE EXCEPTION 'trackd.drop_history_partitions_before: p_before must be a finite timestamp, got %',
      quote_nullable(p_before)
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  PERFORM pg_advisory_xact_lock(hashtext('trackd.vehicle_telemetry_history partitions'));
  FOR r IN
    SELECT p.partition_name, p.range_from, p.range_to
      FROM trackd.history_partitions() p
     WHERE NOT p.is_default AND p.range_to <= p_before
     ORDER BY p.range_from
  LOOP
    EXECUTE format('DROP TABLE trackd.%I', r.partition_name);
    RAISE NOTICE 'trackd.drop_history_partitions_before: dropped % [%, %)', r.partition_name, r.range_from, r.range_to;
    v_dropped := v_dropped + 1;
  END LOOP;
  RETURN v_dropped;
END
$fn$;
COMMENT ON FUNCTION trackd.drop_history_partitions_before(timestamptz) IS
  'Drops the partitions of trackd.vehicle_telemetry_history whose upper bound is <= p_before (never DEFAULT). Returns the number dropped.';

-- Functions are executable by PUBLIC by default; only the roles that need them keep access.
REVOKE ALL ON FUNCTION trackd.history_partitions() FROM PUBLIC;
REVOKE ALL ON FUNCTION trackd.create_history_partitions(timestamptz, timestamptz, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION trackd.drop_history_partitions_before(timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION trackd.history_partitions() TO trackd_ingest, trackd_api, trackd_readonly;
GRANT EXECUTE ON FUNCTION trackd.create_history_partitions(timestamptz, timestamptz, text) TO trackd_ingest;

GRANT SELECT, INSERT ON trackd.vehicle_telemetry_history, trackd.vehicle_telemetry_history_default
  TO trackd_ingest;
GRANT SELECT ON trackd.vehicle_telemetry_history, trackd.vehicle_telemetry_history_default
  TO trackd_api, trackd_readonly;

-- Partitions for yesterday to a week ahead, so a fresh install ingests into real partitions at
-- once; trackd keeps creating them ahead of time from then on.
SELECT trackd.create_history_partitions(now() - interval '1 day', now() + interval '7 days', 'day')
  AS partitions_created;

INSERT INTO trackd.schema_migrations (version, name) VALUES (2, 'history')
ON CONFLICT (version) DO NOTHING;
