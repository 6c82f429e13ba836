-- GET /v1/vehicles/nearby?lon=...&lat=...&radius_m=5000&limit=10 (server/http/vehicle_service.cpp).
\set lon 5.0 + random(0, 10000000) / 1000000.0
\set lat 45.0 + random(0, 10000000) / 1000000.0
WITH p AS (SELECT ST_SetSRID(ST_MakePoint(:lon, :lat), 4326)::geography AS g) SELECT vehicle_id, (extract(epoch FROM last_updated) * 1000000)::int8, ST_X(geom), ST_Y(geom), ST_Z(geom), speed_kmh, heading_deg, accuracy_m, attributes::text, ST_Distance(v.geom::geography, p.g) AS distance_m FROM trackd.vehicle_current_state v, p WHERE ST_DWithin(v.geom::geography, p.g, 5000) ORDER BY distance_m, vehicle_id LIMIT 10;
