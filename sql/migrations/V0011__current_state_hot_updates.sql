-- V0011: current-state updates become HOT (heap-only tuple) updates, which write no index entry
-- (measurements in docs/benchmarks.md "Current state: HOT updates").
--
-- Every update of trackd.vehicle_current_state moves geom and last_updated. Both were indexed
-- (a GiST and a btree), so PostgreSQL could never update a row in place: each update wrote a
-- new entry into all three indexes, the primary key's too. On a live stream, where every
-- message is an update, that was half of the database's work per message.
--   cell   a generated column: the 1/128 degree grid cell (about 870 m north-south) holding
--          geom, as a polygon. Its GiST replaces the GiST on geom. A vehicle stays in its cell
--          for most updates (at 50 km/h it crosses one in about 40 s), and then the update
--          changes no indexed column. Every query that filters on `geom && <box>` adds
--          `cell && <box>`, which the GiST answers and which holds whenever the first does,
--          because geom lies in its cell. Multiplying and dividing by 128 is exact in floating
--          point, so the cell's edges never fall on the wrong side of the point.
--   last_updated loses its btree: "updated since" filters scan the table (one row per vehicle).
--   fillfactor 50: room on each page for the new versions of its rows, which a HOT update
--          must find on the row's own page.
--
-- Run by `trackd migrate`, or by hand:  psql -1 -v ON_ERROR_STOP=1 -f V0011__current_state_hot_updates.sql
-- No BEGIN/COMMIT here: the runner wraps each file in one transaction (psql does with -1).
-- Safe to run twice. Adding the stored column rewrites the table (one row per vehicle, so
-- seconds at most); the ingest's writes wait meanwhile.

-- The grid cell of a point: the 1/128 degree box whose lower-left corner is at or below it.
CREATE OR REPLACE FUNCTION trackd.position_cell(p_geom geometry)
RETURNS geometry
LANGUAGE sql
IMMUTABLE STRICT PARALLEL SAFE
AS $fn$
  SELECT ST_MakeEnvelope(floor(ST_X(p_geom) * 128) / 128, floor(ST_Y(p_geom) * 128) / 128,
                         (floor(ST_X(p_geom) * 128) + 1) / 128,
                         (floor(ST_Y(p_geom) * 128) + 1) / 128, ST_SRID(p_geom))
$fn$;
COMMENT ON FUNCTION trackd.position_cell(geometry) IS
  'The 1/128 degree grid cell (a box) that holds a point: trackd.vehicle_current_state.cell.';

-- Before the rewrite below, so that the rewritten pages already leave the room.
ALTER TABLE trackd.vehicle_current_state SET (fillfactor = 50);

ALTER TABLE trackd.vehicle_current_state
  ADD COLUMN IF NOT EXISTS cell geometry(Polygon, 4326)
  GENERATED ALWAYS AS (trackd.position_cell(geom)) STORED;
COMMENT ON COLUMN trackd.vehicle_current_state.cell IS
  'The 1/128 degree grid cell holding geom (generated). Its GiST finds vehicles by area: filter on `cell && box` beside `geom && box`. geom itself has no index, so that an update inside the same cell writes no index entry (a HOT update).';

CREATE INDEX IF NOT EXISTS vehicle_current_state_cell_gist
  ON trackd.vehicle_current_state USING gist (cell);
DROP INDEX IF EXISTS trackd.vehicle_current_state_geom_gist;
DROP INDEX IF EXISTS trackd.vehicle_current_state_last_updated_idx;

INSERT INTO trackd.schema_migrations (version, name) VALUES (11, 'current_state_hot_updates')
ON CONFLICT (version) DO NOTHING;
