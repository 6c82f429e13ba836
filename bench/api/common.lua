-- Shared by the wrk scripts of bench/api/run.sh: the bearer token, and a per-thread seed so that
-- the two wrk threads do not send the same sequence.
local counter = 0
function setup(thread)
  counter = counter + 1
  thread:set("seed", counter)
end
function init(args)
  math.randomseed(seed * 7919)
  wrk.headers["Authorization"] = "Bearer " .. os.getenv("BENCH_TOKEN")
end
function uniform(lo, hi) return lo + math.random() * (hi - lo) end
