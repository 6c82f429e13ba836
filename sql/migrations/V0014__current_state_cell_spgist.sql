-- V0014: the current state's grid cells are indexed with SP-GiST instead of GiST
-- (measurements in docs/benchmarks.md "New vehicles: COPY straight in, and SP-GiST on the cells").
--
-- Every vehicle seen for the first time inserts an entry into the index on `cell` (V0011), and
-- so does every update that moves a vehicle into another cell. A GiST insert weighs every entry
-- of each node on its way down and splits pages; an SP-GiST insert follows one quadrant path.
-- On a million new vehicles the SP-GiST cost about 3 µs a row less than the GiST (about a fifth
-- of the current state's insert), and the API's statements on the current state (`cell && box`:
-- bbox, nearby, inside a geofence, tiles, the OGC `vehicles` collection) answer as fast. V0013
-- made the same change on the history partitions.
--
-- What it changes for users: the current state has no GiST at all any more, so
--   - nearest-neighbour ordering (`ORDER BY cell <-> point`) is not served by an index: PostGIS
--     3.3's SP-GiST operator class has no `<->`. trackd's nearby endpoint does not order through
--     the index (it filters by a box, then sorts by distance);
--   - ST_EstimatedExtent reads the extent off the column's statistics instead of the GiST's
--     root page (ANALYZE, which autovacuum runs, keeps it current).
--
-- Run by `trackd migrate`, or by hand:  psql -1 -v ON_ERROR_STOP=1 -f V0014__current_state_cell_spgist.sql
-- No BEGIN/COMMIT here: the runner wraps each file in one transaction (psql does with -1).
-- Safe to run twice. Building the index holds off writes to the current state (reads go on):
-- 4.1 s for a million vehicles on a busy 2-core machine. To build it without that pause, run
-- beforehand, outside a transaction:
--   CREATE INDEX CONCURRENTLY vehicle_current_state_cell_spgist
--     ON trackd.vehicle_current_state USING spgist (cell);
-- A build of that kind that was cut off leaves an invalid index, which this file rebuilds.

DO $invalid$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_catalog.pg_index x
              WHERE x.indexrelid = to_regclass('trackd.vehicle_current_state_cell_spgist')
                AND NOT (x.indisvalid AND x.indisready)) THEN
    DROP INDEX trackd.vehicle_current_state_cell_spgist;
  END IF;
END
$invalid$;

CREATE INDEX IF NOT EXISTS vehicle_current_state_cell_spgist
  ON trackd.vehicle_current_state USING spgist (cell);
DROP INDEX IF EXISTS trackd.vehicle_current_state_cell_gist;

COMMENT ON COLUMN trackd.vehicle_current_state.cell IS
  'The 1/128 degree grid cell holding geom (generated). Its SP-GiST finds vehicles by area: filter on `cell && box` beside `geom && box`. geom itself has no index, so that an update inside the same cell writes no index entry (a HOT update).';

INSERT INTO trackd.schema_migrations (version, name) VALUES (14, 'current_state_cell_spgist')
ON CONFLICT (version) DO NOTHING;
