-- V0012: the archive's batch ledger (trackd.ingest_batches, V0006) is pruned once every archive
-- table holds a batch, so that it stops growing by one row per committed batch for ever (about
-- 350 MB a day for two writers on a quiet stream at batch.min_ms = 50, docs/operations.md).
--
-- Run by `trackd migrate`, or by hand:  psql -1 -v ON_ERROR_STOP=1 -f V0012__ingest_batches_pruning.sql
-- No BEGIN/COMMIT here: the runner wraps each file in one transaction (psql does with -1).
-- Safe to run twice.
--
-- What a pruned row said is kept as a watermark, one row: the highest archive_seq and the
-- highest ingest_batch_id pruned, and how many batches and history rows that was. The audit
-- (check 3, "archive") compares trackd.archive_progress with the ledger and the watermark
-- together, so pruning does not hide a progress row that claims more than was ever stamped.
CREATE TABLE IF NOT EXISTS trackd.ingest_batches_pruned (
  one                 boolean     PRIMARY KEY DEFAULT true CHECK (one),
  pruned_seq          bigint      NOT NULL,
  max_ingest_batch_id bigint      NOT NULL,
  batches             bigint      NOT NULL,
  history_rows        bigint      NOT NULL,
  updated_at          timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE trackd.ingest_batches_pruned IS
  'What trackd.prune_ingest_batches() removed from trackd.ingest_batches (one row): every batch with archive_seq <= pruned_seq is gone from the ledger and was in every archive table when it went.';
COMMENT ON COLUMN trackd.ingest_batches_pruned.pruned_seq IS 'The highest archive_seq pruned.';
COMMENT ON COLUMN trackd.ingest_batches_pruned.max_ingest_batch_id IS 'The highest ingest_batch_id pruned.';
COMMENT ON COLUMN trackd.ingest_batches_pruned.batches IS 'Batches pruned, in all.';
COMMENT ON COLUMN trackd.ingest_batches_pruned.history_rows IS 'History rows of the batches pruned, in all.';
GRANT SELECT, INSERT, UPDATE ON trackd.ingest_batches_pruned TO trackd_archive;
GRANT SELECT ON trackd.ingest_batches_pruned TO trackd_api, trackd_readonly;

-- Deletes the ledger rows of batches every registered archive table holds (archive_seq at or
-- below the lowest archived_seq) and folds them into the watermark. Nothing while no archive
-- table is registered: a table registered later archives every batch still in the ledger.
-- Batches not stamped yet, or stamped above some table's progress, stay: the retention guard
-- (trackd.unarchived_batches) and the archiver read them. Called by the archiver's maintenance
-- (`trackd archive maintain`, archive.maintenance_interval_s) under its lock, or by hand.
CREATE OR REPLACE FUNCTION trackd.prune_ingest_batches()
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
  v_upto  bigint;
  v_n     bigint;
  v_seq   bigint;
  v_batch bigint;
  v_rows  bigint;
BEGIN
  -- One pruner at a time, and none while a table registers (it reads the lowest progress too).
  PERFORM pg_advisory_xact_lock(hashtextextended('trackd.ingest_batches prune', 0));
  SELECT min(p.archived_seq) INTO v_upto FROM trackd.archive_progress p;
  IF v_upto IS NULL THEN
    RETURN 0;
  END IF;
  WITH gone AS (
    DELETE FROM trackd.ingest_batches b
     WHERE b.archive_seq <= v_upto
    RETURNING b.archive_seq, b.ingest_batch_id, b.history_rows
  )
  SELECT count(*), max(g.archive_seq), max(g.ingest_batch_id), coalesce(sum(g.history_rows), 0)
    INTO v_n, v_seq, v_batch, v_rows
    FROM gone g;
  IF v_n > 0 THEN
    INSERT INTO trackd.ingest_batches_pruned AS w
           (one, pruned_seq, max_ingest_batch_id, batches, history_rows)
    VALUES (true, v_seq, v_batch, v_n, v_rows)
    ON CONFLICT (one) DO UPDATE
       SET pruned_seq = greatest(w.pruned_seq, EXCLUDED.pruned_seq),
           max_ingest_batch_id = greatest(w.max_ingest_batch_id, EXCLUDED.max_ingest_batch_id),
           batches = w.batches + EXCLUDED.batches,
           history_rows = w.history_rows + EXCLUDED.history_rows,
           updated_at = now();
  END IF;
  RETURN v_n;
END
$fn$;
COMMENT ON FUNCTION trackd.prune_ingest_batches() IS
  'Deletes from trackd.ingest_batches every batch all archive tables hold (archive_seq <= the lowest trackd.archive_progress.archived_seq), recording the highest stamp and batch id in trackd.ingest_batches_pruned. Returns the number of batches pruned.';
REVOKE ALL ON FUNCTION trackd.prune_ingest_batches() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION trackd.prune_ingest_batches() TO trackd_archive;

INSERT INTO trackd.schema_migrations (version, name) VALUES (12, 'ingest_batches_pruning')
ON CONFLICT (version) DO NOTHING;
