#!/usr/bin/env bash
# bench/tail_window: a time window at the newest end of a live stream, what a dashboard's "the
# last seconds" asks (docs/benchmarks.md, "New partitions analyzed, summaries every 5 s").
#
#   bash bench/tail_window.sh [--rate 20000] [--duration-s 60] [--vehicles 20000]
#                             [--window-s 2] [--repeat 2] [--no-record]
#
# Two setups, alternated --repeat times, each on a fresh database and topic (so its partition is
# new, as every partition is at the start of its range):
#   trackd   trackd with its defaults: the partition analyzed on the first index maintenance pass
#            after its first rows (V0020), BRIN summaries every postgis.index_check_interval_s (5 s)
#   before   the same binary as before V0020: the database's trackd.analyze_new_history_partitions()
#            replaced by one that does nothing (statistics come when autovacuum gets to the
#            partition), summaries every 30 s
# In each, `trackd run` ingests trackd-fleet's stream (--rate messages/s for --duration-s, the
# timeline from now). From half the run until 5 s before its end, pgbench (one client) counts a
# --window-s window ending 1 s ago: SELECT count(*) FROM trackd.vehicle_telemetry_history WHERE
# recorded_at >= now() - (window + 1) s AND recorded_at < now() - 1 s. Prints p50 / p90 / p99
# per run, then the median of each setup's p99 and their ratio, measured in one run; appends
# them to bench/RESULTS.md (not with --no-record). TRACKD_BENCH_SERVICES=running skips starting
# the local services.
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

rate=20000
duration=60
vehicles=20000
window=2
repeat=2
record=1
while (($#)); do
  case "$1" in
    --rate) rate="$2"; shift 2 ;;
    --duration-s) duration="$2"; shift 2 ;;
    --vehicles) vehicles="$2"; shift 2 ;;
    --window-s) window="$2"; shift 2 ;;
    --repeat) repeat="$2"; shift 2 ;;
    --no-record) record=0; shift ;;
    -h | --help) sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
positive() { [[ "$2" =~ ^[1-9][0-9]*$ ]] || die "$1 must be a positive number, got '$2'"; }
positive --rate "$rate"
positive --duration-s "$duration"
positive --vehicles "$vehicles"
positive --window-s "$window"
positive --repeat "$repeat"
((duration >= 20)) || die "--duration-s must be at least 20 (the query runs from half the run to 5 s before its end)"
interval_ms=$((vehicles * 1000 / rate))
((interval_ms >= 1)) || interval_ms=1

bench_scratch tail-window
started=$SECONDS
bench_build
# TRACKD_BENCH_SERVICES=running: the services are up and managed by someone else; leave them be.
[[ "${TRACKD_BENCH_SERVICES:-}" == running ]] || bench_services
machine="$(machine_description)"
commit="$(git_describe)"

cat >"$work/window.sql" <<SQL
SELECT count(*) FROM trackd.vehicle_telemetry_history
 WHERE recorded_at >= now() - interval '$((window + 1)) s' AND recorded_at < now() - interval '1 s';
SQL

# run_setup SETUP I: one live run; "p50 p90 p99 queries rows" in $work/SETUP_I.kv.
run_setup() {
  local setup="$1" i="$2" db="bench_tail_${tag}_$1_$2" group="bench-tail-${tag}-$1-$2" t="$topic-$1-$2"
  local interval=5 qdir n p50 p90 p99
  new_db "$db"
  if [[ "$setup" == before ]]; then
    interval=30
    psql_at "$db" -c "DROP FUNCTION trackd.analyze_new_history_partitions(int, int)" \
      -c "CREATE FUNCTION trackd.analyze_new_history_partitions(p_grace_s int, p_lock_timeout_ms int)
          RETURNS int LANGUAGE sql AS 'SELECT 0'" >/dev/null
  fi
  scratch_topics+=("$t")
  create_topic "$t" 12
  TRACKD_PG_DSN="$(dsn_of "$db")" TRACKD_KAFKA_BROKERS="$brokers" TRACKD_KAFKA_TOPIC="$t" \
    TRACKD_KAFKA_GROUP="$group" TRACKD_HTTP_ENABLED=false \
    TRACKD_POSTGIS_INDEX_CHECK_INTERVAL_S="$interval" \
    "$bench_bin/server/trackd" run >"$work/trackd_${setup}_$i.log" 2>&1 &
  trackd_pid=$!
  sleep 3
  "$bench_bin/tools/trackd-fleet" --brokers "$brokers" --topic "$t" --vehicles "$vehicles" \
    --rate "$rate" --duration-s "$duration" --start now --interval-ms "$interval_ms" --quiet \
    >"$work/fleet_${setup}_$i.log" 2>&1 &
  local fleet_pid=$!
  sleep $((duration / 2))
  qdir="$work/pgbench_${setup}_$i"
  mkdir -p "$qdir"
  (cd "$qdir" && pgbench -n -c 1 -T $((duration / 2 - 5)) -l -f "$work/window.sql" "$(dsn_of "$db")" \
    >out.txt 2>&1) || die "pgbench failed: $(tail -n 3 "$qdir/out.txt")"
  wait "$fleet_pid" || die "trackd-fleet failed: $(tail -n 5 "$work/fleet_${setup}_$i.log")"
  sleep 3
  stop_trackd || true
  n=$(cat "$qdir"/pgbench_log.* | wc -l)
  ((n > 1)) || die "pgbench ran $n queries"
  read -r p50 p90 p99 <<<"$(pg_percentiles "$qdir"/pgbench_log.*)"
  {
    echo "p50=$p50"
    echo "p90=$p90"
    echo "p99=$p99"
    echo "queries=$n"
    echo "rows=$(psql_at "$db" -c 'SELECT count(*) FROM trackd.vehicle_telemetry_history')"
  } >"$work/${setup}_$i.kv"
  drop_db "$db"
  say "$setup run $i: p50 $(kv "$work/${setup}_$i.kv" p50) / p90 $(kv "$work/${setup}_$i.kv" p90) / p99 $(kv "$work/${setup}_$i.kv" p99) ms over $n queries"
}

for i in $(seq "$repeat"); do
  for setup in trackd before; do run_setup "$setup" "$i"; done
done

median_p99() {
  local setup="$1"
  for f in "$work/${setup}"_*.kv; do kv "$f" p99; done | sort -n |
    awk '{ a[NR] = $1 } END { printf "%.1f", (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }'
}
p99_trackd="$(median_p99 trackd)"
p99_before="$(median_p99 before)"

report="$work/report.md"
{
  echo "- commit: $commit"
  echo "- machine: $machine"
  echo "- settings: $rate messages/s for ${duration}s, $vehicles vehicles (interval ${interval_ms} ms), 12 partitions; a ${window} s window ending 1 s ago, pgbench with one client from $((duration / 2)) s to $((duration - 5)) s into the stream; setups alternated $repeat times"
  echo
  echo "| setup | run | p50 ms | p90 ms | p99 ms | queries | history rows |"
  echo "|---|---:|---:|---:|---:|---:|---:|"
  for i in $(seq "$repeat"); do
    for setup in trackd before; do
      f="$work/${setup}_$i.kv"
      echo "| $setup | $i | $(kv "$f" p50) | $(kv "$f" p90) | $(kv "$f" p99) | $(kv "$f" queries) | $(kv "$f" rows) |"
    done
  done
  echo
  echo "- p99, median of the runs: trackd $p99_trackd ms, before $p99_before ms; **before / trackd $(calc "$p99_before / $p99_trackd")**"
} >"$report"
echo
echo "==== bench/tail_window ===="
cat "$report"
if ((record)); then
  append_results "bench/tail_window.sh" <"$report"
  say "appended to bench/RESULTS.md"
fi
say "done in $((SECONDS - started)) s"
