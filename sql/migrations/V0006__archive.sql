-- V0006: the Iceberg archive (docs/archive.md): the Iceberg JDBC catalog tables, the per-batch
-- commit log that the archive's progress marker is built on, the archive's progress as the
-- database sees it, and the retention guard.
--
-- Run by `trackd migrate`, or by hand:  psql -1 -v ON_ERROR_STOP=1 -f V0006__archive.sql
-- No BEGIN/COMMIT here: the runner wraps each file in one transaction (psql does with -1).
-- Safe to run twice.

-- The archiver's role: reads the history, stamps the batch log, commits to the catalog.
DO $roles$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'trackd_archive') THEN
    BEGIN
      CREATE ROLE trackd_archive NOLOGIN;
      COMMENT ON ROLE trackd_archive IS
        'trackd Iceberg archiver: reads history, stamps trackd.ingest_batches, commits to the Iceberg JDBC catalog.';
    EXCEPTION WHEN duplicate_object OR unique_violation THEN
      NULL; -- created concurrently by another migration run
    END;
  END IF;
END
$roles$;
GRANT USAGE ON SCHEMA trackd TO trackd_archive;
GRANT SELECT ON trackd.vehicle_telemetry_history, trackd.vehicle_telemetry_history_default,
  trackd.schema_migrations TO trackd_archive;

-- The Iceberg JDBC catalog, exactly as Apache Iceberg's JdbcCatalog creates it (schema V1, with
-- iceberg_type), so that Spark, Trino, Flink (JdbcCatalog) and PyIceberg (SqlCatalog) pointed at
-- this database see the archive table. In schema public because those clients use unqualified
-- names. An existing catalog (V0, without iceberg_type) is upgraded the way JdbcCatalog does it.
-- Commits are a compare-and-swap on metadata_location (see docs/archive.md).
CREATE TABLE IF NOT EXISTS public.iceberg_tables (
  catalog_name               varchar(255)  NOT NULL,
  table_namespace            varchar(255)  NOT NULL,
  table_name                 varchar(255)  NOT NULL,
  metadata_location          varchar(1000),
  previous_metadata_location varchar(1000),
  iceberg_type               varchar(5),
  PRIMARY KEY (catalog_name, table_namespace, table_name)
);
ALTER TABLE public.iceberg_tables ADD COLUMN IF NOT EXISTS iceberg_type varchar(5);
COMMENT ON TABLE public.iceberg_tables IS
  'Apache Iceberg JDBC catalog: the current metadata file of each table. trackd archives trackd.vehicle_telemetry_history here (docs/archive.md).';

CREATE TABLE IF NOT EXISTS public.iceberg_namespace_properties (
  catalog_name   varchar(255) NOT NULL,
  namespace      varchar(255) NOT NULL,
  property_key   varchar(255),
  property_value varchar(1000),
  PRIMARY KEY (catalog_name, namespace, property_key)
);
COMMENT ON TABLE public.iceberg_namespace_properties IS
  'Apache Iceberg JDBC catalog: namespaces and their properties.';

GRANT SELECT, INSERT, UPDATE, DELETE ON public.iceberg_tables, public.iceberg_namespace_properties
  TO trackd_archive;
GRANT SELECT ON public.iceberg_tables, public.iceberg_namespace_properties TO trackd_readonly;

-- One row per ingest transaction that wrote history rows, written in that transaction.
--
-- Why: ingest batches take their id from a sequence and several writers commit in parallel, so
-- batch ids do not commit in id order and "the highest archived batch id" would skip a batch that
-- commits later with a lower id. The archiver instead stamps committed batches with archive_seq
-- from its own sequence, under an advisory lock: a stamping transaction only sees committed rows,
-- and every later one draws larger numbers, so archive_seq is in commit order. The archive's
-- progress marker is "every batch with archive_seq <= N is in the table", with N in the Iceberg
-- snapshot summary and table properties.
CREATE TABLE IF NOT EXISTS trackd.ingest_batches (
  ingest_batch_id bigint      PRIMARY KEY,
  history_rows    bigint      NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now(),
  archive_seq     bigint
);
COMMENT ON TABLE trackd.ingest_batches IS
  'Commit log of ingest batches that wrote history rows (filled by a trigger on the history table); the Iceberg archive stamps each committed batch with archive_seq, in commit order.';
COMMENT ON COLUMN trackd.ingest_batches.history_rows IS 'History rows the batch wrote.';
COMMENT ON COLUMN trackd.ingest_batches.created_at IS 'Start of the ingest transaction.';
COMMENT ON COLUMN trackd.ingest_batches.archive_seq IS
  'Set by the archiver after the batch committed (NULL before); increases in commit order. Archived once archive_seq <= trackd.archive_progress.archived_seq.';
CREATE UNIQUE INDEX IF NOT EXISTS ingest_batches_archive_seq_key
  ON trackd.ingest_batches (archive_seq);
CREATE INDEX IF NOT EXISTS ingest_batches_unstamped_idx
  ON trackd.ingest_batches (ingest_batch_id) WHERE archive_seq IS NULL;

CREATE SEQUENCE IF NOT EXISTS trackd.archive_seq AS bigint;
COMMENT ON SEQUENCE trackd.archive_seq IS 'Commit-order stamps of trackd.ingest_batches.archive_seq.';

-- Filled by a statement-level trigger rather than by the ingest code, so that every writer of
-- the history (trackd's COPY, a DBA's backfill INSERT) is archived, and the ingest needs no
-- knowledge of the archive. The transition table holds exactly the rows of the statement.
CREATE OR REPLACE FUNCTION trackd.record_ingest_batches()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
  INSERT INTO trackd.ingest_batches AS b (ingest_batch_id, history_rows)
  SELECT n.ingest_batch_id, count(*) FROM new_rows n GROUP BY n.ingest_batch_id
  ON CONFLICT (ingest_batch_id) DO UPDATE SET history_rows = b.history_rows + EXCLUDED.history_rows;
  RETURN NULL;
END
$fn$;
COMMENT ON FUNCTION trackd.record_ingest_batches() IS
  'Trigger: records the ingest batches of the inserted history rows in trackd.ingest_batches.';
REVOKE ALL ON FUNCTION trackd.record_ingest_batches() FROM PUBLIC;

DROP TRIGGER IF EXISTS vehicle_telemetry_history_batches ON trackd.vehicle_telemetry_history;
CREATE TRIGGER vehicle_telemetry_history_batches
  AFTER INSERT ON trackd.vehicle_telemetry_history
  REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION trackd.record_ingest_batches();

-- History written before this migration is archived too.
INSERT INTO trackd.ingest_batches (ingest_batch_id, history_rows)
SELECT ingest_batch_id, count(*) FROM trackd.vehicle_telemetry_history GROUP BY ingest_batch_id
ON CONFLICT (ingest_batch_id) DO NOTHING;

GRANT SELECT, INSERT, UPDATE ON trackd.ingest_batches TO trackd_ingest;
GRANT EXECUTE ON FUNCTION trackd.record_ingest_batches() TO trackd_ingest;
GRANT SELECT, UPDATE, DELETE ON trackd.ingest_batches TO trackd_archive;
GRANT USAGE ON SEQUENCE trackd.archive_seq TO trackd_archive;
GRANT SELECT ON trackd.ingest_batches TO trackd_api, trackd_readonly;

-- What each archive table holds, as the database sees it: updated in the same transaction as the
-- catalog's compare-and-swap, so it is never ahead of the table. The table's own snapshot summary
-- and properties are the truth (the archiver resumes from them); this copy exists so that SQL
-- (the retention guard below, monitoring) can ask without reading Iceberg files.
CREATE TABLE IF NOT EXISTS trackd.archive_progress (
  catalog_name        text        NOT NULL,
  table_namespace     text        NOT NULL,
  table_name          text        NOT NULL,
  archived_seq        bigint      NOT NULL,
  max_ingest_batch_id bigint,
  snapshot_id         bigint,
  metadata_location   text        NOT NULL,
  updated_at          timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (catalog_name, table_namespace, table_name)
);
COMMENT ON TABLE trackd.archive_progress IS
  'Per Iceberg archive table: every batch of trackd.ingest_batches with archive_seq <= archived_seq is committed to it.';
GRANT SELECT, INSERT, UPDATE ON trackd.archive_progress TO trackd_archive;
GRANT SELECT ON trackd.archive_progress TO trackd_api, trackd_readonly;

-- Batches not yet in every registered archive table: NULL stamp, or a stamp above the lowest
-- archived_seq. Empty when no archive table is registered.
CREATE OR REPLACE FUNCTION trackd.unarchived_batches()
RETURNS TABLE (ingest_batch_id bigint)
LANGUAGE sql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
  SELECT b.ingest_batch_id
    FROM trackd.ingest_batches b
   WHERE EXISTS (SELECT 1 FROM trackd.archive_progress)
     AND (b.archive_seq IS NULL
          OR b.archive_seq > (SELECT min(p.archived_seq) FROM trackd.archive_progress p))
$fn$;
COMMENT ON FUNCTION trackd.unarchived_batches() IS
  'Ingest batches not yet committed to every Iceberg archive table (none while no archive exists).';
REVOKE ALL ON FUNCTION trackd.unarchived_batches() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION trackd.unarchived_batches() TO trackd_archive, trackd_api, trackd_readonly;

-- The retention guard: the function of V0002, now keeping every partition that holds a row the
-- archive has not committed yet (once an archive exists). The parent is locked before the check:
-- dropping a partition needs that lock anyway, and holding it first means no ingest transaction
-- can add rows to a partition between the check and the drop.
CREATE OR REPLACE FUNCTION trackd.drop_history_partitions_before(p_before timestamptz)
RETURNS int
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET timezone = 'UTC'
AS $fn$
DECLARE
  r            record;
  v_dropped    int := 0;
  v_lo         bigint;
  v_hi         bigint;
  v_ids        bigint[];
  v_unarchived bigint;
BEGIN
  IF p_before IS NULL OR NOT isfinite(p_before) THEN
    RAISE EXCEPTION 'trackd.drop_history_partitions_before: p_before must be a finite timestamp, got %',
      quote_nullable(p_before)
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  -- Called after archive commits: most calls find nothing old enough, and must then not take
  -- the table lock, which would stall ingest and the API for nothing.
  IF NOT EXISTS (SELECT 1 FROM trackd.history_partitions() p
                  WHERE NOT p.is_default AND p.range_to <= p_before) THEN
    RETURN 0;
  END IF;
  PERFORM pg_advisory_xact_lock(hashtext('trackd.vehicle_telemetry_history partitions'));
  LOCK TABLE trackd.vehicle_telemetry_history IN ACCESS EXCLUSIVE MODE;
  SELECT array_agg(u.ingest_batch_id), min(u.ingest_batch_id), max(u.ingest_batch_id)
    INTO v_ids, v_lo, v_hi
    FROM trackd.unarchived_batches() u;
  FOR r IN
    SELECT p.partition_name, p.range_from, p.range_to
      FROM trackd.history_partitions() p
     WHERE NOT p.is_default AND p.range_to <= p_before
     ORDER BY p.range_from
  LOOP
    v_unarchived := 0;
    IF v_ids IS NOT NULL THEN
      -- The range lets the BRIN index on ingest_batch_id skip most of the partition.
      EXECUTE format('SELECT count(*) FROM trackd.%I WHERE ingest_batch_id BETWEEN $1 AND $2'
                     ' AND ingest_batch_id = ANY ($3)', r.partition_name)
        INTO v_unarchived USING v_lo, v_hi, v_ids;
    END IF;
    IF v_unarchived > 0 THEN
      RAISE NOTICE 'trackd.drop_history_partitions_before: kept % [%, %): % rows not yet archived',
        r.partition_name, r.range_from, r.range_to, v_unarchived;
      CONTINUE;
    END IF;
    EXECUTE format('DROP TABLE trackd.%I', r.partition_name);
    RAISE NOTICE 'trackd.drop_history_partitions_before: dropped % [%, %)', r.partition_name, r.range_from, r.range_to;
    v_dropped := v_dropped + 1;
  END LOOP;
  RETURN v_dropped;
END
$fn$;
COMMENT ON FUNCTION trackd.drop_history_partitions_before(timestamptz) IS
  'Drops the partitions of trackd.vehicle_telemetry_history whose upper bound is <= p_before (never DEFAULT), except those holding rows not yet committed to the Iceberg archive. Returns the number dropped.';
REVOKE ALL ON FUNCTION trackd.drop_history_partitions_before(timestamptz) FROM PUBLIC;

INSERT INTO trackd.schema_migrations (version, name) VALUES (6, 'archive')
ON CONFLICT (version) DO NOTHING;
