-- GET /tiles/vehicles/{z}/{x}/{y}.mvt for a random tile of the data's region (bench/tiles/run.sh
-- sets TILE_Z and the tile ranges TILE_X0..TILE_X1, TILE_Y0..TILE_Y1, as pgbench gets them).
dofile(os.getenv("BENCH_DIR") .. "/../api/common.lua")
local z = tonumber(os.getenv("TILE_Z"))
local x0, x1 = tonumber(os.getenv("TILE_X0")), tonumber(os.getenv("TILE_X1"))
local y0, y1 = tonumber(os.getenv("TILE_Y0")), tonumber(os.getenv("TILE_Y1"))
function request()
  return wrk.format("GET", string.format("/tiles/vehicles/%d/%d/%d.mvt", z,
                                         math.random(x0, x1), math.random(y0, y1)))
end
