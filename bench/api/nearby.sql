-- GET /v1/vehicles/nearby?lon=...&lat=...&radius_m=5000&limit=10 (server/http/vehicle_service.cpp):
-- candidates from the geometry GiST through the box that holds the geodesic radius (trackd
-- computes it in nearby_box(); here the same formula for a northern latitude), then ST_DWithin.
\set lon 5.0 + random(0, 10000000) / 1000000.0
\set lat 45.0 + random(0, 10000000) / 1000000.0
WITH p AS (SELECT ST_SetSRID(ST_MakePoint(:lon, :lat), 4326)::geography AS g) SELECT vehicle_id, (extract(epoch FROM last_updated) * 1000000)::int8, ST_X(geom), ST_Y(geom), ST_Z(geom), speed_kmh, heading_deg, accuracy_m, attributes::text, ST_Distance(v.geom::geography, p.g) AS distance_m FROM trackd.vehicle_current_state v, p WHERE v.geom && ST_MakeEnvelope(:lon - 5000 / (6378137 * cos(radians(:lat + 0.0456707))) * 57.29577951308232 * 1.01, :lat - 0.0456707, :lon + 5000 / (6378137 * cos(radians(:lat + 0.0456707))) * 57.29577951308232 * 1.01, :lat + 0.0456707, 4326) AND ST_DWithin(v.geom::geography, p.g, 5000) ORDER BY distance_m, vehicle_id LIMIT 10;
