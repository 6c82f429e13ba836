#!/usr/bin/env bash
# Vector tiles benchmark: GET /tiles/vehicles/{z}/{x}/{y}.mvt against the same ST_AsMVT statement
# run straight in PostgreSQL by pgbench, at 100,000 vehicles, zooms 6, 10 and 14, side by side in
# one run.
#
#   bash bench/tiles/run.sh        # needs a release build
#
# Loads bench/api/load.sql (100,000 vehicles uniformly over lon 5..15, lat 45..55) into a fresh
# database, starts `trackd run` with the API, then per zoom: wrk with random tiles of the region
# (bench/tiles/tile.lua), and pgbench with the statement trackd prepares for them
# (bench/tiles/vehicles.sql; pg_stat_statements must see the same text), same tile distribution. Prints
# tiles/s and latency percentiles of both and their ratio, and appends them to bench/RESULTS.md.
# BENCH_UNDER_INGEST=1 runs the simulated fleet into trackd meanwhile (BENCH_FLEET_RATE
# positions/s, default 20000). Knobs: BENCH_SECONDS (8), BENCH_CONNECTIONS (8),
# BENCH_PG_CLIENTS (4 = the API's pool), BENCH_HTTP_THREADS (4), BENCH_PORT (18182).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cd "$repo"

seconds="${BENCH_SECONDS:-8}"
conns="${BENCH_CONNECTIONS:-8}"
pg_clients="${BENCH_PG_CLIENTS:-4}"
http_threads="${BENCH_HTTP_THREADS:-4}"
port="${BENCH_PORT:-18182}"
under_ingest="${BENCH_UNDER_INGEST:-0}"
fleet_rate="${BENCH_FLEET_RATE:-20000}"
pg_port="${LOCAL_PG_PORT:-55432}"
kafka="127.0.0.1:${LOCAL_KAFKA_PORT:-59092}"
admin_dsn="postgresql://postgres@127.0.0.1:${pg_port}/postgres"
db="trackd_bench_tiles"
dsn="postgresql://postgres@127.0.0.1:${pg_port}/${db}"
token="bench-read-token-0123456789"
topic="trackd-bench-tiles"
trackd="$repo/build/release/server/trackd"
fleet="$repo/build/release/tools/trackd-fleet"
work="$(mktemp -d)"
results="$repo/bench/RESULTS.md"

for tool in wrk pgbench psql; do
  command -v "$tool" >/dev/null || { echo "tiles bench: $tool missing (bash scripts/setup.sh)" >&2; exit 1; }
done
[[ -x "$trackd" ]] || { echo "tiles bench: build first: cmake --preset release && cmake --build --preset release" >&2; exit 1; }

bash "$repo/scripts/services.sh" start >/dev/null
load="$(cut -d' ' -f1-3 /proc/loadavg)"

trackd_pid=""
fleet_pid=""
cleanup() {
  [[ -n "$fleet_pid" ]] && kill "$fleet_pid" 2>/dev/null || true
  if [[ -n "$trackd_pid" ]] && kill -0 "$trackd_pid" 2>/dev/null; then
    kill -TERM "$trackd_pid"; wait "$trackd_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

echo "tiles bench: loading 100,000 vehicles into $db"
psql -X -q -v ON_ERROR_STOP=1 "$admin_dsn" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db"
psql -X -q -v ON_ERROR_STOP=1 "$dsn" -c "CREATE EXTENSION IF NOT EXISTS postgis" \
  -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"
TRACKD_PG_DSN="$dsn" "$trackd" migrate >/dev/null
psql -X -q -v ON_ERROR_STOP=1 "$dsn" -f "$repo/bench/api/load.sql" >/dev/null
psql -X -q -v ON_ERROR_STOP=1 "$dsn" -c "VACUUM ANALYZE trackd.vehicle_current_state" >/dev/null

if [[ "$under_ingest" == 1 ]]; then
  bash "$repo/scripts/kafka.sh" delete-topic "$topic" >/dev/null 2>&1 || true
  bash "$repo/scripts/kafka.sh" create-topic "$topic" 4 >/dev/null
fi
TRACKD_PG_DSN="$dsn" TRACKD_KAFKA_TOPIC="$topic" TRACKD_KAFKA_GROUP="$topic" TRACKD_KAFKA_BROKERS="$kafka" \
TRACKD_HTTP_LISTEN="127.0.0.1:$port" TRACKD_HTTP_THREADS="$http_threads" TRACKD_HTTP_POOL_SIZE="$pg_clients" \
TRACKD_HTTP_TOKENS_BENCH="read:$token" TRACKD_LOG_LEVEL=warn \
  "$trackd" run >"$work/trackd.log" 2>&1 &
trackd_pid=$!
for _ in $(seq 1 300); do
  curl -fs "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
  kill -0 "$trackd_pid" 2>/dev/null || { cat "$work/trackd.log" >&2; exit 1; }
  sleep 0.1
done
if [[ "$under_ingest" == 1 ]]; then
  # The fleet's 100,000 vehicles drive in the same region as the loaded ones.
  "$fleet" --brokers "$kafka" --topic "$topic" --vehicles 100000 --rate "$fleet_rate" \
    --duration-s 600 --city 10,50 --radius-km 300 --quiet >"$work/fleet.log" 2>&1 &
  fleet_pid=$!
  sleep 3
fi
bench_start=$SECONDS

wrk_percentiles() {
  awk '/Latency Distribution/{f=1;next} f&&/%/{v=$2; u=v; sub(/[0-9.]+/,"",u); sub(/[a-z]+$/,"",v);
       m=(u=="us")?v/1000:(u=="s")?v*1000:v; a[$1]=m} END{printf "%.2f %.2f %.2f", a["50%"], a["90%"], a["99%"]}' "$1"
}
pg_percentiles() {
  cat "$@" | awk '{print $3}' | sort -n | awk '{a[NR]=$1} END{
    printf "%.2f %.2f %.2f", a[int(NR*0.50)]/1000, a[int(NR*0.90)]/1000, a[int(NR*0.99)]/1000}'
}
# The tile columns/rows of the region lon 5..15, lat 45..55 at zoom $1: "x0 x1 y0 y1".
tile_range() {
  awk -v z="$1" 'function tx(lon){return int((lon+180)/360*2^z)}
    function ty(lat, r){r=lat*3.141592653589793/180; return int((1-log(sin(r)/cos(r)+1/cos(r))/3.141592653589793)/2*2^z)}
    BEGIN{printf "%d %d %d %d", tx(5), tx(14.999), ty(54.999), ty(45)}'
}

declare -A rows
export BENCH_DIR="$here" BENCH_TOKEN="$token"
for z in 6 10 14; do
  read -r x0 x1 y0 y1 <<<"$(tile_range "$z")"
  export TILE_Z="$z" TILE_X0="$x0" TILE_X1="$x1" TILE_Y0="$y0" TILE_Y1="$y1"
  wrk -t2 -c"$conns" -d2s -s "$here/tile.lua" "http://127.0.0.1:$port" >/dev/null
  echo "tiles bench: wrk z$z (${seconds}s, $conns connections, x $x0..$x1, y $y0..$y1)"
  wrk -t2 -c"$conns" -d"${seconds}s" --latency -s "$here/tile.lua" "http://127.0.0.1:$port" >"$work/wrk-$z.txt"
  # 204 (an empty tile) is an answer; anything else but 200 is not.
  if grep -q "Non-2xx" "$work/wrk-$z.txt"; then
    echo "tiles bench: z$z answered errors:" >&2; cat "$work/wrk-$z.txt" >&2; exit 1
  fi
  http_rps=$(awk '/Requests\/sec/{print $2}' "$work/wrk-$z.txt")
  read -r h50 h90 h99 <<<"$(wrk_percentiles "$work/wrk-$z.txt")"

  pgbench -n -M prepared -c"$pg_clients" -j2 -T2 -D z="$z" -D x0="$x0" -D x1="$x1" -D y0="$y0" -D y1="$y1" -f "$here/vehicles.sql" "$dsn" >/dev/null 2>&1
  echo "tiles bench: pgbench z$z (${seconds}s, $pg_clients clients)"
  mkdir -p "$work/pg-$z"
  (cd "$work/pg-$z" && pgbench -n -M prepared -c"$pg_clients" -j2 -T"$seconds" -l \
     -D z="$z" -D x0="$x0" -D x1="$x1" -D y0="$y0" -D y1="$y1" -f "$here/vehicles.sql" "$dsn" >"$work/pgbench-$z.txt" 2>&1) ||
    { cat "$work/pgbench-$z.txt" >&2; exit 1; }
  pg_tps=$(awk '/^tps = /{print $3; exit}' "$work/pgbench-$z.txt")
  read -r p50 p90 p99 <<<"$(pg_percentiles "$work/pg-$z"/pgbench_log.*)"
  ratio=$(awk -v a="$http_rps" -v b="$pg_tps" 'BEGIN{printf "%.2f", a/b}')
  bytes=$(curl -s -H "Authorization: Bearer $token" -o /dev/null -w '%{size_download}' \
    "http://127.0.0.1:$port/tiles/vehicles/$z/$(((x0 + x1) / 2))/$(((y0 + y1) / 2)).mvt")
  rows[$z]="| $z | $bytes | $http_rps | $h50 / $h90 / $h99 | $pg_tps | $p50 / $p90 / $p99 | $ratio |"
done

# trackd's statement and bench/tiles/vehicles.sql are the same text to pg_stat_statements, but for
# the numbering of the parameters (pgbench gives each :z its own).
same=$(psql -X -At "$dsn" -c "SELECT count(DISTINCT regexp_replace(query, '\\\$[0-9]+', '\$', 'g'))
  FROM pg_stat_statements s JOIN pg_database d
  ON d.oid = s.dbid WHERE d.datname = current_database() AND s.query LIKE 'SELECT ST_AsMVT(%vehicle_current_state%'")
[[ "$same" == 1 ]] || { echo "tiles bench: trackd and vehicles.sql ran $same different tile statements" >&2; exit 1; }

commit="$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)"
git -C "$repo" diff --quiet HEAD 2>/dev/null || commit="$commit (+ uncommitted changes)"
cpu="$(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo)"
mem="$(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo)"
mode="alone"
if [[ "$under_ingest" == 1 ]]; then
  rows_in=$(psql -X -At "$dsn" -c "SELECT count(*) FROM trackd.vehicle_telemetry_history")
  rate=$((rows_in / (SECONDS - bench_start + 3)))
  mode="under ingest (trackd-fleet, 100,000 vehicles, $fleet_rate positions/s asked, $rate rows/s stored meanwhile)"
fi
table=$(cat <<TABLE

## $(date -u +%Y-%m-%dT%H:%M:%SZ) — vector tiles vs the same ST_AsMVT SQL, $mode (bench/tiles/run.sh)

- commit: $commit
- machine: $(nproc) cores ($cpu), $mem; load average at start $load; PostgreSQL, trackd, wrk and pgbench all on it (noisy: shared with other work)
- data: 100,000 vehicles (lon 5..15, lat 45..55, bench/api/load.sql); random vehicles tiles of that region per zoom
- settings: ${seconds}s per run after a 2s warm-up; wrk -t2 -c$conns; trackd http.threads=$http_threads,
  http.pool_size=$pg_clients; pgbench -M prepared -c$pg_clients -j2 with bench/tiles/vehicles.sql (the same text as trackd's in pg_stat_statements)

| z | bytes of a middle tile | trackd tiles/s | trackd p50 / p90 / p99 ms | SQL tps (pgbench) | SQL p50 / p90 / p99 ms | trackd / SQL |
|---|---|---|---|---|---|---|
${rows[6]}
${rows[10]}
${rows[14]}
TABLE
)
printf '%s\n' "$table" >>"$results"
printf '%s\n' "$table"
echo "tiles bench: appended to bench/RESULTS.md"
