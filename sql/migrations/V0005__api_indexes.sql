-- V0005: what the HTTP API needs beyond the tables: a geography index for "vehicles near a point".
--
-- Run by `trackd migrate`, or by hand:  psql -1 -v ON_ERROR_STOP=1 -f V0005__api_indexes.sql
-- No BEGIN/COMMIT here: the runner wraps each file in one transaction (psql does with -1).
-- Safe to run twice.

-- GET /v1/vehicles/nearby filters with ST_DWithin(geom::geography, point, radius_m) so that the
-- radius and the reported distance are geodesic metres (on the WGS 84 spheroid) anywhere on
-- Earth. The GiST index on geom (planar degrees) cannot answer a geography predicate; this
-- expression index can. Only the current state gets one: it holds one row per vehicle, so the
-- cost on ingest's upsert is small, and the history has no endpoint that searches by distance.
CREATE INDEX IF NOT EXISTS vehicle_current_state_geog_gist
  ON trackd.vehicle_current_state USING gist ((geom::geography));
COMMENT ON INDEX trackd.vehicle_current_state_geog_gist IS
  'Geodesic (geography) index for the API''s nearby query: ST_DWithin(geom::geography, ..., radius_m).';

-- trackd_api already reads the current state and history and maintains the geofences (V0003);
-- an index needs no grant. The API also reads the schema version for /readyz (V0001).

INSERT INTO trackd.schema_migrations (version, name) VALUES (5, 'api_indexes')
ON CONFLICT (version) DO NOTHING;
