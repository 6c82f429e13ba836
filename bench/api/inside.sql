-- GET /v1/geofences/{zone}/vehicles?state=inside&limit=100 (server/http/geofence_service.cpp).
\set zone random(1, 100)
SELECT vehicle_id, last_updated, geom, speed_kmh, heading_deg, accuracy_m, attributes::text FROM trackd.vehicle_current_state v JOIN trackd.geofence_zones z ON z.zone_name = 'zone-' || lpad(:zone::text, 3, '0') AND ST_Covers(z.fence_geom, v.geom) AND v.cell_corner && trackd.cell_corners_for(z.fence_geom) ORDER BY v.vehicle_id LIMIT 101;
