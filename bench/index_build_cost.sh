#!/usr/bin/env bash
# bench/index_build_cost: each history index kept row by row against built once over the same
# rows, as a partition's close would (docs/benchmarks.md, "Row by row or built at the close").
#
#   bash bench/index_build_cost.sh [--workload fleet|moving|each-vehicle-once] [--messages N]
#                                  [--vehicles N] [--repeat R] [--order vehicle|space]
#                                  [--no-record]
#
# Produces the messages (trackd-fleet), ingests them once with trackd and exports its committed
# batches (trackd-bench-copy-limit export: each batch's rows in the order trackd's sink sends
# them, (vehicle, time) by default, or with --order space in the Morton order of the position, as
# it does under postgis.defer_indexes). Then, in a scratch database, --repeat times (default 2),
# everything alternated:
#   - the batches COPYed one transaction each, on one connection, into a plain table with the
#     history's columns and no index, and into one table per index that has just that index;
#     the backend's CPU beyond the plain table's is what keeping the index row by row costs;
#   - the index built once over the loaded plain table: CREATE INDEX (the backend's CPU, no
#     parallel workers) and CREATE INDEX CONCURRENTLY (wall time, on an otherwise idle
#     database: what trackd's indexer runs when a partition closes).
# Prints seconds per million rows and the ratio of each build to row by row; appends them to
# bench/RESULTS.md (not with --no-record). CPU figures, so a busy machine moves them less than
# wall times; CONCURRENTLY's wall time includes its waits and its second pass over the table.
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

workload=moving
messages=""
vehicles=""
repeat=2
order=vehicle
record=1
while (($#)); do
  case "$1" in
    --workload) workload="$2"; shift 2 ;;
    --messages) messages="$2"; shift 2 ;;
    --vehicles) vehicles="$2"; shift 2 ;;
    --repeat) repeat="$2"; shift 2 ;;
    --order) order="$2"; shift 2 ;;
    --no-record) record=0; shift ;;
    -h | --help) sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
bench_workload "$workload"
[[ "$repeat" =~ ^[1-9][0-9]*$ ]] || die "--repeat must be a positive number, got '$repeat'"
[[ "$order" == vehicle || "$order" == space ]] || die "--order must be vehicle or space, got '$order'"

bench_scratch build-cost

# The indexes a history partition has had or could have (name, definition). geohash is a btree
# on the position's Morton key (ST_GeoHash interleaves longitude and latitude bits), which a bbox
# could be answered through as a few key ranges. The gin_ ones (btree_gin) keep new entries in a
# pending list of BENCH_GIN_PENDING_KB (4096, PostgreSQL's default) and merge it when it is full;
# what is left at the end is merged before the CPU is read. gin_cell is on a 0.01° grid cell.
indexes=(gist spgist btree hash brin geohash gin_vehicle gin_vehicle_int gin_cell)
declare -A definition=(
  [gist]="USING gist (geom)"
  [spgist]="USING spgist (geom)"
  [btree]="(vehicle_id, recorded_at DESC)"
  [hash]="USING hash (vehicle_id)"
  [brin]="USING brin (recorded_at)"
  [geohash]="((ST_GeoHash(geom, 12) COLLATE \"C\"))"
  [gin_vehicle]="USING gin (vehicle_id) $gin_with"
  [gin_vehicle_int]="USING gin ((hashtext(vehicle_id))) $gin_with"
  [gin_cell]="USING gin (($grid_cell_key)) $gin_with"
)

started=$SECONDS
bench_build
[[ "${TRACKD_BENCH_SERVICES:-}" == running ]] || bench_services
machine="$(machine_description)"
commit="$(git_describe)"

say "producing $messages messages ($workload, $vehicles vehicles) to $topic"
bench_produce "$topic"
src="bench_build_cost_src_$tag"
new_db "$src"
bench_ingest_once "$src" "bench-build-cost-$tag"
"$bench_bin/bench/trackd-bench-copy-limit" export --dsn "$(dsn_of "$src")" --dir "$work/rows" \
  --order "$order" >/dev/null
rows=$(psql_at "$src" -c "SELECT count(*) FROM trackd.vehicle_telemetry_history")
drop_db "$src"
db="bench_build_cost_$tag"
new_db "$db"
psql_at "$db" -c "CREATE EXTENSION IF NOT EXISTS btree_gin" >/dev/null
# The batches in the order trackd committed them (file names start with the batch id).
mapfile -t files < <(find "$work/rows" -name '*.history.copy' | sort -V)
say "$rows rows in ${#files[@]} batches"

# load TABLE INDEX: TABLE made afresh with the history's columns and INDEX (or none), then every
# batch COPYed into it in its own transaction; prints the backend's CPU seconds.
load() {
  local table="$1" index="$2" f
  psql_at "$db" -c "SET client_min_messages = warning" -c "DROP TABLE IF EXISTS $table" \
    -c "CREATE TABLE $table (LIKE trackd.vehicle_telemetry_history)" >/dev/null
  [[ "$index" == none ]] || psql_at "$db" -c "CREATE INDEX ON $table ${definition[$index]}" >/dev/null
  {
    echo "SELECT pg_backend_pid() AS pid \\gset"
    echo "\\setenv BPID :pid"
    for f in "${files[@]}"; do echo "\\copy $table FROM '$f' (FORMAT binary)"; done
    [[ "$index" != gin_* ]] || echo "SELECT gin_clean_pending_list(indexrelid) FROM pg_index WHERE indrelid = '$table'::regclass \\g /dev/null"
    echo "\\! awk -v t=$clk_tck '{ printf \"%.2f\\n\", (\$14 + \$15) / t }' /proc/\$BPID/stat"
  } >"$work/load.sql"
  psql -X -q -v ON_ERROR_STOP=1 "$(dsn_of "$db")" -f "$work/load.sql"
}

# build INDEX: over the plain table bench_plain; prints the backend's CPU seconds before and after
# a CREATE INDEX without parallel workers on one line, then concurrently_s=<the wall time of
# CREATE INDEX CONCURRENTLY>.
build() {
  local index="$1" t0 t1
  psql_at "$db" -c "SET client_min_messages = warning" -c "DROP INDEX IF EXISTS bench_build" >/dev/null
  psql -X -q -v ON_ERROR_STOP=1 "$(dsn_of "$db")" <<EOF
SET max_parallel_maintenance_workers = 0;
SELECT pg_backend_pid() AS pid \\gset
\\setenv BPID :pid
\\! awk -v t=$clk_tck '{ printf "%.2f ", (\$14 + \$15) / t }' /proc/\$BPID/stat
CREATE INDEX bench_build ON bench_plain ${definition[$index]};
\\! awk -v t=$clk_tck '{ printf "%.2f\\n", (\$14 + \$15) / t }' /proc/\$BPID/stat
DROP INDEX bench_build;
EOF
  t0=$(date +%s.%N)
  psql_at "$db" -c "CREATE INDEX CONCURRENTLY bench_build ON bench_plain ${definition[$index]}" >/dev/null
  t1=$(date +%s.%N)
  echo "concurrently_s=$(calc "$t1 - $t0")"
}

per_m() { calc "$1 * 1000000 / $rows"; }
for ((r = 1; r <= repeat; r++)); do
  say "round $r: row by row"
  for index in none "${indexes[@]}"; do
    echo "$index=$(load "bench_$index" "$index")" >>"$work/load_$r.kv"
    [[ "$index" == none ]] || psql_at "$db" -c "DROP TABLE bench_$index" >/dev/null
  done
  psql_at "$db" -c "SET client_min_messages = warning" -c "DROP TABLE IF EXISTS bench_plain" \
    -c "ALTER TABLE bench_none RENAME TO bench_plain" -c "VACUUM ANALYZE bench_plain" >/dev/null
  say "round $r: built once"
  for index in "${indexes[@]}"; do
    {
      read -r c0 c1
      echo "${index}_build=$(calc "$c1 - $c0")"
      read -r line
      echo "${index}_$line"
    } < <(build "$index") >>"$work/build_$r.kv"
  done
done

# best (lowest) of the rounds: KEY FILE_PREFIX
best() {
  local b="" v r
  for ((r = 1; r <= repeat; r++)); do
    v=$(kv "$work/$2_$r.kv" "$1")
    if [[ -z "$b" ]] || (($(calc "$v < $b" %d))); then b=$v; fi
  done
  echo "$b"
}
all() {
  local out="" r
  for ((r = 1; r <= repeat; r++)); do out+="${out:+, }$(per_m "$(kv "$work/$2_$r.kv" "$1")")"; done
  echo "$out"
}
report="$work/report.md"
{
  echo "- commit: $commit"
  echo "- machine: $machine"
  echo "- data: workload $workload, $rows rows in ${#files[@]} batches (trackd's, exported in $order order), $vehicles vehicles"
  echo "- command: \`${BENCH_GIN_PENDING_KB:+BENCH_GIN_PENDING_KB=$BENCH_GIN_PENDING_KB }bash bench/index_build_cost.sh --workload $workload --messages $messages --repeat $repeat --order $order\`"
  echo "- the COPY into a plain table with no index: $(all none load) backend CPU-s per million rows"
  echo
  echo "| index | row by row: CPU-s per M rows (each round) | built once: CREATE INDEX CPU-s per M | CONCURRENTLY, wall s per M | build / row by row (CPU, best of each) |"
  echo "|---|---|---|---|---:|"
  none_best=$(best none load)
  for index in "${indexes[@]}"; do
    rb=""
    for ((r = 1; r <= repeat; r++)); do
      rb+="${rb:+, }$(per_m "$(calc "$(kv "$work/load_$r.kv" "$index") - $(kv "$work/load_$r.kv" none)")")"
    done
    keep=$(calc "$(best "$index" load) - $none_best")
    echo "| ${definition[$index]} | $rb | $(all "${index}_build" build) | $(all "${index}_concurrently_s" build) | $(calc "$(best "${index}_build" build) / $keep") |"
  done
  echo
  echo "Row by row = the table's backend CPU with the index less the same COPY's without one (best of the rounds, each), one transaction per batch on one connection. Built once = over the same rows after the COPY."
} >"$report"
echo
cat "$report"
if ((record)); then
  append_results "bench/index_build_cost.sh --workload $workload" <"$report"
  say "appended to bench/RESULTS.md"
fi
say "done in $((SECONDS - started)) s"
