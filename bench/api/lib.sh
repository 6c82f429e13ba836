#!/usr/bin/env bash
# Shared by bench/api/run.sh and bench/tiles/run.sh (sourced, not run): the fresh database with
# bench/api/load.sql's 100,000 vehicles, `trackd run` with the API on it, and one measurement of
# an endpoint with wrk beside the same SQL with pgbench.
# shellcheck disable=SC2034 # variables are used by the scripts that source this file

api_repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=bench/lib.sh
source "$api_repo/bench/lib.sh"  # cpu_of, and one benchmark at a time (bench/lock.sh)
api_pg_port="${LOCAL_PG_PORT:-55432}"
api_kafka="127.0.0.1:${LOCAL_KAFKA_PORT:-59092}"
api_admin_dsn="postgresql://postgres@127.0.0.1:${api_pg_port}/postgres"
api_token="bench-read-token-0123456789"
api_trackd="$api_repo/build/release/server/trackd"
api_results="$api_repo/bench/RESULTS.md"
api_trackd_pid=""
api_record=1

# api_options SCRIPT ARGS...: the options both benchmarks take (the rest is environment knobs):
# --no-record (print the table, leave bench/RESULTS.md alone) and -h/--help (SCRIPT's header).
api_options() {
  local script="$1"
  shift
  while (($#)); do
    case "$1" in
      --no-record) api_record=0; shift ;;
      -h | --help) sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$script"; exit 0 ;;
      *) echo "unknown option $1 (see $script --help)" >&2; exit 2 ;;
    esac
  done
}
# api_report NAME TABLE: prints TABLE and, unless --no-record, appends it to bench/RESULTS.md.
api_report() {
  printf '%s\n' "$2"
  if ((api_record)); then
    printf '%s\n' "$2" >>"$api_results"
    echo "$1 bench: appended to bench/RESULTS.md"
  fi
}

# api_prepare NAME: the tools and the build are there, the local services run; sets $api_load
# (the load average at the start) and $api_work (a scratch folder, removed at exit with trackd
# stopped; the caller's own clean-up goes in api_cleanup_extra).
api_prepare() {
  local name="$1" tool
  for tool in wrk pgbench psql curl; do
    command -v "$tool" >/dev/null || { echo "$name bench: $tool missing (bash scripts/setup.sh)" >&2; exit 1; }
  done
  [[ -x "$api_trackd" ]] || { echo "$name bench: build first: cmake --preset release && cmake --build --preset release" >&2; exit 1; }
  # The local services without the streaming replica (bench/lib.sh): left running, its WAL replay
  # took up to 0.4 of a core from the ingest benchmarks run after this one.
  bench_services
  api_load="$(cut -d' ' -f1-3 /proc/loadavg)"
  api_work="$(mktemp -d)"
  trap api_cleanup EXIT
}
api_cleanup_extra() { :; }
api_cleanup() {
  api_cleanup_extra
  if [[ -n "$api_trackd_pid" ]] && kill -0 "$api_trackd_pid" 2>/dev/null; then
    kill -TERM "$api_trackd_pid"; wait "$api_trackd_pid" 2>/dev/null || true
  fi
  rm -rf "$api_work"
}

api_dsn() { echo "postgresql://postgres@127.0.0.1:${api_pg_port}/$1"; }

# api_load_db DB: a fresh database with trackd's schema, pg_stat_statements and
# bench/api/load.sql (100,000 vehicles over lon 5..15, lat 45..55; 100 geofences), analysed.
api_load_db() {
  local dsn
  dsn="$(api_dsn "$1")"
  psql -X -q -v ON_ERROR_STOP=1 "$api_admin_dsn" -c "SET client_min_messages = warning" \
    -c "DROP DATABASE IF EXISTS $1 WITH (FORCE)" -c "CREATE DATABASE $1"
  psql -X -q -v ON_ERROR_STOP=1 "$dsn" -c "CREATE EXTENSION IF NOT EXISTS postgis" \
    -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"
  TRACKD_PG_DSN="$dsn" "$api_trackd" migrate >/dev/null
  psql -X -q -v ON_ERROR_STOP=1 "$dsn" -f "$api_repo/bench/api/load.sql" >/dev/null
  psql -X -q -v ON_ERROR_STOP=1 "$dsn" -c "VACUUM ANALYZE trackd.vehicle_current_state" >/dev/null
}

# api_start_trackd DB PORT TOPIC HTTP_THREADS POOL_SIZE: `trackd run` on DB with the API on
# 127.0.0.1:PORT and a read token; returns once /readyz answers. Sets $api_trackd_pid.
api_start_trackd() {
  local dsn port="$2" topic="$3"
  dsn="$(api_dsn "$1")"
  # Another server answering there would be measured in trackd's place.
  if curl -s -o /dev/null "http://127.0.0.1:$port/readyz" 2>/dev/null; then
    echo "api bench: something already answers on 127.0.0.1:$port; stop it or set BENCH_PORT" >&2
    exit 1
  fi
  TRACKD_PG_DSN="$dsn" TRACKD_KAFKA_TOPIC="$topic" TRACKD_KAFKA_GROUP="$topic" TRACKD_KAFKA_BROKERS="$api_kafka" \
  TRACKD_HTTP_LISTEN="127.0.0.1:$port" TRACKD_HTTP_THREADS="$4" TRACKD_HTTP_POOL_SIZE="$5" \
  TRACKD_HTTP_TOKENS_BENCH="read:$api_token" TRACKD_LOG_LEVEL=warn \
    "$api_trackd" run >"$api_work/trackd.log" 2>&1 &
  api_trackd_pid=$!
  for _ in $(seq 1 300); do
    curl -fs "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && return 0
    kill -0 "$api_trackd_pid" 2>/dev/null || { cat "$api_work/trackd.log" >&2; exit 1; }
    sleep 0.1
  done
  echo "api bench: trackd not ready" >&2
  cat "$api_work/trackd.log" >&2
  exit 1
}

# wrk's "--latency" table -> "p50 p90 p99" in ms.
wrk_percentiles() {
  awk '/Latency Distribution/{f=1;next} f&&/%/{v=$2; u=v; sub(/[0-9.]+/,"",u); sub(/[a-z]+$/,"",v);
       m=(u=="us")?v/1000:(u=="s")?v*1000:v; a[$1]=m} END{printf "%.2f %.2f %.2f", a["50%"], a["90%"], a["99%"]}' "$1"
}

# api_measure LABEL URL LUA SQL SECONDS CONNECTIONS PG_CLIENTS DB [pgbench options]: a 2 s
# warm-up of both, then wrk with LUA against URL and right after pgbench with SQL on DB. Sets
# $m_http_rps, $m_h50/$m_h90/$m_h99, $m_pg_tps, $m_p50/$m_p90/$m_p99, $m_ratio (trackd/SQL)
# and $m_trackd_us (trackd's own CPU per request, µs: what the API adds to the database's work
# on a machine where both share the cores). Any answer but 2xx stops the benchmark.
api_measure() {
  local label="$1" url="$2" lua="$3" sql="$4" seconds="$5" conns="$6" clients="$7" dsn
  dsn="$(api_dsn "$8")"
  shift 8
  wrk -t2 -c"$conns" -d2s -s "$lua" "$url" >/dev/null
  echo "api bench: wrk $label (${seconds}s, $conns connections)"
  local cpu0 cpu1 requests
  cpu0=$(cpu_of "$api_trackd_pid")
  wrk -t2 -c"$conns" -d"${seconds}s" --latency -s "$lua" "$url" >"$api_work/wrk-$label.txt"
  cpu1=$(cpu_of "$api_trackd_pid")
  if grep -q "Non-2xx" "$api_work/wrk-$label.txt"; then
    echo "api bench: $label answered errors:" >&2; cat "$api_work/wrk-$label.txt" >&2; exit 1
  fi
  m_http_rps=$(awk '/Requests\/sec/{print $2}' "$api_work/wrk-$label.txt")
  read -r m_h50 m_h90 m_h99 <<<"$(wrk_percentiles "$api_work/wrk-$label.txt")"
  requests=$(awk '/requests in/{print $1}' "$api_work/wrk-$label.txt")
  m_trackd_us=$(calc "($cpu1 - $cpu0) * 1e6 / $requests" "%.0f")

  pgbench -n -M prepared -c"$clients" -j2 -T2 "$@" -f "$sql" "$dsn" >/dev/null 2>&1
  echo "api bench: pgbench $label (${seconds}s, $clients clients)"
  mkdir -p "$api_work/pg-$label"
  (cd "$api_work/pg-$label" && pgbench -n -M prepared -c"$clients" -j2 -T"$seconds" -l "$@" \
     -f "$sql" "$dsn" >"$api_work/pgbench-$label.txt" 2>&1) ||
    { cat "$api_work/pgbench-$label.txt" >&2; exit 1; }
  m_pg_tps=$(awk '/^tps = /{print $3; exit}' "$api_work/pgbench-$label.txt")
  read -r m_p50 m_p90 m_p99 <<<"$(pg_percentiles "$api_work/pg-$label"/pgbench_log.*)"
  m_ratio=$(awk -v a="$m_http_rps" -v b="$m_pg_tps" 'BEGIN{printf "%.2f", a/b}')
}

# The "commit" and "machine" facts of a RESULTS.md section.
api_commit() {
  local c
  c="$(git -C "$api_repo" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  git -C "$api_repo" diff --quiet HEAD 2>/dev/null || c="$c (+ uncommitted changes)"
  echo "$c"
}
api_machine() {
  local cpu mem
  cpu="$(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo)"
  mem="$(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo)"
  echo "$(nproc) cores ($cpu), $mem; load average at start $api_load"
}
