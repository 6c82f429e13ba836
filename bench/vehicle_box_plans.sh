#!/usr/bin/env bash
# bench/vehicle_box_plans: a page of the vehicles in a box (GET /v1/vehicles?bbox=, the OGC
# vehicles collection) with a cached (generic) plan against a plan made with its values, for
# boxes of growing size, and which of the two trackd runs (docs/benchmarks.md, "The current
# state's large boxes are planned each time").
#
#   bash bench/vehicle_box_plans.sh [--seconds 5] [--no-record]
#
# 1. Two fresh databases of 100,000 vehicles in current state: "spread", bench/api/load.sql's
#    (lon 5..15, lat 45..55: about 1,000 a square degree), and "city", the same vehicles moved
#    into 0.28° x 0.28° (five times the density of bench/ingest.sh's fleet).
# 2. For each box side, the page statement of server/http/vehicle_service.cpp with limit=100
#    on a random box of that side inside the layout, with pgbench, one client, --seconds, in two
#    protocols, alternated twice (counted from each connection's seventh run on):
#      cached   -M prepared: after five executions PostgreSQL's plan cache keeps the generic
#               plan (the cells' SP-GiST, then a sort by vehicle_id)
#      planned  -M extended: an unnamed statement, planned with the box each time
#    trackd plans a box each time when it covers more than 256 cells of 1/128° (a square of
#    0.125°; server/http/feature_writer.hpp, kCellsPlannedEachTime) and keeps the cached plan
#    otherwise; the table says which it runs.
# Prints p50 / p99 of each and cached / planned at p50; appends them to bench/RESULTS.md (not
# with --no-record). TRACKD_BENCH_SERVICES=running skips starting the local services.
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

seconds=5
record=1
while (($#)); do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --no-record) record=0; shift ;;
    -h | --help) sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || die "--seconds must be a positive number, got '$seconds'"

bench_scratch vehicle-box-plans
started=$SECONDS
bench_build
[[ "${TRACKD_BENCH_SERVICES:-}" == running ]] || bench_services
machine="$(machine_description)"
commit="$(git_describe)"

# layout NAME: "x0 y0 extent" of the region the vehicles are in, and the box sides to try.
declare -A region sides
region[spread]="5 45 10"
sides[spread]="0.1 0.2 0.5 2 5 10"
region[city]="13.3 52.4 0.28"
sides[city]="0.01 0.05 0.1 0.2 0.28"

# query_file NAME X0 Y0 EXTENT SIDE: the statement on a random box of SIDE inside the region.
query_file() {
  local f="$work/$1.sql" span
  span=$(calc "$4 - $5" "%.6f")
  {
    echo "\\set x0 $2 + random(0, 1000000) * $span / 1000000.0"
    echo "\\set y0 $3 + random(0, 1000000) * $span / 1000000.0"
    echo "\\set x1 :x0 + $5"
    echo "\\set y1 :y0 + $5"
    echo "SELECT vehicle_id, last_updated, geom, speed_kmh, heading_deg, accuracy_m, attributes::text FROM trackd.vehicle_current_state WHERE true AND cell_corner && trackd.cell_corners_for(ST_MakeEnvelope(:x0, :y0, :x1, :y1, 4326)) AND geom && ST_MakeEnvelope(:x0, :y0, :x1, :y1, 4326) ORDER BY vehicle_id LIMIT 101;"
  } >"$f"
  echo "$f"
}

for layout in spread city; do
  db="bench_box_plans_${layout}_$tag"
  new_db "$db"
  say "loading $layout: 100,000 vehicles"
  psql_at "$db" -f "$bench_repo/bench/api/load.sql" >/dev/null
  if [[ "$layout" == city ]]; then
    read -r x0 y0 extent <<<"${region[city]}"
    psql_at "$db" -c "UPDATE trackd.vehicle_current_state SET geom = ST_SetSRID(ST_MakePoint($x0 + random() * $extent, $y0 + random() * $extent, ST_Z(geom)), 4326)" >/dev/null
    psql_at "$db" -c "VACUUM FULL trackd.vehicle_current_state" >/dev/null
    psql_at "$db" -c "ANALYZE trackd.vehicle_current_state" >/dev/null
  fi
  read -r x0 y0 extent <<<"${region[$layout]}"
  for side in ${sides[$layout]}; do
    f="$(query_file "${layout}_$side" "$x0" "$y0" "$extent" "$side")"
    for r in 1 2; do
      pgbench_steady "$db" "$f" prepared "${layout}_${side}_cached_$r" "$seconds"
      pgbench_steady "$db" "$f" extended "${layout}_${side}_planned_$r" "$seconds"
    done
  done
  drop_db "$db"
done

report="$work/report.md"
{
  echo "- commit: $commit"
  echo "- machine: $machine"
  echo "- settings: pgbench, one client, ${seconds}s per run (counted from its seventh transaction), the page statement of"
  echo "  GET /v1/vehicles?bbox=…&limit=100 on a random box of each side; cached = \`-M prepared\`, planned = \`-M extended\`;"
  echo "  alternated twice; 100,000 vehicles: spread = bench/api/load.sql's (10° x 10°), city = in 0.28° x 0.28°"
  echo
  echo "| layout | box side ° | cells | cached p50 / p99 ms (runs) | planned p50 / p99 ms (runs) | cached / planned (p50) | trackd runs |"
  echo "|---|---:|---:|---|---|---:|---|"
  for layout in spread city; do
    for side in ${sides[$layout]}; do
      cells=$(calc "($side * 128) ^ 2" "%.0f")
      choice=cached
      (($(calc "($cells > 256)" "%d"))) && choice=planned
      for r in 1 2; do
        c="$work/${layout}_${side}_cached_$r.kv"
        p="$work/${layout}_${side}_planned_$r.kv"
        echo "| $layout | $side | $cells | $(kv "$c" p50) / $(kv "$c" p99) ($(kv "$c" n)) | $(kv "$p" p50) / $(kv "$p" p99) ($(kv "$p" n)) | $(calc "$(kv "$c" p50) / $(kv "$p" p50)") | $choice |"
      done
    done
  done
  echo
  echo "Took $((SECONDS - started)) s."
} >"$report"
cat "$report"
if ((record)); then
  append_results "Vehicles in a box: cached plans against plans made with the values (bench/vehicle_box_plans.sh)" <"$report"
  say "appended to bench/RESULTS.md"
fi
