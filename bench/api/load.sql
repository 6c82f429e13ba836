-- Benchmark data for bench/api/run.sh: 100,000 vehicles in current state spread uniformly over
-- lon 5..15, lat 45..55 (about 1,000 per square degree), and 100 geofences: circles of 2..20 km
-- radius at random places in the same region, as MultiPolygons. setseed() makes it the same
-- data on every run.
SELECT setseed(0.42);
INSERT INTO trackd.vehicle_current_state (vehicle_id, last_updated, geom, speed_kmh, heading_deg,
  accuracy_m, attributes, ingest_batch_id, kafka_partition, kafka_offset)
SELECT 'veh-' || lpad(i::text, 6, '0'),
       now() - random() * interval '1 hour',
       ST_SetSRID(ST_MakePoint(5 + random() * 10, 45 + random() * 10, random() * 500), 4326),
       random() * 120, random() * 359, 3 + random() * 10, '{"fleet":"bench"}', 1, 0, i
FROM generate_series(1, 100000) i;
INSERT INTO trackd.geofence_zones (zone_name, fence_geom)
SELECT 'zone-' || lpad(i::text, 3, '0'),
       ST_Multi(ST_Buffer(ST_SetSRID(ST_MakePoint(5.5 + random() * 9, 45.5 + random() * 9), 4326)::geography,
                          2000 + random() * 18000, 16)::geometry)
FROM generate_series(1, 100) i;
ANALYZE trackd.vehicle_current_state;
ANALYZE trackd.geofence_zones;
