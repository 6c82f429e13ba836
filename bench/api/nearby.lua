-- GET /v1/vehicles/nearby within 5 km of a random point (see nearby.sql).
dofile(os.getenv("BENCH_DIR") .. "/common.lua")
function request()
  return wrk.format("GET", string.format("/v1/vehicles/nearby?lon=%.6f&lat=%.6f&radius_m=5000&limit=10",
                                         uniform(5, 15), uniform(45, 55)))
end
