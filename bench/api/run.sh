#!/usr/bin/env bash
# The HTTP API benchmark: trackd's API against the same SQL run straight in PostgreSQL.
#
#   bash bench/api/run.sh          # needs a release build (cmake --preset release && cmake --build --preset release)
#
# Loads 100,000 vehicles in current state and 100 geofences into a fresh database
# (bench/api/load.sql), starts `trackd run` with the API on 127.0.0.1:${BENCH_PORT:-18181}, then for
# each of bbox, nearby and geofence-inside runs wrk against the endpoint and, right after,
# pgbench with a script file of the SQL trackd prepares for it (bench/api/*.sql), same parameter
# distributions. Prints requests/s and latency percentiles of both and their ratio, and appends
# them to bench/RESULTS.md. Knobs (environment): BENCH_SECONDS (10), BENCH_CONNECTIONS (wrk, 16),
# BENCH_PG_CLIENTS (pgbench, 4 = the API's pool), BENCH_HTTP_THREADS (4).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cd "$repo"

seconds="${BENCH_SECONDS:-10}"
conns="${BENCH_CONNECTIONS:-16}"
pg_clients="${BENCH_PG_CLIENTS:-4}"
http_threads="${BENCH_HTTP_THREADS:-4}"
port="${BENCH_PORT:-18181}"
pg_port="${LOCAL_PG_PORT:-55432}"
admin_dsn="postgresql://postgres@127.0.0.1:${pg_port}/postgres"
db="trackd_bench_api"
dsn="postgresql://postgres@127.0.0.1:${pg_port}/${db}"
token="bench-read-token-0123456789"
trackd="$repo/build/release/server/trackd"
work="$(mktemp -d)"
results="$repo/bench/RESULTS.md"

for tool in wrk pgbench psql; do
  command -v "$tool" >/dev/null || { echo "api bench: $tool missing (bash scripts/setup.sh)" >&2; exit 1; }
done
[[ -x "$trackd" ]] || { echo "api bench: build first: cmake --preset release && cmake --build --preset release" >&2; exit 1; }

bash "$repo/scripts/services.sh" start >/dev/null
load="$(cut -d' ' -f1-3 /proc/loadavg)"

trackd_pid=""
cleanup() {
  if [[ -n "$trackd_pid" ]] && kill -0 "$trackd_pid" 2>/dev/null; then
    kill -TERM "$trackd_pid"; wait "$trackd_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

echo "api bench: loading 100,000 vehicles and 100 geofences into $db"
psql -X -q -v ON_ERROR_STOP=1 "$admin_dsn" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db"
psql -X -q -v ON_ERROR_STOP=1 "$dsn" -c "CREATE EXTENSION IF NOT EXISTS postgis"
TRACKD_PG_DSN="$dsn" "$trackd" migrate >/dev/null
psql -X -q -v ON_ERROR_STOP=1 "$dsn" -f "$here/load.sql" >/dev/null
psql -X -q -v ON_ERROR_STOP=1 "$dsn" -c "VACUUM ANALYZE trackd.vehicle_current_state" >/dev/null

TRACKD_PG_DSN="$dsn" TRACKD_KAFKA_TOPIC="trackd-bench-api" TRACKD_KAFKA_GROUP="trackd-bench-api" \
TRACKD_KAFKA_BROKERS="127.0.0.1:${LOCAL_KAFKA_PORT:-59092}" \
TRACKD_HTTP_LISTEN="127.0.0.1:$port" TRACKD_HTTP_THREADS="$http_threads" TRACKD_HTTP_POOL_SIZE="$pg_clients" \
TRACKD_HTTP_TOKENS_BENCH="read:$token" TRACKD_LOG_LEVEL=warn \
  "$trackd" run >"$work/trackd.log" 2>&1 &
trackd_pid=$!
for _ in $(seq 1 300); do
  curl -fs "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
  kill -0 "$trackd_pid" 2>/dev/null || { cat "$work/trackd.log" >&2; exit 1; }
  sleep 0.1
done
curl -fs "http://127.0.0.1:$port/readyz" >/dev/null || { echo "api bench: trackd not ready" >&2; cat "$work/trackd.log" >&2; exit 1; }

# wrk's "--latency" table -> "p50 p90 p99" in ms.
wrk_percentiles() {
  awk '/Latency Distribution/{f=1;next} f&&/%/{v=$2; u=v; sub(/[0-9.]+/,"",u); sub(/[a-z]+$/,"",v);
       m=(u=="us")?v/1000:(u=="s")?v*1000:v; a[$1]=m} END{printf "%.2f %.2f %.2f", a["50%"], a["90%"], a["99%"]}' "$1"
}
# pgbench per-transaction logs (column 3: latency in µs) -> "p50 p90 p99" in ms.
pg_percentiles() {
  cat "$@" | awk '{print $3}' | sort -n | awk '{a[NR]=$1} END{
    printf "%.2f %.2f %.2f", a[int(NR*0.50)]/1000, a[int(NR*0.90)]/1000, a[int(NR*0.99)]/1000}'
}

declare -A rows
export BENCH_DIR="$here" BENCH_TOKEN="$token"
for name in bbox nearby inside; do
  # A short warm-up of both, so that neither measures cold caches or unprepared statements.
  wrk -t2 -c"$conns" -d2s -s "$here/$name.lua" "http://127.0.0.1:$port" >/dev/null
  echo "api bench: wrk $name (${seconds}s, $conns connections)"
  wrk -t2 -c"$conns" -d"${seconds}s" --latency -s "$here/$name.lua" "http://127.0.0.1:$port" >"$work/wrk-$name.txt"
  grep -q "Non-2xx" "$work/wrk-$name.txt" && { echo "api bench: $name answered errors:" >&2; cat "$work/wrk-$name.txt" >&2; exit 1; }
  http_rps=$(awk '/Requests\/sec/{print $2}' "$work/wrk-$name.txt")
  read -r h50 h90 h99 <<<"$(wrk_percentiles "$work/wrk-$name.txt")"

  pgbench -n -M prepared -c"$pg_clients" -j2 -T2 -f "$here/$name.sql" "$dsn" >/dev/null 2>&1
  echo "api bench: pgbench $name (${seconds}s, $pg_clients clients)"
  mkdir -p "$work/pg-$name"
  (cd "$work/pg-$name" && pgbench -n -M prepared -c"$pg_clients" -j2 -T"$seconds" -l \
     -f "$here/$name.sql" "$dsn" >"$work/pgbench-$name.txt" 2>&1)
  pg_tps=$(awk '/^tps = /{print $3; exit}' "$work/pgbench-$name.txt")
  read -r p50 p90 p99 <<<"$(pg_percentiles "$work/pg-$name"/pgbench_log.*)"
  ratio=$(awk -v a="$http_rps" -v b="$pg_tps" 'BEGIN{printf "%.2f", a/b}')
  rows[$name]="| $name | $http_rps | $h50 / $h90 / $h99 | $pg_tps | $p50 / $p90 / $p99 | $ratio |"
done

commit="$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)"
git -C "$repo" diff --quiet HEAD 2>/dev/null || commit="$commit (+ uncommitted changes)"
cpu="$(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo)"
mem="$(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo)"
table=$(cat <<TABLE

## $(date -u +%Y-%m-%dT%H:%M:%SZ) — HTTP API vs the same SQL (bench/api/run.sh)

- commit: $commit
- machine: $(nproc) cores ($cpu), $mem; load average at start $load; PostgreSQL, trackd, wrk and pgbench all on it
- data: 100,000 vehicles (lon 5..15, lat 45..55), 100 geofences (circles of 2..20 km)
- settings: ${seconds}s per run after a 2s warm-up; wrk -t2 -c$conns; trackd http.threads=$http_threads,
  http.pool_size=$pg_clients; pgbench -M prepared -c$pg_clients -j2 with bench/api/*.sql
- requests: bbox 0.1°×0.1° limit=100; nearby radius_m=5000 limit=10; inside a random zone limit=100

| endpoint | trackd req/s | trackd p50 / p90 / p99 ms | SQL tps (pgbench) | SQL p50 / p90 / p99 ms | trackd / SQL |
|---|---|---|---|---|---|
${rows[bbox]}
${rows[nearby]}
${rows[inside]}
TABLE
)
if [[ ! -f "$results" ]]; then
  cat >"$results" <<'HEAD'
# Benchmark results

Append-only history: each run adds a section with its date, commit, machine, settings and
figures; older sections stay as they were, so that changes over time are visible. Reproduce a
section with the command named in its title.
HEAD
fi
printf '%s\n' "$table" >>"$results"
printf '%s\n' "$table"
echo "api bench: appended to bench/RESULTS.md"
