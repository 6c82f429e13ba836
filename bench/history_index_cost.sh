#!/usr/bin/env bash
# bench/history_index_cost: what each history index costs trackd end to end
# (docs/benchmarks.md, "What each history index costs trackd end to end").
#
#   bash bench/history_index_cost.sh [--workload fleet|moving|each-vehicle-once] [--messages N]
#                                    [--vehicles N] [--repeat R] [--sets "trackd defer ..."]
#                                    [--no-record]
#
# Produces the messages once (trackd-fleet), then ingests them with trackd from offset 0 into a
# fresh database once per index set, the sets alternated --repeat times (default 2):
#   trackd        the partitions' indexes as migrated: SP-GiST on geom, btree (vehicle_id,
#                 recorded_at DESC), BRINs on recorded_at (V0019) and ingest_batch_id
#   defer         postgis.defer_indexes = true: the open partition's hot set (SP-GiST, hash on
#                 vehicle_id, BRINs on recorded_at and ingest_batch_id), rows in Morton order
#   hash          a hash index on vehicle_id in place of the btree
#   no-vehicle    no index on vehicle_id at all (SP-GiST and the batch BRIN only)
#   bloom         a bloom BRIN on vehicle_id in place of the btree (V0009's, 4-page ranges)
#   brin-only     neither the SP-GiST nor a vehicle index: BRINs on recorded_at and ingest_batch_id
#   cells         hashes on vehicle_id and on the position's geohash cell (ST_GeoHash(geom, 7),
#                 ~150 m), a BRIN on recorded_at: the cheapest per-row indexes for a track and a bbox
#   gin-cells     cells with a GIN (btree_gin, its pending list as gin's) on a 0.01° grid cell in place
#                 of the geohash's hash
#   gin           GINs on hashtext(vehicle_id) and on that cell, a BRIN on recorded_at: entries
#                 wait in each GIN's pending list and are merged BENCH_GIN_PENDING_KB (4096) at a
#                 time; what is left at the end is merged before the run's time is taken
#   no-time-brin  trackd's set without the BRIN on recorded_at (the closed set before V0019)
#   time-btree    trackd's set with a btree on recorded_at in place of its BRIN
#   db-collation  trackd's set with vehicle ids in the database's collation (before V0022) in the
#                 history, the current state and the geofence tables
# (--sets: these, or some of them; trackd's set always runs first, as the reference.)
# The sets after defer are not layouts trackd offers; they are here to price each index (and
# db-collation the byte order of V0022). hash answers a
# vehicle's track out of time order, no-vehicle and brin-only answer a track or a bbox by
# scanning, cells, gin-cells and gin a bbox only through the cells it covers (QGIS's && cannot
# use them), and gin reads its whole pending list for each key a query looks up.
# Each set replaces trackd.history_closed_indexes() in its database (use_history_index_set,
# bench/lib.sh), so trackd's indexer keeps to it.
# Prints rows/s per run, the best of each set and its ratio to trackd's own set, measured in one
# run; appends them to bench/RESULTS.md (not with --no-record). trackd's index maintenance
# summarizes BRIN ranges every postgis.index_check_interval_s (5 s; 30 s before V0020), so a run of
# seconds does a pass or two of that work at most; TRACKD_POSTGIS_INDEX_CHECK_INTERVAL_S=2 counts
# nearly all of it in brin-only's and bloom's figures.
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

workload=fleet
chosen=()
messages=""
vehicles=""
repeat=2
record=1
while (($#)); do
  case "$1" in
    --workload) workload="$2"; shift 2 ;;
    --messages) messages="$2"; shift 2 ;;
    --vehicles) vehicles="$2"; shift 2 ;;
    --repeat) repeat="$2"; shift 2 ;;
    --sets) read -r -a chosen <<<"$2"; shift 2 ;;
    --no-record) record=0; shift ;;
    -h | --help) sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
bench_workload "$workload"
[[ "$repeat" =~ ^[1-9][0-9]*$ ]] || die "--repeat must be a positive number, got '$repeat'"

bench_scratch index-cost

all_sets=(trackd defer hash no-vehicle brin-only bloom cells gin-cells gin no-time-brin time-btree
  db-collation)
sets=(trackd)
for set in "${chosen[@]:-${all_sets[@]}}"; do
  [[ " ${all_sets[*]} " == *" $set "* ]] || die "--sets: '$set' is not one of ${all_sets[*]}"
  [[ "$set" == trackd ]] || sets+=("$set")
done
# The closed set each variant gives its database's partitions (name suffix, definition).
declare -A closed_set=(
  [hash]="('_geom_spgist', 'USING spgist (geom)'), ('_vehicle_hash', 'USING hash (vehicle_id)')"
  [no-vehicle]="('_geom_spgist', 'USING spgist (geom)')"
  [brin-only]="('_recorded_brin', 'USING brin (recorded_at)')"
  [cells]="('_vehicle_hash', 'USING hash (vehicle_id)'), ('_cell_hash', 'USING hash ((ST_GeoHash(geom, 7)))'), ('_recorded_brin', 'USING brin (recorded_at)')"
  [gin-cells]="('_vehicle_hash', 'USING hash (vehicle_id)'), ('_cell_gin', 'USING gin (($grid_cell_key)) $gin_with'), ('_recorded_brin', 'USING brin (recorded_at)')"
  [gin]="('_vehicle_gin', 'USING gin ((hashtext(vehicle_id))) $gin_with'), ('_cell_gin', 'USING gin (($grid_cell_key)) $gin_with'), ('_recorded_brin', 'USING brin (recorded_at)')"
  [no-time-brin]="('_geom_spgist', 'USING spgist (geom) WHERE geom IS NOT NULL'), ('_vehicle_time_idx', '(vehicle_id, recorded_at DESC)')"
  [time-btree]="('_geom_spgist', 'USING spgist (geom) WHERE geom IS NOT NULL'), ('_vehicle_time_idx', '(vehicle_id, recorded_at DESC)'), ('_time_idx', '(recorded_at)')"
  [bloom]="('_geom_spgist', 'USING spgist (geom)'), ('_vehicle_bloom', 'USING brin (vehicle_id text_bloom_ops (n_distinct_per_range = 300, false_positive_rate = 0.01)) WITH (pages_per_range = 4, autosummarize = on)')"
)

# run_set SET I: trackd from offset 0 into a fresh database with that index set; rows/s and
# trackd's CPU in $work/SET_I.kv.
run_set() {
  local set="$1" i="$2" db="bench_index_cost_${tag}_$2" group="bench-index-cost-${tag}-$1-$2"
  local t0 t1 m0 m1 dsn
  new_db "$db"
  [[ "$set" != gin* ]] || psql_at "$db" -c "CREATE EXTENSION IF NOT EXISTS btree_gin" >/dev/null
  [[ -z "${closed_set[$set]:-}" ]] || use_history_index_set "$db" "${closed_set[$set]}"
  [[ "$set" != db-collation ]] || use_database_collation_for_vehicle_ids "$db" \
    vehicle_telemetry_history vehicle_current_state geofence_events geofence_vehicle_state
  dsn="$(dsn_of "$db")"
  say "$set, run $i"
  m0="$(machine_jiffies)"
  t0=$(date +%s.%N)
  TRACKD_PG_DSN="$dsn" TRACKD_KAFKA_BROKERS="$brokers" TRACKD_KAFKA_TOPIC="$topic" \
    TRACKD_KAFKA_GROUP="$group" TRACKD_HTTP_ENABLED=false \
    TRACKD_POSTGIS_DEFER_INDEXES="$([[ "$set" == defer ]] && echo true || echo false)" \
    "$bench_bin/server/trackd" run >"$work/trackd_${set}_$i.log" 2>&1 &
  trackd_pid=$!
  "$bench_bin/bench/trackd-bench-watch" --dsn "$dsn" --group "$group" --topic "$topic" \
    --total "$sent" --interval-ms 50 --timeout-s 1800 >"$work/watch_${set}_$i.out" ||
    die "trackd did not commit all $sent messages (log: $work/trackd_${set}_$i.log)"
  # A GIN's entries wait in its pending list until it is merged (at 4 MB, or by autovacuum):
  # the merge of what is left counts in the set's time.
  [[ "$set" != gin* ]] || psql_at "$db" -c "SELECT gin_clean_pending_list(c.oid) FROM pg_class c
      JOIN pg_am a ON a.oid = c.relam WHERE a.amname = 'gin'" >/dev/null
  t1=$(date +%s.%N)
  m1="$(machine_jiffies)"
  {
    echo "rows_per_s=$(calc "$accepted / ($t1 - $t0)" %.0f)"
    echo "cpu_s_per_m=$(calc "$(cpu_of "$trackd_pid") * 1000000 / $accepted")"
    echo "busy=$(busy_share "$m0" "$m1")"
    echo "indexes=$(psql_at "$db" -c "SELECT string_agg(DISTINCT regexp_replace(c.relname, '^.*_p[0-9]+', ''), ' ' ORDER BY regexp_replace(c.relname, '^.*_p[0-9]+', ''))
        FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid
       WHERE x.indrelid IN (SELECT DISTINCT tableoid FROM trackd.vehicle_telemetry_history)
         AND c.relname ~ '_p[0-9]+_'")"
  } >"$work/${set}_$i.kv"
  stop_trackd || true
  drop_db "$db"
}

started=$SECONDS
bench_build
[[ "${TRACKD_BENCH_SERVICES:-}" == running ]] || bench_services
machine="$(machine_description)"
commit="$(git_describe)"

say "producing $messages messages ($workload, $vehicles vehicles) to $topic"
bench_produce "$topic"

for ((r = 1; r <= repeat; r++)); do
  for set in "${sets[@]}"; do run_set "$set" "$r"; done
done

declare -A best=()
for set in "${sets[@]}"; do
  best[$set]=0
  for ((r = 1; r <= repeat; r++)); do
    v=$(kv "$work/${set}_$r.kv" rows_per_s)
    ((v > best[$set])) && best[$set]=$v
  done
done
report="$work/report.md"
{
  echo "- commit: $commit"
  echo "- machine: $machine"
  echo "- data: workload $workload, $sent messages ($accepted rows), $vehicles vehicles, 12 partitions"
  echo "- command: \`${BENCH_GIN_PENDING_KB:+BENCH_GIN_PENDING_KB=$BENCH_GIN_PENDING_KB }bash bench/history_index_cost.sh --workload $workload --messages $messages --repeat $repeat --sets \"${sets[*]}\"\`"
  echo
  echo "| index set | history partition's indexes | rows/s, each run | best | best / trackd's | trackd CPU s per M rows | machine busy |"
  echo "|---|---|---|---:|---:|---|---|"
  for set in "${sets[@]}"; do
    runs="" cpu="" busy=""
    for ((r = 1; r <= repeat; r++)); do
      runs+="${runs:+, }$(kv "$work/${set}_$r.kv" rows_per_s)"
      cpu+="${cpu:+, }$(kv "$work/${set}_$r.kv" cpu_s_per_m)"
      busy+="${busy:+, }$(kv "$work/${set}_$r.kv" busy)"
    done
    echo "| $set | $(kv "$work/${set}_1.kv" indexes) | $runs | ${best[$set]} | $(calc "${best[$set]} / ${best[trackd]}") | $cpu | $busy |"
  done
  echo
  echo "Rows/s from launch to the last commit, start-up included. Only the ratios of one run count on a shared machine."
} >"$report"
echo
cat "$report"
if ((record)); then
  append_results "bench/history_index_cost.sh --workload $workload" <"$report"
  say "appended to bench/RESULTS.md"
fi
say "done in $((SECONDS - started)) s"
