#!/usr/bin/env bash
# The HTTP API benchmark: trackd's API against the same SQL run straight in PostgreSQL.
#
#   bash bench/api/run.sh [--no-record]   # needs a release build (cmake --preset release && cmake --build --preset release)
#
# Loads 100,000 vehicles in current state and 100 geofences into a fresh database
# (bench/api/load.sql), starts `trackd run` with the API on 127.0.0.1:${BENCH_PORT:-18181}, then for
# each of bbox, nearby and geofence-inside runs wrk against the endpoint and, right after,
# pgbench with a script file of the SQL trackd prepares for it (bench/api/*.sql), same parameter
# distributions (pgbench reads the rows as text, its only format; trackd asks for them in binary,
# which spares PostgreSQL its float, timestamp and geometry output). Prints requests/s and latency percentiles of both, their ratio and trackd's own
# CPU per request, and appends them to bench/RESULTS.md. Knobs (environment): BENCH_SECONDS (10),
# BENCH_CONNECTIONS (wrk, 16), BENCH_PG_CLIENTS (pgbench, 4 = the API's pool), BENCH_HTTP_THREADS
# (4).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cd "$repo"

seconds="${BENCH_SECONDS:-10}"
conns="${BENCH_CONNECTIONS:-16}"
pg_clients="${BENCH_PG_CLIENTS:-4}"
http_threads="${BENCH_HTTP_THREADS:-4}"
port="${BENCH_PORT:-18181}"
db="trackd_bench_api"
# shellcheck source=bench/api/lib.sh
source "$here/lib.sh"
api_options "${BASH_SOURCE[0]}" "$@"

api_prepare api
echo "api bench: loading 100,000 vehicles and 100 geofences into $db"
api_load_db "$db"
api_start_trackd "$db" "$port" trackd-bench-api "$http_threads" "$pg_clients"

declare -A rows
export BENCH_DIR="$here" BENCH_TOKEN="$api_token"
for name in bbox nearby inside; do
  api_measure "$name" "http://127.0.0.1:$port" "$here/$name.lua" "$here/$name.sql" \
    "$seconds" "$conns" "$pg_clients" "$db"
  rows[$name]="| $name | $m_http_rps | $m_h50 / $m_h90 / $m_h99 | $m_pg_tps | $m_p50 / $m_p90 / $m_p99 | $m_ratio | $m_trackd_us |"
done

table=$(cat <<TABLE

## $(date -u +%Y-%m-%dT%H:%M:%SZ) — HTTP API vs the same SQL (bench/api/run.sh)

- commit: $(api_commit)
- machine: $(api_machine); PostgreSQL, trackd, wrk and pgbench all on it
- data: 100,000 vehicles (lon 5..15, lat 45..55), 100 geofences (circles of 2..20 km)
- settings: ${seconds}s per run after a 2s warm-up; wrk -t2 -c$conns; trackd http.threads=$http_threads,
  http.pool_size=$pg_clients; pgbench -M prepared -c$pg_clients -j2 with bench/api/*.sql
- requests: bbox 0.1°×0.1° limit=100; nearby radius_m=5000 limit=10; inside a random zone limit=100

| endpoint | trackd req/s | trackd p50 / p90 / p99 ms | SQL tps (pgbench) | SQL p50 / p90 / p99 ms | trackd / SQL | trackd CPU µs per request |
|---|---|---|---|---|---|---:|
${rows[bbox]}
${rows[nearby]}
${rows[inside]}
TABLE
)
api_report api "$table"
