-- V0001: the trackd schema, its roles and the migration bookkeeping table.
--
-- Run by `trackd migrate`, or by hand:  psql -1 -v ON_ERROR_STOP=1 -f V0001__create_schema.sql
-- No BEGIN/COMMIT here: the runner wraps each file in one transaction (psql does with -1).
-- Safe to run twice: every statement is IF NOT EXISTS or otherwise idempotent.

-- PostGIS provides the geometry type of every spatial column. Creating it needs a superuser
-- the first time; where the migration role is not one, a DBA runs this line beforehand and the
-- IF NOT EXISTS makes it a no-op here.
CREATE EXTENSION IF NOT EXISTS postgis;

CREATE SCHEMA IF NOT EXISTS trackd;
COMMENT ON SCHEMA trackd IS
  'trackd telemetry ingestion: vehicle position history, current state, geofences, delivery bookkeeping.';

-- Least privilege: nobody reaches the schema unless granted one of the roles below.
REVOKE ALL ON SCHEMA trackd FROM PUBLIC;

-- Roles are cluster-wide, so a second database on the same server finds them already there.
-- NOLOGIN group roles: grant them to login roles, e.g. GRANT trackd_ingest TO trackd_app;
-- Commented only when created here: COMMENT ON ROLE needs CREATEROLE, which a migration role
-- that finds the roles already present does not need otherwise. The exception handler covers
-- two databases being migrated at the same time.
DO $roles$
DECLARE
  r record;
BEGIN
  FOR r IN
    SELECT * FROM (VALUES
      ('trackd_ingest',   'trackd ingest pipeline: writes history, current state, dead letters, offsets.'),
      ('trackd_api',      'trackd HTTP API: reads positions, maintains geofences.'),
      ('trackd_readonly', 'Read-only access to trackd data for QGIS users and analysts.')
    ) AS t(name, note)
  LOOP
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = r.name) THEN
      BEGIN
        EXECUTE format('CREATE ROLE %I NOLOGIN', r.name);
        EXECUTE format('COMMENT ON ROLE %I IS %L', r.name, r.note);
      EXCEPTION WHEN duplicate_object OR unique_violation THEN
        NULL; -- created concurrently by another migration run
      END;
    END IF;
  END LOOP;
END
$roles$;

GRANT USAGE ON SCHEMA trackd TO trackd_ingest, trackd_api, trackd_readonly;

CREATE TABLE IF NOT EXISTS trackd.schema_migrations (
  version    int         PRIMARY KEY,
  name       text        NOT NULL,
  checksum   text,
  applied_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE trackd.schema_migrations IS
  'Applied migrations (sql/migrations/VNNNN__name.sql). Each file records itself; `trackd migrate` also stores the file checksum. `trackd run` refuses a schema older or newer than it knows.';
COMMENT ON COLUMN trackd.schema_migrations.checksum IS
  'Checksum of the migration file as applied by `trackd migrate`; NULL when applied by hand with psql.';

-- Every trackd process checks the schema version at start.
GRANT SELECT ON trackd.schema_migrations TO trackd_ingest, trackd_api, trackd_readonly;

INSERT INTO trackd.schema_migrations (version, name) VALUES (1, 'create_schema')
ON CONFLICT (version) DO NOTHING;
