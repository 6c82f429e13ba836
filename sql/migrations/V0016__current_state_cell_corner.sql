-- V0016: the current state's grid cell is stored as the cell's south-west corner, a point,
-- instead of the cell's box (measurements in docs/benchmarks.md "Current state: the cell as
-- its corner").
--
-- V0011's `cell` is a polygon of five vertices: about 120 of a row's 250 bytes. Every version
-- of a row carries it, so it is written to the heap and to the WAL on every update, HOT or not,
-- and it is computed (ST_MakeEnvelope) for the insert an upsert tries as well as for the update.
-- The corner (ST_MakePoint) is 32 bytes and holds the same information: a point at (x, y) lies
-- in the cell whose corner is (floor(x*128)/128, floor(y*128)/128), so x - 1/128 < corner <= x.
-- Rows shrink from ~253 to ~165 bytes; on one connection (by hand, 20,000 vehicles) 500,000 new
-- vehicles went in 12-22% faster and 40 rounds of in-cell updates of every vehicle 11% faster.
--
-- Finding vehicles in a box B by their cells: `cell_corner && trackd.cell_corners_for(B)`
-- beside `geom && B`. cell_corners_for widens B by one cell to the south and west (the
-- corners of every cell that reaches into B). trackd's statements (bbox, nearby, inside a
-- geofence, tiles, the OGC `vehicles` collection) do that. The column has a new name, so a
-- hand-written query that filters on V0011's `cell` fails with "column does not exist" instead
-- of missing the vehicles whose corner lies outside B.
--
-- Run by `trackd migrate`, or by hand:  psql -1 -v ON_ERROR_STOP=1 -f V0016__current_state_cell_corner.sql
-- No BEGIN/COMMIT here: the runner wraps each file in one transaction (psql does with -1).
-- Safe to run twice. It rewrites the current state and builds the new column's index, holding
-- off readers and writers of the table meanwhile (by hand: about 4 s for a million vehicles on
-- a 2-core machine).

CREATE OR REPLACE FUNCTION trackd.cell_corner(p_geom geometry)
RETURNS geometry
LANGUAGE sql
IMMUTABLE STRICT PARALLEL SAFE
AS $fn$
  SELECT ST_SetSRID(ST_MakePoint(floor(ST_X(p_geom) * 128) / 128, floor(ST_Y(p_geom) * 128) / 128),
                    ST_SRID(p_geom))
$fn$;
COMMENT ON FUNCTION trackd.cell_corner(geometry) IS
  'The south-west corner of the 1/128 degree grid cell that holds a point: trackd.vehicle_current_state.cell_corner.';

-- One cell (1/128 degree) wider to the south and west, and 1e-4 degree more: PostGIS compares
-- boxes in single precision, rounded outwards, so `geom && box` also holds for a point up to
-- two single-precision steps (2^-15 degree at 180) outside the box, whose corner is then up to
-- that much farther south or west. Written with one use of p_box (the box grown by half a cell
-- and a little on every side, then moved half a cell south-west) so that PostgreSQL inlines it
-- into a prepared statement whatever the argument: called as a function, it cost a bbox query
-- on the current state 40% of its rate. The nanodegree keeps the north and east edges at or
-- beyond the box's after the rounding of the two steps.
CREATE OR REPLACE FUNCTION trackd.cell_corners_for(p_box geometry)
RETURNS geometry
LANGUAGE sql
IMMUTABLE STRICT PARALLEL SAFE
AS $fn$
  SELECT ST_Translate(ST_Expand(p_box, 1.0 / 256 + 5e-5 + 1e-9), -(1.0 / 256 + 5e-5),
                      -(1.0 / 256 + 5e-5))
$fn$;
COMMENT ON FUNCTION trackd.cell_corners_for(geometry) IS
  'The box that holds the corners (trackd.cell_corner) of every grid cell reaching into the bounding box of a geometry: find vehicles in B with `cell_corner && trackd.cell_corners_for(B) AND geom && B`.';

-- One rewrite: the old column goes (with its SP-GiST), the new one is computed for every row.
-- The rewrite keeps V0015's fillfactor.
DO $corner$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute
                  WHERE attrelid = 'trackd.vehicle_current_state'::regclass
                    AND attname = 'cell_corner' AND NOT attisdropped) THEN
    ALTER TABLE trackd.vehicle_current_state
      DROP COLUMN IF EXISTS cell,
      ADD COLUMN cell_corner geometry(Point, 4326)
        GENERATED ALWAYS AS (trackd.cell_corner(geom)) STORED;
  END IF;
END
$corner$;
COMMENT ON COLUMN trackd.vehicle_current_state.cell_corner IS
  'The south-west corner of the 1/128 degree grid cell holding geom (generated). Its SP-GiST finds vehicles by area: filter on `cell_corner && trackd.cell_corners_for(box)` beside `geom && box`. geom itself has no index, so that an update inside the same cell writes no index entry (a HOT update).';

CREATE INDEX IF NOT EXISTS vehicle_current_state_cell_corner_spgist
  ON trackd.vehicle_current_state USING spgist (cell_corner);

INSERT INTO trackd.schema_migrations (version, name) VALUES (16, 'current_state_cell_corner')
ON CONFLICT (version) DO NOTHING;
