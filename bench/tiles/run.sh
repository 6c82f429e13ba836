#!/usr/bin/env bash
# Vector tiles benchmark: GET /tiles/vehicles/{z}/{x}/{y}.mvt against the same ST_AsMVT statement
# run straight in PostgreSQL by pgbench, at 100,000 vehicles, zooms 6, 10 and 14, side by side in
# one run.
#
#   bash bench/tiles/run.sh [--no-record]   # needs a release build
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
db="trackd_bench_tiles"
topic="trackd-bench-tiles"
fleet="$repo/build/release/tools/trackd-fleet"
# shellcheck source=bench/api/lib.sh
source "$repo/bench/api/lib.sh"
api_options "${BASH_SOURCE[0]}" "$@"
dsn="$(api_dsn "$db")"

fleet_pid=""
api_cleanup_extra() { [[ -n "$fleet_pid" ]] && kill "$fleet_pid" 2>/dev/null || true; }
api_prepare tiles
echo "tiles bench: loading 100,000 vehicles into $db"
api_load_db "$db"
if [[ "$under_ingest" == 1 ]]; then
  bash "$repo/scripts/kafka.sh" delete-topic "$topic" >/dev/null 2>&1 || true
  bash "$repo/scripts/kafka.sh" create-topic "$topic" 4 >/dev/null
fi
api_start_trackd "$db" "$port" "$topic" "$http_threads" "$pg_clients"
if [[ "$under_ingest" == 1 ]]; then
  # The fleet's 100,000 vehicles drive in the same region as the loaded ones.
  "$fleet" --brokers "$api_kafka" --topic "$topic" --vehicles 100000 --rate "$fleet_rate" \
    --duration-s 600 --city 10,50 --radius-km 300 --quiet >"$api_work/fleet.log" 2>&1 &
  fleet_pid=$!
  sleep 3
fi
bench_start=$SECONDS

# The tile columns/rows of the region lon 5..15, lat 45..55 at zoom $1: "x0 x1 y0 y1".
tile_range() {
  awk -v z="$1" 'function tx(lon){return int((lon+180)/360*2^z)}
    function ty(lat, r){r=lat*3.141592653589793/180; return int((1-log(sin(r)/cos(r)+1/cos(r))/3.141592653589793)/2*2^z)}
    BEGIN{printf "%d %d %d %d", tx(5), tx(14.999), ty(54.999), ty(45)}'
}

declare -A rows
export BENCH_DIR="$here" BENCH_TOKEN="$api_token"
for z in 6 10 14; do
  read -r x0 x1 y0 y1 <<<"$(tile_range "$z")"
  export TILE_Z="$z" TILE_X0="$x0" TILE_X1="$x1" TILE_Y0="$y0" TILE_Y1="$y1"
  # 204 (an empty tile) is a 2xx answer.
  api_measure "z$z" "http://127.0.0.1:$port" "$here/tile.lua" "$here/vehicles.sql" "$seconds" \
    "$conns" "$pg_clients" "$db" -D z="$z" -D x0="$x0" -D x1="$x1" -D y0="$y0" -D y1="$y1"
  bytes=$(curl -s -H "Authorization: Bearer $api_token" -o /dev/null -w '%{size_download}' \
    "http://127.0.0.1:$port/tiles/vehicles/$z/$(((x0 + x1) / 2))/$(((y0 + y1) / 2)).mvt")
  rows[$z]="| $z | $bytes | $m_http_rps | $m_h50 / $m_h90 / $m_h99 | $m_pg_tps | $m_p50 / $m_p90 / $m_p99 | $m_ratio |"
done

# trackd's statement and bench/tiles/vehicles.sql are the same text to pg_stat_statements, but for
# the numbering of the parameters (pgbench gives each :z its own).
same=$(psql -X -At "$dsn" -c "SELECT count(DISTINCT regexp_replace(query, '\\\$[0-9]+', '\$', 'g'))
  FROM pg_stat_statements s JOIN pg_database d
  ON d.oid = s.dbid WHERE d.datname = current_database() AND s.query LIKE 'SELECT ST_AsMVT(%vehicle_current_state%'")
[[ "$same" == 1 ]] || { echo "tiles bench: trackd and vehicles.sql ran $same different tile statements" >&2; exit 1; }

mode="alone"
if [[ "$under_ingest" == 1 ]]; then
  rows_in=$(psql -X -At "$dsn" -c "SELECT count(*) FROM trackd.vehicle_telemetry_history")
  rate=$((rows_in / (SECONDS - bench_start + 3)))
  mode="under ingest (trackd-fleet, 100,000 vehicles, $fleet_rate positions/s asked, $rate rows/s stored meanwhile)"
fi
table=$(cat <<TABLE

## $(date -u +%Y-%m-%dT%H:%M:%SZ) — vector tiles vs the same ST_AsMVT SQL, $mode (bench/tiles/run.sh)

- commit: $(api_commit)
- machine: $(api_machine); PostgreSQL, trackd, wrk and pgbench all on it (noisy: shared with other work)
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
api_report tiles "$table"
