-- GET /v1/vehicles with a 0.1° x 0.1° box somewhere in the data's region (see bbox.sql).
dofile(os.getenv("BENCH_DIR") .. "/common.lua")
function request()
  local lon, lat = uniform(5, 14.9), uniform(45, 54.9)
  return wrk.format("GET", string.format("/v1/vehicles?bbox=%.6f,%.6f,%.6f,%.6f&limit=100",
                                         lon, lat, lon + 0.1, lat + 0.1))
end
