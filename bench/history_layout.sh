#!/usr/bin/env bash
# bench/history_layout: the history index layouts side by side on the same rows
# (postgis.defer_indexes, docs/benchmarks.md "History index layout").
#
#   bash bench/history_layout.sh [--workload moving|fleet|each-vehicle-once] [--messages N]
#                                [--vehicles N] [--seconds S] [--repeat R] [--no-record]
#
# 1. produces the messages (trackd-fleet), ingests them once with trackd (defaults) and exports
#    its committed batches twice: in (vehicle, time) order (today's sink) and in Morton order
#    (the sink with postgis.defer_indexes);
# 2. the COPY limit of each layout on 2 connections, alternated --repeat times (default 2):
#    today's schema (every index maintained) and the hot layout (BRINs only); each load is kept
#    as the database its queries are measured on;
# 3. the API's and QGIS's history queries (the SQL trackd's API runs, random parameters from a
#    fixed seed) with pgbench, one client, --seconds each (default 5), p50/p99 from pgbench's
#    per-transaction log: on today's layout, on the hot partition, and on the same partition
#    once closed (the closed indexes it lacks built, as trackd's indexer does: since V0013 the
#    btree, the SP-GiST being in both sets);
# 4. the close: the closed indexes built with the statements trackd's indexer runs (CREATE
#    INDEX CONCURRENTLY), timed, while another COPY-limit load writes into a third database;
#    that load's rows/s against the same load alone, before.
# Appends the figures to bench/RESULTS.md (not with --no-record). The machine is shared: read
# the ratios of one run and the spread over repeats, not the absolute figures.
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

workload=moving
messages=""
vehicles=""
seconds=5
repeat=2
record=1
while (($#)); do
  case "$1" in
    --workload) workload="$2"; shift 2 ;;
    --messages) messages="$2"; shift 2 ;;
    --vehicles) vehicles="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    --repeat) repeat="$2"; shift 2 ;;
    --no-record) record=0; shift ;;
    -h | --help) sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
bench_workload "$workload"

bench_scratch layout

started=$SECONDS
bench_build
[[ "${TRACKD_BENCH_SERVICES:-}" == running ]] || bench_services
machine="$(machine_description)"
commit="$(git_describe)"
B="$bench_bin/bench/trackd-bench-copy-limit"

# ---------------------------------------------------------------- data
say "producing $messages messages ($workload, $vehicles vehicles) to $topic"
bench_produce "$topic"
src="bench_layout_src_$tag"
new_db "$src"
bench_ingest_once "$src" "bench-layout-$tag"
"$B" export --dsn "$(dsn_of "$src")" --dir "$work/vehicle" --order vehicle >/dev/null
"$B" export --dsn "$(dsn_of "$src")" --dir "$work/space" --order space >/dev/null
read -r t_min t_max rows < <(psql_at "$src" -F ' ' -c "SELECT extract(epoch FROM min(recorded_at))::int8,
  extract(epoch FROM max(recorded_at))::int8, count(*) FROM trackd.vehicle_telemetry_history")
read -r x0 y0 x1 y1 < <(psql_at "$src" -F ' ' -c "SELECT ST_XMin(e), ST_YMin(e), ST_XMax(e), ST_YMax(e)
  FROM (SELECT ST_Extent(geom)::geometry e FROM trackd.vehicle_telemetry_history) s")
drop_db "$src"
say "$rows rows, recorded $t_min..$t_max, extent $x0 $y0 $x1 $y1"

# ---------------------------------------------------------------- COPY limits
# load NAME DIR LAYOUT: a fresh database NAME loaded from DIR; key=value figures in NAME.kv.
load() {
  local db="bench_layout_$1_$tag"
  new_db "$db"
  # Today's layout is the one the performance issue measured: the GiST on geom (V0013 made it
  # an SP-GiST for every partition, hot or closed).
  if [[ "$3" == closed ]]; then use_today_history_indexes "$db"; fi
  "$B" load --dsn "$(dsn_of "$db")" --dir "$2" --connections 2 --layout "$3" >"$work/$1.kv"
  say "COPY limit $1: $(kv "$work/$1.kv" rows_per_s) rows/s, backend CPU $(kv "$work/$1.kv" backend_cpu_s) s"
}
for ((r = 1; r <= repeat; r++)); do
  load "today$r" "$work/vehicle" closed
  load "hot$r" "$work/space" hot
done
# The last load of each is the database the queries read.
qt="bench_layout_today${repeat}_$tag"
qh="bench_layout_hot${repeat}_$tag"
for ((r = 1; r < repeat; r++)); do
  drop_db "bench_layout_today${r}_$tag"
  drop_db "bench_layout_hot${r}_$tag"
done
psql_at "$qt" -c "VACUUM ANALYZE trackd.vehicle_telemetry_history" >/dev/null
psql_at "$qh" -c "VACUUM ANALYZE trackd.vehicle_telemetry_history" >/dev/null

# ---------------------------------------------------------------- queries
# The statements of server/http (vehicle_service.cpp track, features_service.cpp items and
# their count), with pgbench variables for the parameters.
vmax=$vehicles
qdir="$work/q"
mkdir -p "$qdir"
cat >"$qdir/track.sql" <<EOF
\\set v random(1, $vmax)
SELECT recorded_at, geom, speed_kmh, heading_deg, accuracy_m, ingest_batch_id, kafka_partition, kafka_offset FROM trackd.vehicle_telemetry_history WHERE vehicle_id = 'veh-' || lpad(:v::text, 6, '0') AND recorded_at >= to_timestamp($t_max) - interval '1 hour' AND recorded_at <= to_timestamp($t_max + 1) ORDER BY recorded_at, ingest_batch_id, kafka_partition, kafka_offset LIMIT 1001;
EOF
cat >"$qdir/bbox10min.sql" <<EOF
\\set x random(0, 1000)
\\set y random(0, 1000)
SELECT vehicle_id, recorded_at, geom FROM trackd.vehicle_telemetry_history WHERE geom && ST_MakeEnvelope($x0 + ($x1 - $x0 - 0.01) * :x / 1000.0, $y0 + ($y1 - $y0 - 0.01) * :y / 1000.0, $x0 + ($x1 - $x0 - 0.01) * :x / 1000.0 + 0.01, $y0 + ($y1 - $y0 - 0.01) * :y / 1000.0 + 0.01, 4326) AND recorded_at >= to_timestamp($t_max) - interval '10 minutes' ORDER BY recorded_at, ingest_batch_id, kafka_partition, kafka_offset LIMIT 101;
SELECT count(*) FROM trackd.vehicle_telemetry_history WHERE geom && ST_MakeEnvelope($x0 + ($x1 - $x0 - 0.01) * :x / 1000.0, $y0 + ($y1 - $y0 - 0.01) * :y / 1000.0, $x0 + ($x1 - $x0 - 0.01) * :x / 1000.0 + 0.01, $y0 + ($y1 - $y0 - 0.01) * :y / 1000.0 + 0.01, 4326) AND recorded_at >= to_timestamp($t_max) - interval '10 minutes';
EOF
cat >"$qdir/window1s.sql" <<EOF
\\set t random($t_min, $t_max)
SELECT vehicle_id, recorded_at, geom FROM trackd.vehicle_telemetry_history WHERE recorded_at >= to_timestamp(:t) AND recorded_at <= to_timestamp(:t + 1) ORDER BY recorded_at, ingest_batch_id, kafka_partition, kafka_offset LIMIT 101;
SELECT count(*) FROM trackd.vehicle_telemetry_history WHERE recorded_at >= to_timestamp(:t) AND recorded_at <= to_timestamp(:t + 1);
EOF
cat >"$qdir/ogc_bbox_datetime.sql" <<EOF
\\set x random(0, 1000)
\\set y random(0, 1000)
\\set t random($t_min, $t_max)
SELECT vehicle_id, recorded_at, geom FROM trackd.vehicle_telemetry_history WHERE geom && ST_MakeEnvelope($x0 + ($x1 - $x0 - 0.05) * :x / 1000.0, $y0 + ($y1 - $y0 - 0.05) * :y / 1000.0, $x0 + ($x1 - $x0 - 0.05) * :x / 1000.0 + 0.05, $y0 + ($y1 - $y0 - 0.05) * :y / 1000.0 + 0.05, 4326) AND recorded_at >= to_timestamp(:t) AND recorded_at <= to_timestamp(:t + 10) ORDER BY recorded_at, ingest_batch_id, kafka_partition, kafka_offset LIMIT 101;
SELECT count(*) FROM trackd.vehicle_telemetry_history WHERE geom && ST_MakeEnvelope($x0 + ($x1 - $x0 - 0.05) * :x / 1000.0, $y0 + ($y1 - $y0 - 0.05) * :y / 1000.0, $x0 + ($x1 - $x0 - 0.05) * :x / 1000.0 + 0.05, $y0 + ($y1 - $y0 - 0.05) * :y / 1000.0 + 0.05, 4326) AND recorded_at >= to_timestamp(:t) AND recorded_at <= to_timestamp(:t + 10);
EOF
# QGIS opening the layer: its full extent, every row (geometry and key columns).
cat >"$qdir/full_extent.sql" <<EOF
SELECT count(*), sum(ST_X(geom)) FROM (SELECT geom, vehicle_id, recorded_at FROM trackd.vehicle_telemetry_history WHERE geom && ST_MakeEnvelope($x0, $y0, $x1, $y1, 4326)) s;
EOF
queries=(track bbox10min window1s ogc_bbox_datetime full_extent)

# bench_query DB Q LABEL: pgbench of one query file; p50/p99 in ms into $work/q_LABEL_Q.kv.
bench_query() {
  local db="$1" q="$2" label="$3" dir="$work/pgb_${3}_$2"
  mkdir -p "$dir"
  (cd "$dir" && pgbench -n -h 127.0.0.1 -p "$pg_port" -U postgres -c 1 -T "$seconds" -l \
    --random-seed 42 -f "$qdir/$q.sql" "$db" >"$dir/out" 2>&1) || die "pgbench $q on $db: $(tail -n 3 "$dir/out")"
  cat "$dir"/pgbench_log.* | awk '{ print $3 / 1000 }' | sort -n >"$dir/lat"
  local n
  n=$(wc -l <"$dir/lat")
  {
    echo "n=$n"
    echo "p50=$(awk -v n="$n" 'NR == int(n * 0.50 + 0.5) || (n == 1) { printf "%.2f", $1; exit }' "$dir/lat")"
    echo "p99=$(awk -v n="$n" 'NR == int(n * 0.99 + 0.5) || (n == 1) { printf "%.2f", $1; exit }' "$dir/lat")"
  } >"$work/q_${label}_$q.kv"
}
say "queries: ${queries[*]}, ${seconds}s each, today's layout and the hot partition alternately"
for q in "${queries[@]}"; do
  bench_query "$qt" "$q" today
  bench_query "$qh" "$q" hot
done

# ---------------------------------------------------------------- close
# A third database for the ingest that goes on during the build: the same hot-layout load
# alone first, then beside the build.
say "partition close: the build beside a COPY-limit load"
load during_alone "$work/space" hot
drop_db "bench_layout_during_alone_$tag"
part="$(psql_at "$qh" -c "SELECT tableoid::regclass::text FROM trackd.vehicle_telemetry_history GROUP BY 1 ORDER BY count(*) DESC LIMIT 1")"
part="${part#trackd.}"
# What trackd's indexer runs (server/sink/postgis/history_indexer.cpp): the closed indexes the
# partition lacks, then a drop of the hot ones the closed set does not share.
build_sql="$(psql_at "$qh" -c "SELECT format('CREATE INDEX CONCURRENTLY IF NOT EXISTS %I ON trackd.%I %s', '$part' || suffix, '$part', definition) FROM trackd.history_closed_indexes() WHERE to_regclass(format('trackd.%I', '$part' || suffix)) IS NULL")"
build_names="$(psql_at "$qh" -c "SELECT string_agg(suffix, ', ') FROM trackd.history_closed_indexes() WHERE to_regclass(format('trackd.%I', '$part' || suffix)) IS NULL")"
ingest_db="bench_layout_during_$tag"
new_db "$ingest_db"
# Loads back to back (the same files again: more rows into the same partition) until the build
# is done, so that every one but the last ran beside it.
(
  n=0
  while [[ ! -e "$work/build.done" ]]; do
    n=$((n + 1))
    "$B" load --dsn "$(dsn_of "$ingest_db")" --dir "$work/space" --connections 2 --layout hot >"$work/during_$n.kv"
  done
) &
loader=$!
sleep 0.5
t0=$(date +%s.%N)
build_times=()
while IFS= read -r stmt; do
  s0=$(date +%s.%N)
  psql_at "$qh" -c "$stmt" >/dev/null
  build_times+=("$(calc "$(date +%s.%N) - $s0" %.2f)")
done <<<"$build_sql"
build_s=$(calc "$(date +%s.%N) - $t0" %.2f)
touch "$work/build.done"
wait "$loader"
during_rates=""
for f in "$work"/during_[0-9]*.kv; do during_rates+="$(kv "$f" rows_per_s) "; done
during_first=$(kv "$work/during_1.kv" rows_per_s)
psql_at "$qh" -c "SELECT format('DROP INDEX CONCURRENTLY IF EXISTS trackd.%I', n) FROM trackd.history_partition_indexes(), unnest(hot_present) n WHERE partition_name = '$part'" |
  while IFS= read -r stmt; do psql_at "$qh" -c "$stmt" >/dev/null; done
psql_at "$qh" -c "ANALYZE trackd.vehicle_telemetry_history" >/dev/null
say "built in ${build_s}s (${build_times[*]}); the loads beside it: $during_rates rows/s"

say "queries on the closed partition"
for q in "${queries[@]}"; do bench_query "$qh" "$q" closed; done

# ---------------------------------------------------------------- report
report="$work/report.md"
{
  echo "- commit: $commit"
  echo "- machine: $machine; load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "- data: workload $workload, $sent messages, $rows rows in the history, $vehicles vehicles, recorded over $((t_max - t_min)) s"
  echo "- command: \`bash bench/history_layout.sh --workload $workload --messages $messages --seconds $seconds --repeat $repeat\`"
  echo
  echo "COPY limit, 2 connections, alternated (today: every index, rows in (vehicle, time) order; hot: the BRINs of postgis.defer_indexes, rows in Morton order):"
  echo
  echo "| load | rows/s | seconds | backend CPU s |"
  echo "|---|---:|---:|---:|"
  for ((r = 1; r <= repeat; r++)); do
    for l in today hot; do
      echo "| $l, run $r | $(kv "$work/$l$r.kv" rows_per_s) | $(kv "$work/$l$r.kv" seconds) | $(kv "$work/$l$r.kv" backend_cpu_s) |"
    done
  done
  bt=0 bh=0 ct=999999 ch=999999
  for ((r = 1; r <= repeat; r++)); do
    a=$(kv "$work/today$r.kv" rows_per_s); b=$(kv "$work/hot$r.kv" rows_per_s)
    ((a > bt)) && bt=$a
    ((b > bh)) && bh=$b
    a=$(kv "$work/today$r.kv" backend_cpu_s); b=$(kv "$work/hot$r.kv" backend_cpu_s)
    ct=$(calc "($a < $ct) ? $a : $ct"); ch=$(calc "($b < $ch) ? $b : $ch")
  done
  echo
  echo "- **hot / today rows/s = $(calc "$bh / $bt")** (best of each); backend CPU hot / today = $(calc "$ch / $ct") (lowest of each)"
  echo
  echo "Queries (pgbench, 1 client, ${seconds} s each, random parameters; ms). Today and hot alternated; closed = the hot partition after its closed indexes were built ($build_names) and the other hot ones dropped (its rows stay in Morton order):"
  echo
  echo "| query | today p50 / p99 | hot p50 / p99 | closed p50 / p99 | hot / today p99 | closed / today p99 |"
  echo "|---|---|---|---|---:|---:|"
  for q in "${queries[@]}"; do
    t50=$(kv "$work/q_today_$q.kv" p50); t99=$(kv "$work/q_today_$q.kv" p99)
    h50=$(kv "$work/q_hot_$q.kv" p50); h99=$(kv "$work/q_hot_$q.kv" p99)
    c50=$(kv "$work/q_closed_$q.kv" p50); c99=$(kv "$work/q_closed_$q.kv" p99)
    echo "| $q | $t50 / $t99 | $h50 / $h99 | $c50 / $c99 | $(calc "$h99 / $t99") | $(calc "$c99 / $t99") |"
  done
  echo
  echo "Partition close ($part, $rows rows): the closed indexes built with CREATE INDEX CONCURRENTLY in ${build_s} s ($build_names: ${build_times[*]} s) while COPY-limit loads (hot layout, 2 connections, the same files back to back until the build ended) wrote into another database: the first ran $during_first rows/s against $(kv "$work/during_alone.kv" rows_per_s) rows/s alone just before ($(calc "$during_first / $(kv "$work/during_alone.kv" rows_per_s)")x); every load in turn: $during_rates rows/s (the last one partly after the build). Another database, so this is the CPU the build takes from ingest on 2 shared cores; that a write into the partition being built is not held meanwhile is checked by HistoryIndexesTest.ABuildWhoseBackendIsKilledLeavesAnInvalidIndexThatIsRebuilt."
} >"$report"
echo
cat "$report"
if ((record)); then
  append_results "bench/history_layout.sh" <"$report"
  say "appended to bench/RESULTS.md"
fi
say "done in $((SECONDS - started)) s"
