#!/usr/bin/env bash
# bench/api_under_ingest: the HTTP API under wrk while ingest runs at full speed, side by side
# with each alone, in one run (docs/benchmarks.md).
#
#   bash bench/api_under_ingest.sh [--messages N] [--seconds S] [--replica] [--no-record]
#
# 1. a fresh database with 100,000 vehicles in current state and 100 geofences
#    (bench/api/load.sql), and N pre-produced messages (default 400,000; 20,000 vehicles,
#    12 partitions) in a fresh topic;
# 2. API alone: `trackd run` with nothing to ingest, wrk on bbox and nearby for S seconds
#    (default 15) each: requests/s and p99;
# 3. ingest alone: trackd from offset 0 of the topic until every message is committed: rows/s;
# 4. both: the same again in a fresh consumer group and database, with wrk running bbox and
#    nearby against the API for the whole ingest: rows/s and the API's requests/s and p99;
# 5. with --replica: step 4 again with the API reading from the local streaming replica
#    (http.pg_dsn, scripts/pg-replica.sh), ingest writing to the primary;
# 6. prints the ratios (ingest with/without API load, API p99 under ingest vs alone, and with
#    --replica the replica's p99 against the primary's) and appends them to bench/RESULTS.md.
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

messages=400000
seconds=15
record=1
replica=0
while (($#)); do
  case "$1" in
    --messages) messages="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    --no-record) record=0; shift ;;
    --replica) replica=1; shift ;;
    *) die "unknown argument $1 (see the header of bench/api_under_ingest.sh)" ;;
  esac
done
command -v wrk >/dev/null || die "wrk missing (bash scripts/setup.sh)"

bench_build
bench_replica=$replica bench_services
machine="$(machine_description)"
work="$(mktemp -d)"
topic="bench-api-ingest-$$"
port="${BENCH_PORT:-18182}"
token="bench-read-token-0123456789"
trackd_pid=""
cleanup() {
  [[ -z "$trackd_pid" ]] || (stop_trackd) || true  # a subshell: see bench_scratch_cleanup
  for db in bench_api_a_$$ bench_api_b_$$ bench_api_c_$$ bench_api_d_$$; do drop_db "$db"; done
  delete_topic "$topic"
  rm -rf "$work"
}
trap cleanup EXIT

# load_db NAME: schema + the API benchmark's vehicles and geofences.
load_db() {
  create_db "$1"
  psql_at "$1" -f "$bench_repo/bench/api/load.sql" >/dev/null
  # The loaded vehicles share the fleet's ids (veh-NNNNNN): renamed, so that the fleet's
  # positions are new vehicles rather than impossible jumps from the loaded ones.
  psql_at "$1" -c "UPDATE trackd.vehicle_current_state SET vehicle_id = 'api-' || vehicle_id" \
    -c "VACUUM ANALYZE trackd.vehicle_current_state" >/dev/null
}

# start_trackd DB GROUP: trackd run with the API on $port; waits for /readyz.
start_trackd() {
  TRACKD_PG_DSN="$(dsn_of "$1")" TRACKD_HTTP_PG_DSN="${read_dsn:-}" TRACKD_KAFKA_BROKERS="$brokers" TRACKD_KAFKA_TOPIC="$topic" \
    TRACKD_KAFKA_GROUP="$2" TRACKD_HTTP_LISTEN="127.0.0.1:$port" TRACKD_HTTP_TOKENS_BENCH="read:$token" \
    TRACKD_LOG_LEVEL=warn "$bench_bin/server/trackd" run >"$work/trackd-$2.log" 2>&1 &
  trackd_pid=$!
  for _ in $(seq 1 300); do
    curl -fs "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && return 0
    kill -0 "$trackd_pid" 2>/dev/null || die "trackd exited: $(tail -n 5 "$work/trackd-$2.log")"
    sleep 0.1
  done
  die "trackd not ready"
}

# wrk_run NAME SECONDS OUT: one endpoint's wrk run; prints "req/s p99_ms".
wrk_run() {
  BENCH_DIR="$bench_repo/bench/api" BENCH_TOKEN="$token" \
    wrk -t1 -c8 -d"${2}s" --latency -s "$bench_repo/bench/api/$1.lua" "http://127.0.0.1:$port" >"$3" || true
  grep -q "Non-2xx" "$3" && die "$1 answered errors: $(cat "$3")"
  awk '/Requests\/sec/{r=$2} /^ +99%/{v=$2; u=v; sub(/[0-9.]+/,"",u); sub(/[a-z]+$/,"",v);
       p=(u=="us")?v/1000:(u=="s")?v*1000:v} END{printf "%s %.2f\n", r, p}' "$3"
}

# ingest_rate GROUP DB T0: waits until every message is committed; prints rows/s since T0 (taken
# just before trackd started, so start-up and group join count, as in bench/ingest.sh).
ingest_rate() {
  local t0="$3" t1
  "$bench_bin/bench/trackd-bench-watch" --dsn "$(dsn_of "$2")" --group "$1" --topic "$topic" \
    --total "$sent" --interval-ms 50 --timeout-s 1800 >"$work/watch-$1.out" || die "ingest did not finish"
  t1=$(date +%s.%N)
  rows=$(psql_at "$2" -c "SELECT count(*) FROM trackd.vehicle_telemetry_history")
  ((rows > sent * 9 / 10)) || die "only $rows of $sent messages became history rows"
  calc "$rows / ($t1 - $t0)" %.0f
}

say "producing $messages messages to $topic"
create_topic "$topic" 12
"$bench_bin/tools/trackd-fleet" --brokers "$brokers" --topic "$topic" --vehicles 20000 \
  --messages "$messages" --quiet --summary-json "$work/fleet.json" >"$work/fleet.log" 2>&1 ||
  die "trackd-fleet failed: $(tail -n 5 "$work/fleet.log")"
sent=$(jq -r .sent "$work/fleet.json")

# 2. API alone (a consumer group that starts at the end: nothing to ingest).
say "API alone"
load_db "bench_api_a_$$"
start_trackd "bench_api_a_$$" "bench-api-idle-$$"
read -r bbox_alone_rps bbox_alone_p99 <<<"$(wrk_run bbox "$seconds" "$work/wrk-bbox-alone.txt")"
read -r near_alone_rps near_alone_p99 <<<"$(wrk_run nearby "$seconds" "$work/wrk-nearby-alone.txt")"
stop_trackd || die "trackd exited with an error"

# 3. ingest alone.
say "ingest alone"
load_db "bench_api_b_$$"
t0=$(date +%s.%N)
start_trackd "bench_api_b_$$" "bench-api-b-$$"
ingest_alone=$(ingest_rate "bench-api-b-$$" "bench_api_b_$$" "$t0")
stop_trackd || die "trackd exited with an error"

# 4. both: wrk on bbox and nearby (one wrk each) for as long as the ingest runs.
say "ingest under API load"
load_db "bench_api_c_$$"
t0=$(date +%s.%N)
start_trackd "bench_api_c_$$" "bench-api-c-$$"
( wrk_run bbox 600 "$work/wrk-bbox-load.txt" >"$work/bbox-load.out" ) &
wrk_bbox=$!
( wrk_run nearby 600 "$work/wrk-nearby-load.txt" >"$work/nearby-load.out" ) &
wrk_near=$!
ingest_loaded=$(ingest_rate "bench-api-c-$$" "bench_api_c_$$" "$t0")
pkill -INT -P "$wrk_bbox" wrk 2>/dev/null || true
pkill -INT -P "$wrk_near" wrk 2>/dev/null || true
wait "$wrk_bbox" "$wrk_near" || true
read -r bbox_load_rps bbox_load_p99 <"$work/bbox-load.out"
read -r near_load_rps near_load_p99 <"$work/nearby-load.out"
stop_trackd || die "trackd exited with an error"

# 5. the same with the API's reads on the streaming replica.
replica_row=""
replica_line=""
if ((replica)); then
  say "ingest under API load, reads on the replica"
  load_db "bench_api_d_$$"
  read_dsn="postgresql://postgres@127.0.0.1:${LOCAL_PG_REPLICA_PORT:-55433}/bench_api_d_$$"
  for _ in $(seq 1 300); do
    [[ "$(psql -X -At "$read_dsn" -c "SELECT count(*) FROM trackd.vehicle_current_state" 2>/dev/null)" == 100000 ]] && break
    sleep 0.2
  done
  t0=$(date +%s.%N)
  start_trackd "bench_api_d_$$" "bench-api-d-$$"
  ( wrk_run bbox 600 "$work/wrk-bbox-replica.txt" >"$work/bbox-replica.out" ) &
  wrk_bbox=$!
  ( wrk_run nearby 600 "$work/wrk-nearby-replica.txt" >"$work/nearby-replica.out" ) &
  wrk_near=$!
  ingest_replica=$(ingest_rate "bench-api-d-$$" "bench_api_d_$$" "$t0")
  pkill -INT -P "$wrk_bbox" wrk 2>/dev/null || true
  pkill -INT -P "$wrk_near" wrk 2>/dev/null || true
  wait "$wrk_bbox" "$wrk_near" || true
  read -r bbox_rep_rps bbox_rep_p99 <"$work/bbox-replica.out"
  read -r near_rep_rps near_rep_p99 <"$work/nearby-replica.out"
  stop_trackd || die "trackd exited with an error"
  read_dsn=""
  replica_row="| ingest + API load, reads on the replica | $ingest_replica | $bbox_rep_rps | $bbox_rep_p99 | $near_rep_rps | $near_rep_p99 |"
  replica_line="API p99 under ingest, replica / primary: bbox **$(calc "$bbox_rep_p99 / $bbox_load_p99")**, nearby **$(calc "$near_rep_p99 / $near_load_p99")** (the replica runs on the same 2 cores, replaying the ingest)."
fi

ingest_ratio=$(calc "$ingest_loaded / $ingest_alone")
bbox_ratio=$(calc "$bbox_load_p99 / $bbox_alone_p99")
near_ratio=$(calc "$near_load_p99 / $near_alone_p99")
report=$(cat <<REPORT
- commit: $(git_describe)
- machine: $machine
- data: $sent messages (20,000 vehicles, 12 partitions) on top of 100,000 vehicles and 100 geofences (bench/api/load.sql); wrk -t1 -c8 per endpoint (bench/api/*.lua)

| | ingest rows/s | bbox req/s | bbox p99 ms | nearby req/s | nearby p99 ms |
|---|---|---|---|---|---|
| API alone (${seconds}s each) | – | $bbox_alone_rps | $bbox_alone_p99 | $near_alone_rps | $near_alone_p99 |
| ingest alone | $ingest_alone | – | – | – | – |
| ingest + API load | $ingest_loaded | $bbox_load_rps | $bbox_load_p99 | $near_load_rps | $near_load_p99 |
$replica_row

Ingest under API load / alone: **$ingest_ratio**; API p99 under ingest / alone: bbox **$bbox_ratio**, nearby **$near_ratio**.
$replica_line
REPORT
)
printf '%s\n' "$report"
if ((record)); then
  printf '%s\n' "$report" | append_results "API under ingest load (bash bench/api_under_ingest.sh --messages $messages --seconds $seconds$( ((replica)) && echo " --replica"))"
  say "appended to bench/RESULTS.md"
fi
