#!/usr/bin/env bash
# bench/ingest: trackd end to end against the COPY limit and against the usual Python consumer,
# over the same pre-produced messages, in one run (docs/benchmarks.md).
#
#   bash bench/ingest.sh [--workload fleet|each-vehicle-once|moving] [--messages N] [--vehicles N] [--partitions N] [--bad-share F]
#                        [--repeat R] [--python-seconds S] [--python-messages N] [--no-python]
#                        [--profile [--variant-repeat 3] [--variant-connections 1]] [--no-record]
#                        [--hot]
#   ZONES=1000 bash bench/ingest.sh --messages 300000 --no-python   (or --zones N)
#   bash bench/ingest.sh --format protobuf --messages 300000
#
# 1. builds what it needs (release preset), starts the local services if they are not running,
#    creates a fresh topic and pre-produces the messages with trackd-fleet (default 2,000,000
#    messages, 20,000 vehicles, 12 partitions, 1% bad);
# 2. trackd: `trackd run` into a fresh database from offset 0 until the offsets stored in
#    trackd.kafka_offsets reach the end of the topic: rows/s, peak RSS, CPU per million rows
#    (trackd, its PostgreSQL backends, the whole cluster, Kafka), CPU per thread;
# 3. the COPY limit: trackd's committed batches exported as binary COPY files and loaded into a
#    fresh database batch by batch — COPY + the same current-state upsert, nothing else — on as
#    many connections as trackd's batch.writers, and on one;
#    steps 2 and 3 alternate --repeat times (default 3; the best of each counts: the machine is
#    shared, and other processes' CPU during each step is reported);
# 4. the usual Python consumer (bench/python_consumer.py) into a fresh database, time-boxed to
#    --python-seconds (default 180) and stated as such;
# 5. prints the ratios and appends the figures to bench/RESULTS.md (not with --no-record).
# --profile (one repetition) adds: perf (cpu-clock) of trackd's threads and of its PostgreSQL
# writer backends, pg_stat_statements, WAL and checkpoint counters, EXPLAIN (ANALYZE, BUFFERS,
# WAL) of the upsert, relation sizes, and the COPY limit again without the upsert and without
# each index and with other schema choices, to attribute their cost (each variant
# --variant-repeat times on --variant-connections connections; the lowest backend CPU counts).
#
# --hot adds the history index layout of postgis.defer_indexes to every repetition: trackd with
# TRACKD_POSTGIS_DEFER_INDEXES=true (open partitions with BRINs only, rows in Morton order),
# and its own COPY limit (the same rows exported in Morton order, loaded with --layout hot), beside
# today's; the time-order limit is left out then (docs/benchmarks.md "History index layout").
#
# With ZONES=N (or --zones N) the run is a side-by-side of geofence event detection instead:
# after producing, trackd runs alternately into a database without zones and one with N zones
# (random ~900 m squares over the fleet's city, fixed seed), --repeat times each, and the ratio
# of the best rows/s of each is printed and recorded (no COPY limit, no Python consumer).
#
# With --format protobuf the run is a side-by-side of payload formats instead: the same fleet
# stream (same seed) is produced as JSON to one topic and as plain Protobuf (trackd.v1.Position)
# to another, trackd ingests each alternately, --repeat times, and the ratio of the best rows/s
# and of the poll thread's CPU per million messages is printed and recorded.
#
# Environment: TRACKD_BATCH_* and other TRACKD_* settings reach trackd (and are recorded);
# TRACKD_BENCH_BIN / TRACKD_BENCH_LABEL measure binaries built elsewhere (bench/lib.sh);
# TRACKD_BENCH_SERVICES=running skips starting the local services (they are up already).
# Never stops or resets the shared services; its databases (bench_*_<pid>) and topic
# (bench-ingest-<pid>) are dropped at the end, whatever happens.
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

messages=""
vehicles=""
workload=fleet
duplicate_share=""
partitions=12
bad_share=0.01
repeat=3
python_seconds=180
python_messages=0
run_python=1
profile=0
variant_repeat=3
variant_connections=1
record=1
zones="${ZONES:-0}"
format=json
hot=0
while (($#)); do
  case "$1" in
    --workload) workload="$2"; shift 2 ;;
    --messages) messages="$2"; shift 2 ;;
    --vehicles) vehicles="$2"; shift 2 ;;
    --partitions) partitions="$2"; shift 2 ;;
    --bad-share) bad_share="$2"; shift 2 ;;
    --repeat) repeat="$2"; shift 2 ;;
    --python-seconds) python_seconds="$2"; shift 2 ;;
    --python-messages) python_messages="$2"; shift 2 ;;
    --no-python) run_python=0; shift ;;
    --profile) profile=1; shift ;;
    --variant-repeat) variant_repeat="$2"; shift 2 ;;
    --variant-connections) variant_connections="$2"; shift 2 ;;
    --no-record) record=0; shift ;;
    --zones) zones="$2"; shift 2 ;;
    --format) format="$2"; shift 2 ;;
    --hot) hot=1; shift ;;
    -h | --help) sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
# Workloads (docs/benchmarks.md): the fleet mix; every vehicle id once (every row reaches the
# current-state upsert, which inserts a new row each time); 10,000 vehicles moving (few
# current-state rows per batch: light rows).
case "$workload" in
  fleet) messages="${messages:-2000000}"; vehicles="${vehicles:-20000}" ;;
  each-vehicle-once)
    messages="${messages:-1000000}"
    vehicles="${vehicles:-$messages}"
    ((vehicles >= messages)) || die "--workload each-vehicle-once needs --vehicles >= --messages"
    duplicate_share=0 # a duplicate would send a vehicle twice
    ;;
  moving) messages="${messages:-1000000}"; vehicles="${vehicles:-10000}" ;;
  *) die "--workload: fleet, each-vehicle-once or moving, not '$workload'" ;;
esac
[[ "$format" == json || "$format" == protobuf ]] || die "--format must be json or protobuf"
((profile)) && repeat=1
if ((profile)) && ! command -v perf >/dev/null; then
  echo "bench/ingest.sh: --profile needs perf (Debian linux-perf, in scripts/setup.sh)" >&2
  exit 2
fi

tag="$$"
topic="bench-ingest-$tag"
pb_topic="bench-ingest-pb-$tag"
# The topic and kafka.format of the next run_trackd.
run_topic="$topic"
run_format=json
work="$(mktemp -d "${TMPDIR:-/tmp}/trackd-bench-ingest.XXXXXX")"
trackd_pid=""
dbs=()

cleanup() {
  local rc=$? db
  [[ -z "$trackd_pid" ]] || (stop_trackd) || true  # a subshell: see bench_scratch_cleanup
  for db in "${dbs[@]}"; do drop_db "$db"; done
  delete_topic "$topic"
  [[ "$format" == protobuf ]] && delete_topic "$pb_topic"
  if ((rc != 0)); then
    say "failed (exit $rc); logs kept in $work"
  else
    rm -rf -- "$work"
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The statements of one database, by total time (pg_stat_statements).
statements_of() {
  psql -X -P pager=off "$(dsn_of "$1")" -c "
    SELECT calls, round(total_exec_time::numeric / 1000, 2) AS total_s,
           round((100 * total_exec_time / sum(total_exec_time) OVER ())::numeric, 1) AS pct,
           rows, pg_size_pretty(wal_bytes) AS wal, wal_fpi,
           shared_blks_hit AS hit, shared_blks_dirtied AS dirtied,
           left(regexp_replace(query, '\\s+', ' ', 'g'), 80) AS query
      FROM pg_stat_statements
     WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
       AND query NOT LIKE '%pg_stat_activity%' AND query NOT LIKE '%FROM trackd.kafka_offsets WHERE consumer_group%'
       AND query NOT LIKE '--%' AND query NOT LIKE '%pg_stat_statements%'
     ORDER BY total_exec_time DESC LIMIT 10"
}

# The statements of one database, grouped by kind, with their share of the wall time of
# CONNECTIONS connections over SECONDS: how busy the connections were inside statements (the
# rest is round trips, the client's own work and waiting for the next batch). Key=value lines.
statement_shares() {
  local db="$1" seconds="$2" conns="$3"
  psql_at "$db" -F '=' -c "
    WITH s AS (
      SELECT CASE WHEN query LIKE 'COPY trackd.vehicle_telemetry_history%' THEN 'copy_history'
                  WHEN query LIKE 'COPY current_stage%' THEN 'copy_stage'
                  WHEN query LIKE 'COPY trackd.vehicle_current_state%' THEN 'copy_current'
                  WHEN query LIKE 'INSERT INTO trackd.vehicle_current_state%'
                    OR query LIKE 'UPDATE trackd.vehicle_current_state%' THEN 'upsert'
                  WHEN query ILIKE 'commit%' THEN 'commit'
                  WHEN query LIKE 'UPDATE trackd.kafka_offsets%' THEN 'offsets'
                  WHEN query ILIKE 'begin%' OR query LIKE 'SELECT nextval%' THEN 'begin'
                  ELSE 'other' END AS kind, calls, total_exec_time, rows
        FROM pg_stat_statements
       WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
         AND query NOT LIKE '%pg_stat_activity%' AND query NOT LIKE '%pg_stat_statements%'
         AND query NOT LIKE '%FROM trackd.kafka_offsets WHERE consumer_group%'
         AND query NOT LIKE '--%' AND query NOT ILIKE 'set %' AND query NOT ILIKE 'create %'
         AND query NOT ILIKE 'drop %' AND query NOT ILIKE 'alter %'
         -- this script's own counts after trackd's run (0.2-0.4 s on a million rows)
         AND query NOT IN ('SELECT count(*) FROM trackd.vehicle_telemetry_history',
                           'SELECT count(*) FROM trackd.dead_letters',
                           'SELECT count(DISTINCT ingest_batch_id) FROM trackd.vehicle_telemetry_history'))
    SELECT 'stmt_' || kind || '_s', round(sum(total_exec_time)::numeric / 1000, 3)::text FROM s GROUP BY kind
    UNION ALL SELECT 'stmt_calls', sum(calls)::text FROM s
    UNION ALL SELECT 'stmt_stage_rows', coalesce(sum(rows), 0)::text FROM s WHERE kind = 'copy_stage'
    UNION ALL SELECT 'stmt_copy_current_rows', coalesce(sum(rows), 0)::text FROM s WHERE kind = 'copy_current'
    UNION ALL SELECT 'stmt_busy_share', round((sum(total_exec_time) / 1000 / ($seconds * $conns))::numeric, 3)::text FROM s
    UNION ALL SELECT 'hot_update_share', coalesce(round(n_tup_hot_upd::numeric / nullif(n_tup_upd, 0), 3)::text, 'none')
      FROM pg_stat_user_tables WHERE relid = 'trackd.vehicle_current_state'::regclass
    -- Rows the current-state statements changed (trackd's UPDATE and upsert, the loader's
    -- upsert), from the table's counters less the rows COPYed straight in. The counters also
    -- count an UPDATE rolled back to its savepoint (a batch that falls back to the upsert).
    UNION ALL SELECT 'stmt_upsert_rows', (n_tup_upd + n_tup_ins
        - (SELECT coalesce(sum(rows), 0) FROM s WHERE kind = 'copy_current'))::text
      FROM pg_stat_user_tables WHERE relid = 'trackd.vehicle_current_state'::regclass"
}

pg_counters() {
  psql_at "$1" -F ' ' -c 'SELECT w.wal_records, w.wal_fpi, w.wal_bytes, w.wal_buffers_full, w.wal_write,
      w.wal_sync, b.checkpoints_timed, b.checkpoints_req, pg_current_wal_lsn() - $$0/0$$::pg_lsn
    FROM pg_stat_wal w, pg_stat_bgwriter b'
}

started=$SECONDS
bench_build
# TRACKD_BENCH_SERVICES=running: the services are up and managed by someone else; leave them be.
[[ "${TRACKD_BENCH_SERVICES:-}" == running ]] || bench_services
((run_python)) && bench_python_env
machine="$(machine_description)"
commit="$(git_describe)"
trackd_settings="$(env | grep -E '^TRACKD_(BATCH|VALIDATE|POSTGIS|KAFKA_PROPERTIES)_' | sort | tr '\n' ' ' || true)"
# trackd's writer connections (batch.writers, when this trackd has it): the COPY limit uses as
# many, and one.
writers="$("$bench_bin/server/trackd" check-config 2>/dev/null |
  awk '/^\[/ { s = ($0 == "[batch]") } s && $1 == "writers" { print $3 }')"
writers="${writers:-1}"

# ---------------------------------------------------------------- produce
say "producing $messages messages ($vehicles vehicles, $partitions partitions, bad share $bad_share) to $topic"
create_topic "$topic" "$partitions"
t0=$(date +%s.%N)
"$bench_bin/tools/trackd-fleet" --brokers "$brokers" --topic "$topic" --vehicles "$vehicles" \
  --messages "$messages" --bad-share "$bad_share" ${duplicate_share:+--duplicate-share "$duplicate_share"} --quiet --summary-json "$work/fleet.json" \
  >"$work/fleet.log" 2>&1 || die "trackd-fleet failed: $(tail -n 5 "$work/fleet.log")"
produce_s=$(calc "$(date +%s.%N) - $t0" %.1f)
sent=$(jq -r .sent "$work/fleet.json")
accepted=$(jq -r .accepted "$work/fleet.json")
say "produced $sent messages in ${produce_s}s ($accepted to be accepted)"

# ---------------------------------------------------------------- trackd
# run_trackd I: one run from offset 0 (its own consumer group and database); key=value figures
# in $work/trackd_I.kv. The database of run 1 is kept for the COPY limit's export.
run_trackd() {
  local i="$1" db="bench_trackd_${tag}_$1" group="bench-trackd-${tag}-$1" out="$work/${run_kind:-trackd}_$1.kv"
  local dsn pg0 pg1 k0 k1 m0 m1 t_launch perf_pids=() writer_pids="" pid main_tid
  new_db "$db"
  [[ "$i" == zones* ]] && define_zones "$db" "$zones"
  dsn="$(dsn_of "$db")"
  pg0="$(pg_cpu_total)"
  k0="$(cpu_of "$(kafka_pid)")"
  m0="$(machine_jiffies)"
  ((profile)) && pg_counters "$db" >"$work/counters0"
  say "trackd run $i: ingesting from offset 0 into $db"
  t_launch=$(date +%s.%N)
  TRACKD_PG_DSN="$dsn" TRACKD_KAFKA_BROKERS="$brokers" TRACKD_KAFKA_TOPIC="$run_topic" \
    TRACKD_KAFKA_FORMAT="$run_format" TRACKD_KAFKA_GROUP="$group" TRACKD_HTTP_ENABLED=false \
    TRACKD_POSTGIS_DEFER_INDEXES="${run_defer:-false}" "$bench_bin/server/trackd" run >"$work/trackd_$i.log" 2>&1 &
  trackd_pid=$!
  main_tid=$trackd_pid
  if ((profile)); then
    perf record -q -e cpu-clock -F 499 -p "$trackd_pid" -o "$work/trackd.perf" >/dev/null 2>&1 &
    perf_pids+=($!)
    # The writer connections open right after start-up; profile them together.
    for _ in $(seq 100); do
      writer_pids="$(psql_at "$db" -c "SELECT string_agg(pid::text, ',') FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE 'trackd ingest writer%'" 2>/dev/null || true)"
      [[ -n "$writer_pids" ]] && break
      sleep 0.1
    done
    sleep 0.5
    writer_pids="$(psql_at "$db" -c "SELECT string_agg(pid::text, ',') FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE 'trackd ingest writer%'" 2>/dev/null || true)"
    if [[ -n "$writer_pids" ]]; then
      perf record -q -e cpu-clock -F 199 --call-graph dwarf,16384 -p "$writer_pids" \
        -o "$work/pg_writer.perf" >/dev/null 2>&1 &
      perf_pids+=($!)
    fi
  fi
  "$bench_bin/bench/trackd-bench-watch" --dsn "$dsn" --group "$group" --topic "$run_topic" \
    --total "$sent" --interval-ms 50 --timeout-s 1800 >"$work/watch_$i.out" ||
    die "trackd did not commit all $sent messages (log: $work/trackd_$i.log)"
  kill -0 "$trackd_pid" 2>/dev/null || die "trackd exited early: $(tail -n 5 "$work/trackd_$i.log")"
  # Readings at the moment everything was committed, before trackd shuts down.
  m1="$(machine_jiffies)"
  k1="$(cpu_of "$(kafka_pid)")"
  {
    echo "cpu_s=$(cpu_of "$trackd_pid")"
    echo "main_tid=$main_tid"
    echo "rss_kib=$(peak_rss_kib "$trackd_pid")"
    threads_cpu "$trackd_pid" >"$work/threads_$i"
    # The main thread polls, decodes, validates and batches; the other threads named trackd
    # commit; rdk:* are librdkafka's.
    awk -v p="$main_tid" '$1 == p { print "poll_cpu_s=" $3 }' "$work/threads_$i"
    awk -v p="$main_tid" '$1 != p && $2 == "trackd" { s += $3 } END { printf "commit_cpu_s=%.2f\n", s }' "$work/threads_$i"
    awk '$2 ~ /^rdk/ { s += $3 } END { printf "rdkafka_cpu_s=%.2f\n", s }' "$work/threads_$i"
    local w=0 n=0
    for pid in $(psql_at "$db" -c "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE 'trackd ingest writer%'"); do
      w=$(calc "$w + $(cpu_of "$pid")")
      n=$((n + 1))
    done
    echo "writer_backend_cpu_s=$w"
    echo "writers=$n"
    w=0
    for pid in $(psql_at "$db" -c "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'trackd ingest control'"); do
      w=$(calc "$w + $(cpu_of "$pid")")
    done
    echo "control_backend_cpu_s=$w"
    echo "kafka_cpu_s=$(calc "$k1 - $k0")"
    echo "busy_share=$(busy_share "$m0" "$m1")"
    echo "busy_s=$(busy_seconds "$m0" "$m1")"
  } >"$out"
  local p
  for p in "${perf_pids[@]}"; do kill -INT "$p" 2>/dev/null || true; done
  for p in "${perf_pids[@]}"; do wait "$p" 2>/dev/null || true; done
  stop_trackd || die "trackd exited with an error: $(tail -n 5 "$work/trackd_$i.log")"
  settle_backends "$db"
  pg1="$(pg_cpu_total)"

  local first_commit first_msgs done_at rows dead
  first_commit=$(kv "$work/watch_$i.out" first_commit_epoch)
  first_msgs=$(kv "$work/watch_$i.out" first_commit_messages)
  done_at=$(kv "$work/watch_$i.out" done_epoch)
  rows=$(psql_at "$db" -c 'SELECT count(*) FROM trackd.vehicle_telemetry_history')
  dead=$(psql_at "$db" -c 'SELECT count(*) FROM trackd.dead_letters')
  ((rows == accepted)) || say "warning: trackd stored $rows rows, the fleet says $accepted accepted"
  {
    echo "rows=$rows"
    echo "dead_letters=$dead"
    echo "batches=$(psql_at "$db" -c 'SELECT count(DISTINCT ingest_batch_id) FROM trackd.vehicle_telemetry_history')"
    echo "seconds=$(calc "$done_at - $t_launch" %.2f)"
    echo "rows_per_s=$(calc "$rows / ($done_at - $t_launch)" %.0f)"
    echo "steady_rows_per_s=$(calc "$rows * ($sent - $first_msgs) / $sent / ($done_at - $first_commit)" %.0f)"
    echo "startup_s=$(calc "$first_commit - $t_launch" %.2f)"
    echo "pg_cpu_s=$(calc "$pg1 - $pg0")"
    echo "pauses=$(grep -c 'paused: in-flight limit reached' "$work/trackd_$i.log" || true)"
    statement_shares "$db" "$(calc "$done_at - $t_launch")" "$(kv "$out" writers)"
  } >>"$out"
  echo "others_s=$(calc "$(kv "$out" busy_s) - $(kv "$out" cpu_s) - $(kv "$out" pg_cpu_s) - $(kv "$out" kafka_cpu_s)")" >>"$out"
  say "trackd run $i: $rows rows (+$dead dead letters) in $(kv "$out" seconds)s: $(kv "$out" rows_per_s) rows/s end to end, $(kv "$out" steady_rows_per_s) rows/s after the first commit (start-up $(kv "$out" startup_s)s; other processes used $(kv "$out" others_s) CPU-s meanwhile)"

  if ((profile)); then
    pg_counters "$db" >"$work/counters1"
    statements_of "$db" >"$work/pg_stat_statements.txt"
    psql -X -P pager=off "$dsn" -c "
      SELECT CASE WHEN c.relname LIKE 'vehicle_telemetry_history_p%' AND c.relkind = 'r' THEN 'history partitions (heap)'
                  WHEN i.indrelid IS NOT NULL AND t.relname LIKE 'vehicle_telemetry_history_p%' THEN 'history partitions: ' || am.amname || ' index'
                  ELSE c.relname END AS relation,
             pg_size_pretty(sum(pg_relation_size(c.oid))) AS size
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        LEFT JOIN pg_index i ON i.indexrelid = c.oid LEFT JOIN pg_class t ON t.oid = i.indrelid
        LEFT JOIN pg_am am ON am.oid = c.relam
       WHERE n.nspname = 'trackd' AND c.relkind IN ('r', 'i') AND c.relname LIKE 'vehicle_%'
       GROUP BY 1 HAVING sum(pg_relation_size(c.oid)) > 0 ORDER BY sum(pg_relation_size(c.oid)) DESC" \
      >"$work/sizes.txt"
  fi
  # Numbered runs: run 1's database serves the COPY limit's export. Named runs (ZONES) are
  # dropped by their caller.
  if [[ "$i" =~ ^[0-9]+$ ]] && ((i > 1)); then drop_db "$db"; fi
}

# ---------------------------------------------------------------- COPY limit
# run_limit NAME CONNECTIONS [--no-upsert] [SQL...]: one load into a fresh database, after
# running each SQL statement there (schema variants); key=value figures in $work/limit_NAME.kv.
run_limit() {
  local name="$1" conns="$2" db="bench_limit_${tag}_$1" upsert_flag="" explain=() sql perf_pid=""
  shift 2
  if [[ "${1:-}" == --no-upsert ]]; then
    upsert_flag=--no-upsert
    shift
  fi
  new_db "$db"
  if [[ "${limit_schema:-today}" == today ]]; then
    use_today_current_state "$db"
    use_today_history_indexes "$db"
  fi
  # The GiST and btree are per-partition indexes (V0009): the variants drop them by suffix.
  if (($#)); then psql_at "$db" -c "CREATE FUNCTION public.bench_drop_history_indexes(p_suffix text) RETURNS void
    LANGUAGE plpgsql AS \$fn\$ DECLARE r record; BEGIN
      FOR r IN SELECT c.relname FROM pg_class c JOIN pg_index x ON x.indexrelid = c.oid
                WHERE c.relnamespace = 'trackd'::regnamespace AND c.relname LIKE 'vehicle_telemetry_history%'
                  AND right(c.relname, length(p_suffix)) = p_suffix LOOP
        EXECUTE format('DROP INDEX trackd.%I', r.relname);
      END LOOP; END \$fn\$" >/dev/null; fi
  for sql in "$@"; do psql_at "$db" -c "$sql" >/dev/null; done
  if ((profile)) && [[ "$name" == all_1 ]]; then explain=(--explain-batch $(((batches + 1) / 2))); fi
  local p0 p1 j0 j1 c0 c1 out="$work/limit_$name.kv"
  p0="$(pg_cpu_total)"
  j0="$(machine_jiffies)"
  c0="$(cpu_of $$ children)"
  "$bench_bin/bench/trackd-bench-copy-limit" load --dsn "$(dsn_of "$db")" --dir "${limit_dir:-$work/copy}" \
    --connections "$conns" --layout "${limit_layout:-closed}" --history-target "${limit_target:-parent}" \
    $upsert_flag "${explain[@]}" >"$out" 2>"$work/limit_$name.err" &
  local loader=$!
  if ((profile)) && [[ "$name" == all_1 ]]; then
    local pids=""
    for _ in $(seq 100); do
      pids="$(psql_at "$db" -c "SELECT string_agg(pid::text, ',') FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'trackd-bench-copy-limit'" 2>/dev/null || true)"
      [[ -n "$pids" && "$pids" == *,* || ( -n "$pids" && $conns == 1 ) ]] && break
      sleep 0.05
    done
    if [[ -n "$pids" ]]; then
      perf record -q -e cpu-clock -F 199 --call-graph dwarf,16384 -p "$pids" \
        -o "$work/limit_backend.perf" >/dev/null 2>&1 &
      perf_pid=$!
    fi
  fi
  wait "$loader" || die "COPY limit ($name) failed: $(tail -n 3 "$work/limit_$name.err")"
  if [[ -n "$perf_pid" ]]; then
    kill -INT "$perf_pid" 2>/dev/null || true
    wait "$perf_pid" 2>/dev/null || true
  fi
  c1="$(cpu_of $$ children)"
  j1="$(machine_jiffies)"
  settle_backends "$db"
  p1="$(pg_cpu_total)"
  statement_shares "$db" "$(kv "$out" seconds)" "$conns" >>"$out"
  {
    echo "client_cpu_s=$(calc "$c1 - $c0")"
    echo "pg_cpu_s=$(calc "$p1 - $p0")"
    echo "busy_share=$(busy_share "$j0" "$j1")"
    echo "others_s=$(calc "$(busy_seconds "$j0" "$j1") - ($p1 - $p0) - ($c1 - $c0)")"
  } >>"$out"
  if ((profile)) && [[ "$name" == all_1 ]]; then statements_of "$db" >"$work/limit_pg_stat_statements.txt"; fi
  drop_db "$db"
  say "COPY limit ($name, $conns connection(s)): $(kv "$out" rows) rows in $(kv "$out" seconds)s: $(kv "$out" rows_per_s) rows/s (other processes used $(kv "$out" others_s) CPU-s meanwhile)"
}

# define_zones DB N: N geofence zones over the fleet's city (Berlin, 15 km), the same each run.
define_zones() {
  psql_at "$1" -c "SELECT setseed(0.42); INSERT INTO trackd.geofence_zones (zone_name, fence_geom)
    SELECT 'bench-' || i, ST_Multi(ST_Expand(ST_SetSRID(ST_MakePoint(13.2 + random() * 0.41,
           52.38 + random() * 0.28), 4326), 0.004)) FROM generate_series(1, $2) i" >/dev/null
}

if [[ "$format" == protobuf ]]; then
  say "producing the same $messages messages as Protobuf to $pb_topic"
  create_topic "$pb_topic" "$partitions"
  "$bench_bin/tools/trackd-fleet" --brokers "$brokers" --topic "$pb_topic" --vehicles "$vehicles" \
    --messages "$messages" --bad-share "$bad_share" --format protobuf --quiet \
    --summary-json "$work/fleet_pb.json" >"$work/fleet_pb.log" 2>&1 ||
    die "trackd-fleet --format protobuf failed: $(tail -n 5 "$work/fleet_pb.log")"
  for ((r = 1; r <= repeat; r++)); do
    run_topic="$topic" run_format=json
    run_trackd "json$r"
    run_topic="$pb_topic" run_format=protobuf
    run_trackd "protobuf$r"
    drop_db "bench_trackd_${tag}_json$r"
    drop_db "bench_trackd_${tag}_protobuf$r"
  done
  best_json=0
  best_pb=0
  poll_json=""
  poll_pb=""
  for ((r = 1; r <= repeat; r++)); do
    j=$(kv "$work/trackd_json$r.kv" rows_per_s)
    p=$(kv "$work/trackd_protobuf$r.kv" rows_per_s)
    if ((j > best_json)); then best_json=$j; poll_json=$(kv "$work/trackd_json$r.kv" poll_cpu_s); fi
    if ((p > best_pb)); then best_pb=$p; poll_pb=$(kv "$work/trackd_protobuf$r.kv" poll_cpu_s); fi
  done
  report="$work/report.md"
  {
    echo "Payload formats: the same $sent messages ($vehicles vehicles, $partitions partitions, bad share $bad_share) as JSON and as plain Protobuf, trackd on each alternately, $repeat time(s) each; best rows/s of each."
    echo "Machine: $machine. Commit: $commit. Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
    echo "Command: \`bash bench/ingest.sh --format protobuf --messages $messages --vehicles $vehicles --partitions $partitions --repeat $repeat\` ${trackd_settings}"
    echo
    echo "| run | rows/s end to end | poll thread CPU-s (decode, validate, batch) | trackd CPU-s |"
    echo "|---|---|---|---|"
    for ((r = 1; r <= repeat; r++)); do
      echo "| JSON #$r | $(kv "$work/trackd_json$r.kv" rows_per_s) | $(kv "$work/trackd_json$r.kv" poll_cpu_s) | $(kv "$work/trackd_json$r.kv" cpu_s) |"
      echo "| Protobuf #$r | $(kv "$work/trackd_protobuf$r.kv" rows_per_s) | $(kv "$work/trackd_protobuf$r.kv" poll_cpu_s) | $(kv "$work/trackd_protobuf$r.kv" cpu_s) |"
    done
    echo
    echo "Ratio Protobuf/JSON (best of each): rows/s $(calc "$best_pb / $best_json" %.2f), poll thread CPU $(calc "$poll_pb / $poll_json" %.2f). The machine is shared: the ratios, not the absolute figures, are the result."
  } >"$report"
  echo
  cat "$report"
  if ((record)); then
    append_results "bench/ingest.sh --format protobuf" <"$report"
    say "appended to bench/RESULTS.md"
  fi
  say "done in $((SECONDS - started)) s"
  exit 0
fi

if ((zones > 0)); then
  for ((r = 1; r <= repeat; r++)); do
    run_trackd "plain$r"
    run_trackd "zones$r"
    events[r]=$(psql_at "bench_trackd_${tag}_zones$r" -c 'SELECT count(*) FROM trackd.geofence_events')
    drop_db "bench_trackd_${tag}_plain$r"
    drop_db "bench_trackd_${tag}_zones$r"
  done
  best_plain=0
  best_zones=0
  for ((r = 1; r <= repeat; r++)); do
    p=$(kv "$work/trackd_plain$r.kv" rows_per_s)
    z=$(kv "$work/trackd_zones$r.kv" rows_per_s)
    ((p > best_plain)) && best_plain=$p
    ((z > best_zones)) && best_zones=$z
  done
  report="$work/report.md"
  {
    echo "Geofence event detection: $sent messages ($vehicles vehicles, $partitions partitions), trackd"
    echo "without zones and with $zones zones, alternately, $repeat time(s) each; best rows/s of each."
    echo "Machine: $machine. Commit: $commit. Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
    echo "Command: \`ZONES=$zones bash bench/ingest.sh --messages $messages --vehicles $vehicles --partitions $partitions --repeat $repeat\` ${trackd_settings}"
    echo
    echo "| run | rows/s end to end | events |"
    echo "|---|---|---|"
    for ((r = 1; r <= repeat; r++)); do
      echo "| no zones #$r | $(kv "$work/trackd_plain$r.kv" rows_per_s) | 0 |"
      echo "| $zones zones #$r | $(kv "$work/trackd_zones$r.kv" rows_per_s) | ${events[r]} |"
    done
    echo
    echo "Ratio with/without zones (best of each): $(calc "$best_zones / $best_plain" %.2f). The machine is shared: the ratio, not the absolute rows/s, is the result."
  } >"$report"
  echo
  cat "$report"
  if ((record)); then
    append_results "bench/ingest.sh ZONES=$zones" <"$report"
    say "appended to bench/RESULTS.md"
  fi
  say "done in $((SECONDS - started)) s"
  exit 0
fi

for ((r = 1; r <= repeat; r++)); do
  run_trackd "$r"
  if ((r == 1)); then
    batches=$(kv "$work/trackd_1.kv" batches)
    say "COPY limit: exporting the $batches batches of trackd run 1"
    "$bench_bin/bench/trackd-bench-copy-limit" export --dsn "$(dsn_of "bench_trackd_${tag}_1")" \
      --dir "$work/copy" >"$work/export.out"
    # The same rows in time order, as trackd sent them before it sorted by (vehicle, time):
    # the COPY limit the performance issue's figures were measured against.
    if ((hot)); then
      # The same rows in Morton order, as trackd writes them with postgis.defer_indexes.
      "$bench_bin/bench/trackd-bench-copy-limit" export --dsn "$(dsn_of "bench_trackd_${tag}_1")" \
        --dir "$work/copy-space" --order space >>"$work/export.out"
    else
      "$bench_bin/bench/trackd-bench-copy-limit" export --dsn "$(dsn_of "bench_trackd_${tag}_1")" \
        --dir "$work/copy-time" --order time >>"$work/export.out"
    fi
    drop_db "bench_trackd_${tag}_1"
  fi
  run_limit "all_$r" "$writers"
  # trackd's own design: its current state (V0011) and rows straight into their partitions.
  limit_schema=trackd limit_target=partition run_limit "own_$r" "$writers"
  if ((hot)); then
    run_kind=hottrackd run_defer=true run_trackd "h$r"
    drop_db "bench_trackd_${tag}_h$r"
    limit_dir="$work/copy-space" limit_layout=hot limit_target=partition run_limit "hot_$r" "$writers"
  else
    limit_dir="$work/copy-time" run_limit "timeorder_$r" "$writers"
  fi
done
if ((writers > 1)); then run_limit one_connection 1; fi

variants=()
if ((profile)); then
  # Each variant --variant-repeat times (the machine is shared): the lowest backend CPU counts.
  declare -A variant_sql=(
    [copy_only]="--no-upsert"
    [no_history_gist]="SELECT bench_drop_history_indexes('_geom_gist')"
    [no_history_btree]="SELECT bench_drop_history_indexes('_vehicle_time_idx')"
    [no_history_brin]="DROP INDEX trackd.vehicle_telemetry_history_batch_brin"
    [no_history_indexes]="SELECT bench_drop_history_indexes('_geom_gist');SELECT bench_drop_history_indexes('_vehicle_time_idx');DROP INDEX trackd.vehicle_telemetry_history_batch_brin"
    [no_current_indexes]="DROP INDEX trackd.vehicle_current_state_geom_gist;DROP INDEX trackd.vehicle_current_state_last_updated_idx"
    [history_spgist]="SELECT bench_drop_history_indexes('_geom_gist');CREATE INDEX vehicle_telemetry_history_geom_spgist ON trackd.vehicle_telemetry_history USING spgist (geom)"
    [vehicle_id_collate_c]="ALTER TABLE trackd.vehicle_telemetry_history ALTER COLUMN vehicle_id TYPE text COLLATE \"C\";ALTER TABLE trackd.vehicle_current_state ALTER COLUMN vehicle_id TYPE text COLLATE \"C\""
    [current_hot]="DROP INDEX trackd.vehicle_current_state_geom_gist;DROP INDEX trackd.vehicle_current_state_last_updated_idx;ALTER TABLE trackd.vehicle_current_state SET (fillfactor = 50)"
  )
  variants=(all copy_only no_history_gist no_history_btree no_history_brin no_history_indexes
    no_current_indexes current_hot history_spgist vehicle_id_collate_c)
  variant_sql[all]=""
  say "COPY limit variants (${variant_repeat} times each, $variant_connections connection(s)): ${variants[*]}"
  for ((k = 1; k <= variant_repeat; k++)); do
    for v in "${variants[@]}"; do
      if [[ "${variant_sql[$v]}" == --no-upsert ]]; then
        run_limit "v_${v}_$k" "$variant_connections" --no-upsert
      elif [[ -z "${variant_sql[$v]}" ]]; then
        run_limit "v_${v}_$k" "$variant_connections"
      else
        IFS=';' read -r -a stmts <<<"${variant_sql[$v]}"
        run_limit "v_${v}_$k" "$variant_connections" "${stmts[@]}"
      fi
    done
  done
fi

# ---------------------------------------------------------------- Python
if ((run_python)); then
  db_python="bench_python_$tag"
  new_db "$db_python"
  say "Python consumer: into $db_python (time box ${python_seconds}s)"
  pp0="$(pg_cpu_total)"
  k2="$(cpu_of "$(kafka_pid)")"
  j4="$(machine_jiffies)"
  "$bench_python" "$bench_repo/bench/python_consumer.py" --brokers "$brokers" --topic "$topic" \
    --group "bench-python-$tag" --dsn "$(dsn_of "$db_python")" --max-seconds "$python_seconds" \
    --max-messages "$python_messages" >"$work/python.kv" 2>"$work/python.err" ||
    die "the Python consumer failed: $(tail -n 5 "$work/python.err")"
  j5="$(machine_jiffies)"
  k3="$(cpu_of "$(kafka_pid)")"
  settle_backends "$db_python"
  pp1="$(pg_cpu_total)"
  {
    echo "pg_cpu_s=$(calc "$pp1 - $pp0")"
    echo "kafka_cpu_s=$(calc "$k3 - $k2")"
    echo "busy_share=$(busy_share "$j4" "$j5")"
  } >>"$work/python.kv"
  echo "others_s=$(calc "$(busy_seconds "$j4" "$j5") - $(kv "$work/python.kv" cpu_s) - $(kv "$work/python.kv" pg_cpu_s) - $(kv "$work/python.kv" kafka_cpu_s)")" >>"$work/python.kv"
  drop_db "$db_python"
  say "Python: $(kv "$work/python.kv" rows) rows of $(kv "$work/python.kv" messages) messages in $(kv "$work/python.kv" seconds)s: $(kv "$work/python.kv" rows_per_s) rows/s"
fi

# ---------------------------------------------------------------- report
# best KIND KEY: the file (among KIND_*.kv) with the highest KEY.
best() {
  local f b="" v bv=-1
  for f in "$work"/"$1"_*.kv; do
    [[ -e "$f" ]] || continue
    v=$(kv "$f" "$2")
    if awk -v a="$v" -v b="$bv" 'BEGIN { exit !(a > b) }'; then
      bv=$v
      b=$f
    fi
  done
  echo "$b"
}
# per_m VALUE ROWS: per million rows.
per_m() { calc "$1 / $2 * 1000000" %.1f; }
# row LABEL FILE KIND: one table row.
row() {
  local label="$1" f="$2" kind="$3" rows client backend steady kafka
  rows=$(kv "$f" rows)
  steady=$(kv "$f" steady_rows_per_s)
  case "$kind" in
    trackd)
      client=$(kv "$f" cpu_s)
      backend=$(kv "$f" writer_backend_cpu_s)
      kafka=$(per_m "$(kv "$f" kafka_cpu_s)" "$rows")
      ;;
    limit)
      client=$(kv "$f" client_cpu_s)
      backend=$(kv "$f" backend_cpu_s)
      steady=$(kv "$f" rows_per_s)
      kafka="—"
      ;;
    python)
      client=$(kv "$f" cpu_s)
      backend=$(kv "$f" backend_cpu_s)
      kafka=$(per_m "$(kv "$f" kafka_cpu_s)" "$rows")
      ;;
  esac
  echo "| $label | $rows | $(kv "$f" seconds) | $(kv "$f" rows_per_s) | $steady | $(per_m "$client" "$rows") | $(per_m "$backend" "$rows") | $(per_m "$(kv "$f" pg_cpu_s)" "$rows") | $kafka | $(calc "$(kv "$f" busy_share) * 100" %.0f)% | $(kv "$f" others_s) |"
}

bt="$(best trackd steady_rows_per_s)"
bl="$(best limit_all rows_per_s)"
t_rate=$(kv "$bt" rows_per_s)
t_steady=$(kv "$bt" steady_rows_per_s)
l_rate=$(kv "$bl" rows_per_s)
inflight="${TRACKD_BATCH_INFLIGHT_BYTES:-268435456}"
report="$work/report.md"
{
  echo "- commit: $commit"
  echo "- machine: $machine"
  echo "- settings: workload $workload: $sent messages ($accepted valid), $vehicles vehicles, $partitions partitions, bad share $bad_share; trackd defaults${trackd_settings:+ except $trackd_settings} (batch.writers = $writers); trackd and the COPY limit alternate $repeat time(s), the best of each counts"
  ((profile)) && echo "- profiled run (perf sampling at 499 Hz on trackd and its writer backends adds a little overhead)"
  echo
  echo "| path | rows | seconds | rows/s | rows/s after first commit | client CPU s/M rows | its PostgreSQL backends CPU s/M rows | PostgreSQL cluster CPU s/M rows | Kafka CPU s/M rows | machine busy | other processes' CPU-s |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  for ((r = 1; r <= repeat; r++)); do
    row "trackd, run $r (start-up $(kv "$work/trackd_$r.kv" startup_s) s)" "$work/trackd_$r.kv" trackd
    row "COPY limit, run $r ($writers connection(s))" "$work/limit_all_$r.kv" limit
    row "COPY limit of trackd's design (V0011 current state, rows straight into their partitions), run $r" "$work/limit_own_$r.kv" limit
    if ((hot)); then
      row "trackd with postgis.defer_indexes, run $r (start-up $(kv "$work/hottrackd_h$r.kv" startup_s) s)" "$work/hottrackd_h$r.kv" trackd
      row "COPY limit of the hot layout, run $r ($writers connection(s))" "$work/limit_hot_$r.kv" limit
    else
      row "COPY limit in time order, run $r ($writers connection(s))" "$work/limit_timeorder_$r.kv" limit
    fi
  done
  [[ -f "$work/limit_one_connection.kv" ]] && row "COPY limit on 1 connection" "$work/limit_one_connection.kv" limit
  if ((run_python)); then
    f="$work/python.kv"
    note="all $(kv "$f" messages) messages"
    [[ "$(kv "$f" complete)" == yes ]] || note="first $(kv "$f" messages) messages: time-boxed to ${python_seconds} s"
    row "Python consumer ($note)" "$f" python
  fi
  echo
  echo "- **trackd/limit = $(calc "$t_rate / $l_rate")** end to end (start-up included), **$(calc "$t_steady / $l_rate")** after trackd's first commit (best runs); the limit is today's schema: the current state before V0011"
  blo="$(best limit_own rows_per_s)"
  echo "- trackd / the COPY limit of its own design (V0011's HOT current state, rows straight into their partitions) = $(calc "$t_rate / $(kv "$blo" rows_per_s)") end to end, $(calc "$t_steady / $(kv "$blo" rows_per_s)") after the first commit; own-schema limit / today's = $(calc "$(kv "$blo" rows_per_s) / $l_rate") (rows/s), $(calc "$(kv "$blo" backend_cpu_s) / $(kv "$bl" backend_cpu_s)") (backend CPU), upsert time $(kv "$blo" upsert_s) s / $(kv "$bl" upsert_s) s"
  # On a dedicated CPU-bound machine throughput follows CPU per row: this ratio is the one the
  # other processes on a shared machine disturb least. Backends, not the whole cluster (other
  # users of the shared cluster would count); Kafka apart (the broker is shared too).
  t_cpu=$(calc "($(kv "$bt" cpu_s) + $(kv "$bt" writer_backend_cpu_s) + $(kv "$bt" control_backend_cpu_s)) / $(kv "$bt" rows) * 1000000" %.1f)
  l_cpu=$(calc "($(kv "$bl" client_cpu_s) + $(kv "$bl" backend_cpu_s)) / $(kv "$bl" rows) * 1000000" %.1f)
  echo "- CPU per million rows: trackd + its PostgreSQL backends $t_cpu s (+ Kafka broker $(per_m "$(kv "$bt" kafka_cpu_s)" "$(kv "$bt" rows)") s), loader + its backends $l_cpu s: **CPU-normalised trackd/limit = $(calc "$l_cpu / $t_cpu")** ($(calc "$l_cpu / ($t_cpu + $(per_m "$(kv "$bt" kafka_cpu_s)" "$(kv "$bt" rows)"))") with Kafka)"
  if ((run_python)); then
    p_rate=$(kv "$work/python.kv" rows_per_s)
    echo "- **trackd/python = $(calc "$t_rate / $p_rate" %.1f)** end to end ($(calc "$t_steady / $(kv "$work/python.kv" steady_rows_per_s)" %.1f) after the first commit of each)"
  fi
  if ((hot)); then
    bht="$(best hottrackd steady_rows_per_s)"
    blh="$(best limit_hot rows_per_s)"
    echo "- **trackd with postgis.defer_indexes / today's COPY limit = $(calc "$(kv "$bht" rows_per_s) / $l_rate")** end to end, **$(calc "$(kv "$bht" steady_rows_per_s) / $l_rate")** after its first commit (best runs; the issue's target is 1.5)"
    echo "- trackd with postgis.defer_indexes / the hot layout's own COPY limit = $(calc "$(kv "$bht" rows_per_s) / $(kv "$blh" rows_per_s)") end to end, $(calc "$(kv "$bht" steady_rows_per_s) / $(kv "$blh" rows_per_s)") after its first commit; hot-layout limit / today's limit = $(calc "$(kv "$blh" rows_per_s) / $l_rate") (rows/s), $(calc "$(kv "$blh" backend_cpu_s) / $(kv "$bl" backend_cpu_s)") (backend CPU); trackd with / without postgis.defer_indexes = $(calc "$(kv "$bht" rows_per_s) / $t_rate") end to end"
    ht_cpu=$(calc "($(kv "$bht" cpu_s) + $(kv "$bht" writer_backend_cpu_s) + $(kv "$bht" control_backend_cpu_s)) / $(kv "$bht" rows) * 1000000" %.1f)
    echo "- CPU per million rows, trackd with postgis.defer_indexes + its backends: $ht_cpu s (+ Kafka $(per_m "$(kv "$bht" kafka_cpu_s)" "$(kv "$bht" rows)") s): CPU-normalised against today's limit $(calc "$l_cpu / $ht_cpu")"
  fi
  blt="$(best limit_timeorder rows_per_s)"
  [[ -n "$blt" ]] && echo "- **trackd/limit in time order = $(calc "$t_rate / $(kv "$blt" rows_per_s)")** end to end, $(calc "$t_steady / $(kv "$blt" rows_per_s)") after trackd's first commit: the same rows in time order, as trackd wrote them before it sorted each batch by (vehicle, time) (the limit the performance issue measured); COPY limit in trackd's order / in time order = $(calc "$l_rate / $(kv "$blt" rows_per_s)"), its backends' CPU per row in trackd's order / in time order = $(calc "$(kv "$bl" backend_cpu_s) / $(kv "$blt" backend_cpu_s)") (best runs)"
  if [[ -f "$work/limit_one_connection.kv" ]]; then
    echo "- trackd/limit on 1 connection = $(calc "$t_rate / $(kv "$work/limit_one_connection.kv" rows_per_s)") end to end"
  fi
  echo "- trackd peak RSS: $(calc "$(kv "$bt" rss_kib) / 1024" %.0f) MiB (batch.inflight_bytes = $(calc "$inflight / 1048576" %.0f) MiB; reading paused $(kv "$bt" pauses) time(s) at the in-flight limit)"
  echo "- trackd CPU (best run): $(kv "$bt" cpu_s) s in all — poll thread $(kv "$bt" poll_cpu_s) s, commit threads $(kv "$bt" commit_cpu_s) s, librdkafka $(kv "$bt" rdkafka_cpu_s) s — over $(kv "$bt" seconds) s; its $(kv "$bt" writers) PostgreSQL writer backends $(kv "$bt" writer_backend_cpu_s) s, control backend $(kv "$bt" control_backend_cpu_s) s"
  # Where the connections' wall time went (pg_stat_statements, server-side execution time):
  # a writer not inside a statement is waiting for a batch, in a round trip or in the client.
  stmt_line() {
    local f="$1" k out=""
    for k in copy_history copy_current copy_stage upsert offsets begin commit other; do
      out+="$k $(kv "$f" "stmt_${k}_s" || true) s, "
    done
    echo "${out%, }; $(kv "$f" stmt_calls) statements"
  }
  echo "- connections busy inside statements (pg_stat_statements time / (wall × connections)): trackd's writers **$(calc "$(kv "$bt" stmt_busy_share) * 100" %.0f)%** (from launch: start-up counts as idle; COMMIT's WAL flush is not in pg_stat_statements), the COPY limit's **$(calc "$(kv "$bl" stmt_busy_share) * 100" %.0f)%**"
  echo "  - trackd (best run): $(stmt_line "$bt")"
  echo "  - COPY limit (best run): $(stmt_line "$bl")"
  echo "  - current-state rows of new vehicles COPYed straight in (copy_current): trackd $(kv "$bt" stmt_copy_current_rows || true)"
  echo "  - current-state rows staged / changed by the upsert (the rest could not win): trackd $(kv "$bt" stmt_stage_rows) / $(kv "$bt" stmt_upsert_rows), COPY limit $(kv "$bl" stmt_stage_rows) / $(kv "$bl" stmt_upsert_rows); share of current-state updates that were HOT: trackd $(kv "$bt" hot_update_share), COPY limit $(kv "$bl" hot_update_share), its own schema's $(kv "$blo" hot_update_share)"
  echo "- COPY limit (best run), time by statement summed over its connections: COPY history $(kv "$bl" copy_history_s) s, COPY staging $(kv "$bl" copy_stage_s) s, upsert $(kv "$bl" upsert_s) s, COMMIT $(kv "$bl" commit_s) s ($(kv "$bl" batches) batches, $(kv "$bl" stage_rows) staged rows)"
  if ((run_python)); then
    echo "- Python consumer: $(kv "$work/python.kv" cpu_s) s CPU, peak RSS $(calc "$(kv "$work/python.kv" max_rss_kib) / 1024" %.0f) MiB; refused $(kv "$work/python.kv" refused) messages (it does not check speed jumps or redeliveries)"
  fi
  echo "- produce: ${produce_s} s for $sent messages; whole run $((SECONDS - started)) s"
  if ((profile)); then
    echo
    echo "COPY limit variants: a fresh database each, the same files, $variant_connections connection(s), each run $variant_repeat times interleaved; the run with the lowest backend CPU is shown, with the range of backend CPU over the runs (backend CPU is the figure to compare: wall time follows what else the machine runs):"
    echo
    echo "| variant | backend CPU s (min) | range over runs | vs all | rows/s | COPY history s | COPY staging s | upsert s | COMMIT s | other processes' CPU-s |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    all_min=""
    for v in "${variants[@]}"; do
      bestf=""
      lo=""
      hi=""
      for ((k = 1; k <= variant_repeat; k++)); do
        f="$work/limit_v_${v}_$k.kv"
        c=$(kv "$f" backend_cpu_s)
        if [[ -z "$lo" ]] || awk -v a="$c" -v b="$lo" 'BEGIN { exit !(a < b) }'; then lo=$c; bestf=$f; fi
        if [[ -z "$hi" ]] || awk -v a="$c" -v b="$hi" 'BEGIN { exit !(a > b) }'; then hi=$c; fi
      done
      [[ "$v" == all ]] && all_min=$lo
      echo "| $v | $lo | $lo–$hi | $(calc "($lo - $all_min) / $all_min * 100" %+.0f)% | $(kv "$bestf" rows_per_s) | $(kv "$bestf" copy_history_s) | $(kv "$bestf" copy_stage_s) | $(kv "$bestf" upsert_s) | $(kv "$bestf" commit_s) | $(kv "$bestf" others_s) |"
    done
    echo
    read -r a_rec a_fpi a_bytes a_full a_write a_sync a_ckt a_ckr a_lsn <"$work/counters0"
    read -r b_rec b_fpi b_bytes b_full b_write b_sync b_ckt b_ckr b_lsn <"$work/counters1"
    rows1=$(kv "$work/trackd_1.kv" rows)
    echo "- WAL during the trackd run (whole cluster): $(calc "($b_lsn - $a_lsn) / 1048576" %.0f) MiB = $(calc "($b_lsn - $a_lsn) / $rows1" %.0f) B per row; $((b_rec - a_rec)) records, $((b_fpi - a_fpi)) full-page images, wal_buffers_full $((b_full - a_full)), $((b_write - a_write)) writes, $((b_sync - a_sync)) fsyncs; checkpoints: $((b_ckt - a_ckt)) timed, $((b_ckr - a_ckr)) requested"
    echo
    echo "pg_stat_statements, trackd's database:"
    echo
    echo '```'
    cat "$work/pg_stat_statements.txt"
    echo '```'
    echo
    echo "pg_stat_statements, the COPY limit's database (all_1):"
    echo
    echo '```'
    cat "$work/limit_pg_stat_statements.txt"
    echo '```'
    echo
    echo "EXPLAIN (ANALYZE, BUFFERS, WAL) of the upsert, a middle batch of the COPY limit:"
    echo
    echo '```'
    cat "$work/limit_all_1.err"
    echo '```'
    echo
    echo "Relation sizes after the trackd run:"
    echo
    echo '```'
    cat "$work/sizes.txt"
    echo '```'
    if [[ -s "$work/trackd.perf" ]]; then
      echo
      echo "perf (cpu-clock, 499 Hz) of trackd, top symbols (CPU per thread: see above, from /proc):"
      echo
      echo '```'
      { perf report -i "$work/trackd.perf" --stdio --sort sym 2>/dev/null | grep -E '^ +[0-9]' | head -40 | cut -c1-150; } || true
      echo '```'
    fi
    if [[ -s "$work/pg_writer.perf" ]]; then
      echo
      echo "Where trackd's PostgreSQL writer backends spent their CPU (perf cpu-clock 199 Hz, DWARF call graphs, bench/perf_attribution.py):"
      echo
      echo '```'
      python3 "$bench_repo/bench/perf_attribution.py" "$work/pg_writer.perf" || true
      echo
      { perf report -i "$work/pg_writer.perf" --no-children --stdio --sort dso,sym -g none 2>/dev/null | grep -E '^ +[0-9]' | head -30 | cut -c1-150; } || true
      echo '```'
    fi
    if [[ -s "$work/limit_backend.perf" ]]; then
      echo
      echo "The same for the COPY limit's backends (all_1):"
      echo
      echo '```'
      python3 "$bench_repo/bench/perf_attribution.py" "$work/limit_backend.perf" || true
      echo '```'
    fi
  fi
} >"$report"

echo
echo "==== bench/ingest ($sent messages) ===="
cat "$report"
if ((record)); then
  {
    cat "$report"
    echo
    # bench/freshness.sh takes half of the fleet workload's maximum, at its default 2M
    # messages (a shorter backlog gives a rate the database does not sustain for a minute).
    if [[ "$workload" == fleet && "$messages" == 2000000 ]]; then
      echo "<!-- ingest-max-rows-per-s: $t_steady -->"
    fi
  } | append_results "bench/ingest.sh$([[ "$workload" == fleet ]] || echo " --workload $workload")$( ((profile)) && echo ' --profile')"
  say "appended to bench/RESULTS.md"
fi
say "done in $((SECONDS - started)) s"
