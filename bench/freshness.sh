#!/usr/bin/env bash
# bench/freshness: how long a position takes from the producer to a committed PostgreSQL
# transaction, at a fixed rate (docs/benchmarks.md).
#
#   bash bench/freshness.sh [--rate R] [--duration-s 60] [--vehicles 20000] [--partitions 12]
#                           [--skip-first-s 0] [--today-current-state]
#                           [--dirty-background-mb N] [--no-record]
#
# trackd runs (defaults) on a fresh database and topic; once it owns every partition the fleet
# produces at R messages/s for --duration-s seconds (timeline starting now, the interval chosen
# so that simulated time keeps pace with the clock). Without --rate, R is half of the newest
# maximum bench/ingest.sh recorded in bench/RESULTS.md (trackd's rows/s after its first commit).
# --today-current-state runs trackd on the current state's layout before V0011 (indexed geom and
# last_updated: no HOT updates).
# --dirty-background-mb N sets the kernel's vm.dirty_background_bytes to N MiB for the run (as
# root; put back afterwards): Linux then writes dirty page cache back as it goes, where by default
# it lets it pile up for vm.dirty_expire_centisecs (30 s) and writes it at once, and a COMMIT's
# WAL flush waits behind that (docs/benchmarks.md, "Freshness: the kernel's writeback every
# 30 s").
#
# Method: trackd stores no commit time, so trackd-bench-watch polls trackd.kafka_offsets every
# 20 ms on its own connection and logs when each partition's committed offset moved; every
# message is then read back from Kafka for its timestamp (CreateTime, set by the producer).
# Freshness of a message = the first poll that saw its offset committed − its Kafka timestamp:
# an upper bound, at most one poll interval (20 ms) late. Reported: p50, p90, p99, p99.9, max.
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

rate=""
duration=60
vehicles=20000
partitions=12
skip_first=0
today_current_state=0
dirty_background_mb=""
record=1
while (($#)); do
  case "$1" in
    --rate) rate="$2"; shift 2 ;;
    --duration-s) duration="$2"; shift 2 ;;
    --vehicles) vehicles="$2"; shift 2 ;;
    --partitions) partitions="$2"; shift 2 ;;
    --skip-first-s) skip_first="$2"; shift 2 ;;
    --today-current-state) today_current_state=1; shift ;;
    --dirty-background-mb) dirty_background_mb="$2"; shift 2 ;;
    --no-record) record=0; shift ;;
    -h | --help) sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done

rate_source="given"
if [[ -z "$rate" ]]; then
  max="$(sed -n 's/^<!-- ingest-max-rows-per-s: \([0-9]*\) -->$/\1/p' "$bench_results" 2>/dev/null | tail -n 1)"
  [[ -n "$max" ]] || die "no maximum recorded in bench/RESULTS.md yet: run bench/ingest.sh first, or pass --rate"
  rate=$((max / 2))
  rate_source="half of the newest bench/ingest.sh maximum ($max rows/s)"
fi
vm=/proc/sys/vm
if [[ -n "$dirty_background_mb" ]]; then
  [[ "$dirty_background_mb" =~ ^[1-9][0-9]*$ ]] ||
    die "--dirty-background-mb must be a positive number of MiB, got '$dirty_background_mb'"
  [[ -w "$vm/dirty_background_bytes" ]] || die "--dirty-background-mb needs root (it writes $vm/dirty_background_bytes)"
fi
interval_ms=$((vehicles * 1000 / rate))
((interval_ms >= 1)) || interval_ms=1

tag="$$"
topic="bench-fresh-$tag"
db="bench_fresh_$tag"
group="bench-fresh-$tag"
work="$(mktemp -d "${TMPDIR:-/tmp}/trackd-bench-fresh.XXXXXX")"
trackd_pid=""
watch_pid=""
dirty_pid=""
saved_background_bytes=""
saved_background_ratio=""
cleanup() {
  local rc=$?
  [[ -n "$watch_pid" ]] && kill -TERM "$watch_pid" 2>/dev/null && wait "$watch_pid" 2>/dev/null
  [[ -n "$dirty_pid" ]] && kill -TERM "$dirty_pid" 2>/dev/null && wait "$dirty_pid" 2>/dev/null
  # Writing one of the pair zeroes the other, so only the one that was set goes back.
  if [[ "$saved_background_bytes" == 0 ]]; then
    echo "$saved_background_ratio" >"$vm/dirty_background_ratio"
  elif [[ -n "$saved_background_bytes" ]]; then
    echo "$saved_background_bytes" >"$vm/dirty_background_bytes"
  fi
  [[ -z "$trackd_pid" ]] || (stop_trackd) || true  # a subshell: see bench_scratch_cleanup
  drop_db "$db"
  delete_topic "$topic"
  if ((rc != 0)); then say "failed (exit $rc); logs kept in $work"; else rm -rf -- "$work"; fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

started=$SECONDS
bench_build
bench_services
machine="$(machine_description)"
commit="$(git_describe)"
trackd_settings="$(env | grep -E '^TRACKD_(BATCH|VALIDATE|POSTGIS|KAFKA_PROPERTIES)_' | sort | tr '\n' ' ' || true)"

if [[ -n "$dirty_background_mb" ]]; then
  saved_background_bytes="$(cat "$vm/dirty_background_bytes")"
  saved_background_ratio="$(cat "$vm/dirty_background_ratio")"
  echo $((dirty_background_mb * 1048576)) >"$vm/dirty_background_bytes"
fi
create_topic "$topic" "$partitions"
create_db "$db"
if ((today_current_state)); then
  use_today_current_state "$db"
  trackd_settings+="current state as before V0011 (--today-current-state) "
fi
dsn="$(dsn_of "$db")"
say "trackd: starting on $db, topic $topic"
TRACKD_PG_DSN="$dsn" TRACKD_KAFKA_BROKERS="$brokers" TRACKD_KAFKA_TOPIC="$topic" \
  TRACKD_KAFKA_GROUP="$group" TRACKD_HTTP_ENABLED=false \
  "$bench_bin/server/trackd" run >"$work/trackd.log" 2>&1 &
trackd_pid=$!
for _ in $(seq 300); do
  claimed="$(psql_at "$db" -c "SELECT count(*) FROM trackd.kafka_offsets WHERE consumer_group = '$group'" 2>/dev/null || echo 0)"
  ((claimed >= partitions)) && break
  kill -0 "$trackd_pid" 2>/dev/null || die "trackd exited: $(tail -n 5 "$work/trackd.log")"
  sleep 0.1
done
((claimed >= partitions)) || die "trackd did not claim the $partitions partitions within 30 s"
sleep 1 # let the consumer fetch from every partition

"$bench_bin/bench/trackd-bench-watch" --dsn "$dsn" --group "$group" --topic "$topic" \
  --log "$work/commits.log" --interval-ms 20 --timeout-s $((duration + 600)) >"$work/watch.out" &
watch_pid=$!
# The page cache waiting to be written back, each second while the fleet produces.
(while :; do awk '/^Dirty:/ { print $2 }' /proc/meminfo; sleep 1; done) >"$work/dirty_kib.txt" &
dirty_pid=$!
m0="$(machine_jiffies)"
c0="$(cpu_of "$trackd_pid")"
pg0="$(pg_cpu_total)"
say "producing $rate messages/s for ${duration}s ($vehicles vehicles, interval ${interval_ms} ms, $rate_source)"
"$bench_bin/tools/trackd-fleet" --brokers "$brokers" --topic "$topic" --vehicles "$vehicles" \
  --rate "$rate" --duration-s "$duration" --start now --interval-ms "$interval_ms" --quiet \
  --summary-json "$work/fleet.json" >"$work/fleet.log" 2>&1 || die "trackd-fleet failed: $(tail -n 5 "$work/fleet.log")"
sent=$(jq -r .sent "$work/fleet.json")
elapsed=$(jq -r .elapsed_s "$work/fleet.json")
"$bench_bin/bench/trackd-bench-watch" --dsn "$dsn" --group "$group" --topic "$topic" \
  --total "$sent" --interval-ms 20 --timeout-s 300 >/dev/null ||
  die "trackd did not commit all $sent messages within 300 s after the fleet stopped"
sleep 0.1
m1="$(machine_jiffies)"
c1="$(cpu_of "$trackd_pid")"
pg1="$(pg_cpu_total)"
trackd_rss_kib="$(peak_rss_kib "$trackd_pid")"
kill -TERM "$dirty_pid"
wait "$dirty_pid" || true
dirty_pid=""
kill -TERM "$watch_pid"
wait "$watch_pid" || true
watch_pid=""
# What a live stream costs the database, by statement (batches are small and hold each vehicle
# about once, unlike a backlog's).
psql -X -P pager=off "$dsn" -c "
  SELECT calls, round(total_exec_time::numeric / 1000, 2) AS total_s,
         round((100 * total_exec_time / sum(total_exec_time) OVER ())::numeric, 1) AS pct, rows,
         left(regexp_replace(query, '\\s+', ' ', 'g'), 70) AS query
    FROM pg_stat_statements
   WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
     AND query NOT LIKE '%kafka_offsets WHERE consumer_group%' AND query NOT LIKE '--%'
     AND query NOT LIKE '%pg_stat_statements%'
   ORDER BY total_exec_time DESC LIMIT 6" >"$work/statements.txt" 2>&1 || true
# The share of current-state updates that were HOT (V0011, V0015) and the table's size: an
# update that finds no room on its row's page writes index entries and grows the table.
current_state=$(psql_at "$db" -c "
  SELECT coalesce(round(n_tup_hot_upd::numeric / nullif(n_tup_upd, 0), 3)::text, 'none') || ' of ' ||
         n_tup_upd || ' updates HOT; ' || n_live_tup || ' vehicles in ' ||
         pg_relation_size('trackd.vehicle_current_state') / 8192 || ' pages'
    FROM pg_stat_user_tables WHERE relid = 'trackd.vehicle_current_state'::regclass" 2>/dev/null || echo '?')
stop_trackd || true

"$bench_bin/bench/trackd-bench-freshness" --brokers "$brokers" --topic "$topic" \
  --log "$work/commits.log" --skip-first-s "$skip_first" --series "$work/series.txt" \
  >"$work/fresh.out" ||
  die "freshness report failed: $(cat "$work/fresh.out")"
busy=$(busy_share "$m0" "$m1")
achieved=$(calc "$sent / $elapsed" %.0f)

report="$work/report.md"
{
  echo "- commit: $commit"
  echo "- machine: $machine"
  echo "- settings: $rate messages/s asked ($rate_source), $achieved/s achieved, for $elapsed s ($sent messages), $vehicles vehicles, $partitions partitions, bad share 0.01; trackd defaults${trackd_settings:+ except $trackd_settings}"
  echo "- method: commit time = first 20 ms poll of trackd.kafka_offsets that saw the message's offset committed; minus the Kafka CreateTime$( [[ "$skip_first" != 0 ]] && echo "; the first ${skip_first} s left out (warm-up)")"
  echo
  echo "| messages measured | p50 ms | p90 ms | p99 ms | p99.9 ms | max ms | mean ms |"
  echo "|---:|---:|---:|---:|---:|---:|---:|"
  echo "| $(kv "$work/fresh.out" measured) | $(kv "$work/fresh.out" p50_ms) | $(kv "$work/fresh.out" p90_ms) | $(kv "$work/fresh.out" p99_ms) | $(kv "$work/fresh.out" p999_ms) | $(kv "$work/fresh.out" max_ms) | $(kv "$work/fresh.out" mean_ms) |"
  echo
  echo "- kept up: median $(kv "$work/fresh.out" p50_first_10s_ms) ms for the first 10 s produced, $(kv "$work/fresh.out" p50_last_10s_ms) ms for the last 10 s (it grows when trackd falls behind)"
  echo "- p99 of each second of production, in order (ms): $(awk '{ printf "%s%.0f", (NR > 1 ? " " : ""), $4 }' "$work/series.txt")"
  echo "- kernel writeback: vm.dirty_background_bytes $(cat "$vm/dirty_background_bytes")${dirty_background_mb:+ (--dirty-background-mb)}, dirty_background_ratio $(cat "$vm/dirty_background_ratio"), dirty_expire_centisecs $(cat "$vm/dirty_expire_centisecs"); dirty page cache at most $(sort -n "$work/dirty_kib.txt" | tail -n 1 | awk '{ printf "%.0f", $1 / 1024 }') MiB during the run"
  echo "- batches: $(psql_at "$db" -c 'SELECT count(DISTINCT ingest_batch_id) FROM trackd.vehicle_telemetry_history' 2>/dev/null || echo '?'); the database's statements (pg_stat_statements):"
  echo
  echo '```'
  cat "$work/statements.txt"
  echo '```'
  echo
  echo "- current state: $current_state"
  echo "- trackd: CPU $(calc "$c1 - $c0") s, PostgreSQL $(calc "$pg1 - $pg0") s over the run; peak RSS $(calc "$trackd_rss_kib / 1024" %.0f) MiB; machine busy $(calc "$busy * 100" %.0f)%, other processes $(calc "$(busy_seconds "$m0" "$m1") - ($c1 - $c0) - ($pg1 - $pg0)") CPU-s"
} >"$report"
echo
echo "==== bench/freshness ===="
cat "$report"
if ((record)); then
  append_results "bench/freshness.sh" <"$report"
  say "appended to bench/RESULTS.md"
fi
say "done in $((SECONDS - started)) s"
