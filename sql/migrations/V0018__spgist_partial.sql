-- V0018: the SP-GiST indexes on PostGIS geometry become partial (WHERE <column> IS NOT NULL), so
-- that PostgreSQL never reads them in an index-only scan (docs/operations.md, "PostgreSQL and
-- PostGIS versions").
--
-- PostGIS's SP-GiST operator classes keep a box per row, not the geometry, and say so (they
-- cannot return data). PostgreSQL 15 still plans an index-only scan on such an index for a query
-- that needs no column of the table, such as SELECT count(*) FROM a history partition once
-- VACUUM has marked its pages all-visible: the index is the smallest thing to read. It then
-- makes a geometry of each box, and the backend allocates gigabytes or dies of a segmentation
-- fault, which restarts every session of the server. The planner considers a partial index only
-- for a query that implies its predicate. Every && on the column, and so ST_Intersects and
-- ST_DWithin, implies IS NOT NULL (the operators are strict); a bare count(*) does not. geom is
-- NOT NULL and cell_corner is made from it, so the predicate leaves no row out.
--
-- Each existing index is built again here, under the same name, in this transaction: its table
-- takes no writes until COMMIT (reads go on), about 3 s per million rows on two cores.
--
-- Run by `trackd migrate`, or by hand:  psql -1 -v ON_ERROR_STOP=1 -f V0018__spgist_partial.sql
-- No BEGIN/COMMIT here: the runner wraps each file in one transaction (psql does with -1).
-- Safe to run twice.

CREATE OR REPLACE FUNCTION trackd.history_hot_indexes()
RETURNS TABLE (suffix text, definition text)
LANGUAGE sql
IMMUTABLE
AS $fn$
  VALUES ('_time_brin', 'USING brin (recorded_at) WITH (pages_per_range = 4)'),
         ('_geom_spgist', 'USING spgist (geom) WHERE geom IS NOT NULL'),
         ('_vehicle_hash', 'USING hash (vehicle_id)')
$fn$;

CREATE OR REPLACE FUNCTION trackd.history_closed_indexes()
RETURNS TABLE (suffix text, definition text)
LANGUAGE sql
IMMUTABLE
AS $fn$
  VALUES ('_geom_spgist', 'USING spgist (geom) WHERE geom IS NOT NULL'),
         ('_vehicle_time_idx', '(vehicle_id, recorded_at DESC)')
$fn$;

DO $partial$
DECLARE
  r record;
BEGIN
  FOR r IN
    SELECT i.relname AS index_name, t.relname AS table_name, a.attname AS column_name
      FROM pg_catalog.pg_index x
      JOIN pg_catalog.pg_class i ON i.oid = x.indexrelid
      JOIN pg_catalog.pg_am am ON am.oid = i.relam
      JOIN pg_catalog.pg_class t ON t.oid = x.indrelid
      JOIN pg_catalog.pg_attribute a ON a.attrelid = t.oid AND a.attnum = x.indkey[0]
     WHERE am.amname = 'spgist'
       AND t.relnamespace = 'trackd'::regnamespace
       AND x.indpred IS NULL
       AND x.indnkeyatts = 1
       AND a.atttypid = 'geometry'::regtype
     ORDER BY 1
  LOOP
    EXECUTE format('DROP INDEX trackd.%I', r.index_name);
    EXECUTE format('CREATE INDEX %I ON trackd.%I USING spgist (%I) WHERE %I IS NOT NULL',
                   r.index_name, r.table_name, r.column_name, r.column_name);
  END LOOP;
END
$partial$;

INSERT INTO trackd.schema_migrations (version, name) VALUES (18, 'spgist_partial')
ON CONFLICT (version) DO NOTHING;
