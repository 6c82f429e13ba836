-- GET /v1/vehicles?bbox=...&limit=100: the statement server/http/vehicle_service.cpp prepares.
\set lon0 5.0 + random(0, 9900000) / 1000000.0
\set lat0 45.0 + random(0, 9900000) / 1000000.0
\set lon1 :lon0 + 0.1
\set lat1 :lat0 + 0.1
SELECT vehicle_id, last_updated, geom, speed_kmh, heading_deg, accuracy_m, attributes::text FROM trackd.vehicle_current_state WHERE true AND cell_corner && trackd.cell_corners_for(ST_MakeEnvelope(:lon0, :lat0, :lon1, :lat1, 4326)) AND geom && ST_MakeEnvelope(:lon0, :lat0, :lon1, :lat1, 4326) ORDER BY vehicle_id LIMIT 101;
