#!/usr/bin/env bash
# bench/history_plans: the OGC positions collection's statements with a cached (generic) plan
# against plans made with their values, on a live stream's layout (docs/benchmarks.md, "The
# history's statements are planned with their values").
#
#   bash bench/history_plans.sh [--minutes "1 10"] [--seconds 20] [--no-record]
#
# 1. For each number of minutes, a fresh database with one history partition holding that many
#    minutes of a live stream's layout, made in SQL: 20,000 vehicles at 20,000 rows a second, a
#    batch of about 1,000 rows every 50 ms in vehicle order, points spread over 0.28° × 0.28°
#    (1.17M rows a minute); VACUUM ANALYZE, BRINs summarized.
# 2. The page and count statements trackd's API runs for GET /collections/positions/items with a
#    bbox and a datetime (server/http/features_service.cpp; pgbench variables for the values):
#    a random 0.05° box with a random 10 s window, and the whole extent with a random 10 s
#    window. Each with pgbench, one client, --seconds, in two protocols (the runs after the
#    first six of each are counted: from the seventh on a prepared statement runs as it will):
#      cached   -M prepared: prepared once, so after five executions PostgreSQL's plan cache
#               keeps the generic plan (how trackd ran them before 2026-12-07)
#      planned  -M extended: unnamed statements, planned with their values each time (how
#               trackd runs them now)
# Prints p50 / p99 of each and cached / planned at p50, measured side by side; appends them to
# bench/RESULTS.md (not with --no-record). TRACKD_BENCH_SERVICES=running skips starting the
# local services.
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

minutes_list="1 10"
seconds=20
record=1
while (($#)); do
  case "$1" in
    --minutes) minutes_list="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    --no-record) record=0; shift ;;
    -h | --help) sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
for m in $minutes_list; do [[ "$m" =~ ^[1-9][0-9]*$ ]] || die "--minutes takes positive numbers, got '$m'"; done
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || die "--seconds must be a positive number, got '$seconds'"

bench_scratch history-plans
started=$SECONDS
bench_build
[[ "${TRACKD_BENCH_SERVICES:-}" == running ]] || bench_services
machine="$(machine_description)"
commit="$(git_describe)"

# The stream starts at 12:00 UTC yesterday, in a partition of its own.
t0=$(date -u -d 'yesterday 12:00' +%s)

# fill DB MINUTES: the live stream's layout (see the header).
fill() {
  local db="$1" minutes="$2"
  psql_at "$db" <<SQL >/dev/null
SELECT trackd.create_history_partitions(to_timestamp($t0) - interval '1 day', to_timestamp($t0) + interval '1 day');
INSERT INTO trackd.vehicle_telemetry_history (vehicle_id, recorded_at, geom, speed_kmh, heading_deg,
       accuracy_m, attributes, ingest_batch_id, kafka_partition, kafka_offset)
SELECT 'veh-' || lpad(v::text, 6, '0'),
       to_timestamp($t0) + (b * 50 + (random() * 50)::int) * interval '1 millisecond',
       ST_SetSRID(ST_MakePoint(13.2 + random() * 0.28, 52.4 + random() * 0.28, 30), 4326),
       random() * 80, random() * 360, 5, NULL, b + 1, v % 12,
       b * 1000 + row_number() OVER (PARTITION BY b ORDER BY v)
  FROM generate_series(0, 1199) b,
       -- b * 0 ties the subquery to b, so that each batch draws its own vehicles.
       LATERAL (SELECT DISTINCT (1 + floor(random() * 20000))::int AS v
                  FROM generate_series(1, 1000 + b * 0) g) s
 ORDER BY b, v;
INSERT INTO trackd.vehicle_telemetry_history (vehicle_id, recorded_at, geom, speed_kmh, heading_deg,
       accuracy_m, attributes, ingest_batch_id, kafka_partition, kafka_offset)
SELECT vehicle_id, recorded_at + k * interval '1 minute', geom, speed_kmh, heading_deg, accuracy_m,
       attributes, ingest_batch_id + k * 1200, kafka_partition, kafka_offset + k * 1200000
  FROM trackd.vehicle_telemetry_history h, generate_series(1, $minutes - 1) k
 ORDER BY k, h.ctid;
VACUUM ANALYZE trackd.vehicle_telemetry_history;
SELECT trackd.summarize_history_brins(0);
SQL
}

# The statements of server/http/features_service.cpp for a bbox and a datetime.
columns="vehicle_id, recorded_at, geom, speed_kmh, heading_deg, accuracy_m, attributes::text, ingest_batch_id, kafka_partition, kafka_offset"
filters="WHERE true AND geom && ST_MakeEnvelope(:x0, :y0, :x1, :y1, 4326) AND recorded_at >= to_timestamp(:t) AND recorded_at <= to_timestamp(:t1)"
# query_file NAME MINUTES BOX: BOX "small" (a random 0.05° box) or "whole" (13,52,14,53).
query_file() {
  local f="$work/$1.sql" span=$(($2 * 60 - 10))
  {
    echo "\\set t $t0 + random(0, $span)"
    echo "\\set t1 :t + 10"
    if [[ "$3" == small ]]; then
      echo "\\set x0 13.2 + random(0, 230) / 1000.0"
      echo "\\set y0 52.4 + random(0, 230) / 1000.0"
      echo "\\set x1 :x0 + 0.05"
      echo "\\set y1 :y0 + 0.05"
    else
      echo "\\set x0 13"
      echo "\\set y0 52"
      echo "\\set x1 14"
      echo "\\set y1 53"
    fi
    echo "SELECT $columns FROM trackd.vehicle_telemetry_history $filters ORDER BY recorded_at, ingest_batch_id, kafka_partition, kafka_offset LIMIT 101;"
    echo "SELECT count(*) FROM trackd.vehicle_telemetry_history $filters;"
  } >"$f"
  echo "$f"
}

rows_of=()
for m in $minutes_list; do
  db="bench_plans_${m}m_$tag"
  new_db "$db"
  say "filling $db with $m minute(s) of a live stream's layout"
  fill "$db" "$m"
  rows_of+=("$m=$(psql_at "$db" -c 'SELECT count(*) FROM trackd.vehicle_telemetry_history')")
  for box in small whole; do
    f="$(query_file "${box}_$m" "$m" "$box")"
    # Alternated, each twice.
    for r in 1 2; do
      pgbench_steady "$db" "$f" prepared "${m}_${box}_cached_$r" "$seconds"
      pgbench_steady "$db" "$f" extended "${m}_${box}_planned_$r" "$seconds"
    done
  done
  drop_db "$db"
done

report="$work/report.md"
{
  echo "- commit: $commit"
  echo "- machine: $machine"
  echo "- settings: pgbench, one client, ${seconds}s per run (counted from its seventh transaction), the page and count statements of a"
  echo "  positions request with a bbox and a 10 s datetime; cached = \`-M prepared\`, planned ="
  echo "  \`-M extended\`; alternated twice; rows: ${rows_of[*]} (minutes=rows)"
  echo
  echo "| minutes | bbox | cached p50 / p99 ms (runs) | planned p50 / p99 ms (runs) | cached / planned (p50) |"
  echo "|---:|---|---|---|---:|"
  for m in $minutes_list; do
    for box in small whole; do
      for r in 1 2; do
        c="$work/${m}_${box}_cached_$r.kv"
        p="$work/${m}_${box}_planned_$r.kv"
        echo "| $m | $box | $(kv "$c" p50) / $(kv "$c" p99) ($(kv "$c" n)) | $(kv "$p" p50) / $(kv "$p" p99) ($(kv "$p" n)) | $(calc "$(kv "$c" p50) / $(kv "$p" p50)") |"
      done
    done
  done
  echo
  echo "small: a random 0.05° box; whole: the whole extent (13,52,14,53). Took $((SECONDS - started)) s."
} >"$report"
cat "$report"
if ((record)); then
  append_results "OGC positions statements: cached plans against plans made with the values (bench/history_plans.sh)" <"$report"
  say "appended to bench/RESULTS.md"
fi
