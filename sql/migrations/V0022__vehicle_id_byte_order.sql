-- V0022: vehicle ids compare byte by byte (COLLATE "C") in the history, the current state and
-- the geofence tables (measurements in docs/benchmarks.md, "Vehicle ids in byte order").
--
-- Every history row descends the btree on (vehicle_id, recorded_at DESC), every current-state
-- write the primary key on vehicle_id. Under the database's collation each comparison on the
-- way down is a strcoll() of two copied strings (PostgreSQL 15 takes the fast path only for the
-- "C" and "POSIX" collations, not for C.UTF-8 or en_US.UTF-8). In byte order it is a memcmp().
-- The ids are machine identifiers (a registration, a device id) that nobody sorts as words, and
-- trackd already sorts each batch's rows and locks the current state's rows in byte order.
--
-- What users see:
-- - `vehicle_id = '...'`, joins with tables whose ids use the database's collation, and every
--   index on vehicle_id work as before (the database's default collation gives way to "C").
-- - `ORDER BY vehicle_id` (the API's vehicle lists and their cursors, a DBA's query) sorts by
--   bytes: the same as before under C.UTF-8; under a language's collation, upper case before
--   lower case and no more ignoring of punctuation.
-- - A join with a column of another explicit collation (not the default) needs a COLLATE.
--
-- Run by `trackd migrate`, or by hand:  psql -1 -v ON_ERROR_STOP=1 -f V0022__vehicle_id_byte_order.sql
-- No BEGIN/COMMIT here: the runner wraps each file in one transaction (psql does with -1).
-- Safe to run twice: a column already in byte order is left alone.
--
-- The table data is not rewritten (same type, same bytes), but every index on vehicle_id is
-- rebuilt, on every history partition, holding off readers and writers of these tables
-- meanwhile. By hand on a busy 2-core machine: 1.5 s for a million history rows and a million
-- vehicles together. On a large history, run it in a quiet hour, or stop ingest while it runs.

DO $collate$
DECLARE
  t record;
BEGIN
  FOR t IN
    SELECT c.relname
      FROM pg_attribute a
      JOIN pg_class c ON c.oid = a.attrelid
      JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = 'trackd'
       AND c.relname IN ('vehicle_telemetry_history', 'vehicle_current_state', 'geofence_events',
                         'geofence_vehicle_state')
       AND a.attname = 'vehicle_id'
       AND a.attcollation <> 'pg_catalog."C"'::regcollation
  LOOP
    -- On the partitioned history this alters every partition, the DEFAULT one included, and
    -- partitions made later copy the column (CREATE TABLE ... LIKE, then ATTACH).
    EXECUTE format('ALTER TABLE trackd.%I ALTER COLUMN vehicle_id TYPE text COLLATE "C"', t.relname);
  END LOOP;
END
$collate$;

INSERT INTO trackd.schema_migrations (version, name) VALUES (22, 'vehicle_id_byte_order')
ON CONFLICT (version) DO NOTHING;
