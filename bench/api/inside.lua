-- GET /v1/geofences/zone-NNN/vehicles?state=inside for a random one of the 100 zones (see inside.sql).
dofile(os.getenv("BENCH_DIR") .. "/common.lua")
function request()
  return wrk.format("GET", string.format("/v1/geofences/zone-%03d/vehicles?state=inside&limit=100",
                                         math.random(1, 100)))
end
