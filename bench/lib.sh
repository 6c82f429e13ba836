#!/usr/bin/env bash
# Shared by the bench/*.sh drivers (sourced, not run): paths, the build, the local services,
# scratch databases and topics, CPU and memory accounting from /proc, and bench/RESULTS.md.
# shellcheck disable=SC2034 # variables are used by the scripts that source this file

bench_repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=bench/lock.sh
source "$bench_repo/bench/lock.sh"
# TRACKD_BENCH_BIN: measure binaries built elsewhere (e.g. another commit); then nothing is built
# and TRACKD_BENCH_LABEL says what they are.
bench_bin="${TRACKD_BENCH_BIN:-$bench_repo/build/release}"
bench_results="$bench_repo/bench/RESULTS.md"
pg_port="${LOCAL_PG_PORT:-55432}"
kafka_port="${LOCAL_KAFKA_PORT:-59092}"
brokers="127.0.0.1:$kafka_port"
admin_dsn="postgresql://postgres@127.0.0.1:$pg_port/postgres"
clk_tck="$(getconf CLK_TCK)"
# A position's cell of a 0.01° grid as one int8: the key of the GIN indexes the index-cost
# benchmarks price (a bbox would look up the cells it covers).
grid_cell_key="floor(ST_X(geom) * 100)::int8 * 100000 + floor(ST_Y(geom) * 100)::int8"
# Their pending list (gin_pending_list_limit, kB): PostgreSQL's default unless BENCH_GIN_PENDING_KB.
gin_with="WITH (gin_pending_list_limit = ${BENCH_GIN_PENDING_KB:-4096})"

say() { printf '[%s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() {
  say "error: $*"
  exit 1
}

dsn_of() { echo "postgresql://postgres@127.0.0.1:$pg_port/$1"; }
psql_admin() { psql -X -q -v ON_ERROR_STOP=1 "$admin_dsn" "$@"; }
# psql_at DB [args]: unaligned, tuples only.
psql_at() {
  local db="$1"
  shift
  psql -X -q -At -v ON_ERROR_STOP=1 "$(dsn_of "$db")" "$@"
}

# Builds (or checks, in a second when nothing changed) the release binaries the benchmarks use.
bench_build() {
  local jobs="${TRACKD_BUILD_JOBS:-2}"
  if [[ -n "${TRACKD_BENCH_BIN:-}" ]]; then
    say "using the binaries in $TRACKD_BENCH_BIN (TRACKD_BENCH_BIN): not building"
    return 0
  fi
  if [[ ! -f "$bench_bin/build.ninja" ]]; then
    say "configuring the release build"
    (cd "$bench_repo" && cmake --preset release >/dev/null)
  fi
  say "building trackd, trackd-fleet and the bench programs (-j$jobs)"
  (cd "$bench_repo" && cmake --build --preset release -j "$jobs" --target trackd trackd-fleet \
    trackd-bench-decode trackd-bench-copy-limit trackd-bench-watch trackd-bench-freshness \
    >/dev/null) || die "build failed (run: cmake --build --preset release)"
}

# Starts the local services if they are not running. The streaming replica runs only with
# bench_replica=1 (and is stopped otherwise): it replays every WAL record a benchmark writes,
# which on a 2-core machine is a third of a core taken from the measured processes. Started
# again later, it catches up, or scripts/pg-replica.sh makes it anew.
bench_services() {
  if [[ "${bench_replica:-0}" == 1 ]]; then
    bash "$bench_repo/scripts/services.sh" start >/dev/null || die "could not start the local services"
  else
    bash "$bench_repo/scripts/services.sh" start --no-replica >/dev/null ||
      die "could not start the local services"
    bash "$bench_repo/scripts/pg-replica.sh" stop >/dev/null || die "could not stop the replica"
  fi
}

bench_python_env() {
  bash "$bench_repo/scripts/python-env.sh" >/dev/null || die "scripts/python-env.sh failed"
  bench_python="$bench_repo/.venv/bin/python"
}

# create_db NAME: a fresh database with trackd's schema (`trackd migrate`) and
# pg_stat_statements (to read this database's statements). TRACKD_BENCH_DATABASE_OPTIONS: more
# options of its CREATE DATABASE, e.g. "TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE
# 'en-US'" for a database whose text sorts as a language does (the local cluster's is C.UTF-8).
create_db() {
  local db="$1"
  psql_admin -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" \
    -c "CREATE DATABASE $db ${TRACKD_BENCH_DATABASE_OPTIONS:-}" >/dev/null
  TRACKD_PG_DSN="$(dsn_of "$db")" "$bench_bin/server/trackd" migrate >/dev/null 2>&1 ||
    die "trackd migrate failed on $db"
  psql_at "$db" -c "SET client_min_messages = warning" \
    -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" >/dev/null
}
# use_today_current_state NAME: the current state as the performance issue measured it
# (V0003-V0010): a GiST on geom and a btree on last_updated, no grid cell, default fillfactor,
# vehicle ids in the database's collation (here and in the geofence tables).
# V0011 made its updates HOT; this is the "before" of that change, on a migrated database
# (dropping the column drops its index: V0016's SP-GiST on the cells' corners).
use_today_current_state() {
  use_database_collation_for_vehicle_ids "$1" vehicle_current_state geofence_events geofence_vehicle_state
  psql_at "$1" -v ON_ERROR_STOP=1 \
    -c "ALTER TABLE trackd.vehicle_current_state DROP COLUMN cell_corner" \
    -c "ALTER TABLE trackd.vehicle_current_state RESET (fillfactor)" \
    -c "CREATE INDEX vehicle_current_state_geom_gist ON trackd.vehicle_current_state USING gist (geom)" \
    -c "CREATE INDEX vehicle_current_state_last_updated_idx ON trackd.vehicle_current_state (last_updated)" \
    >/dev/null || die "could not restore the current state's old layout on $1"
}
# use_history_index_set NAME "VALUES": gives the history partitions of a migrated database
# another closed index set ("('_suffix', 'definition'), ..." as trackd.history_closed_indexes()
# returns it): redefines that function, so that trackd's indexer and partitions made later keep
# to the set, and on every partition drops the indexes of the set it had and builds the new
# one. Meant for empty partitions: it takes their locks and builds at once.
use_history_index_set() {
  psql_at "$1" -v ON_ERROR_STOP=1 -c "SET client_min_messages = warning" -c "DO \$set\$ DECLARE old text[]; r record; s record; BEGIN
      old := ARRAY(SELECT suffix FROM trackd.history_closed_indexes());
      EXECUTE \$def\$CREATE OR REPLACE FUNCTION trackd.history_closed_indexes()
        RETURNS TABLE (suffix text, definition text) LANGUAGE sql IMMUTABLE
        AS \$fn\$ VALUES $2 \$fn\$\$def\$;
      FOR r IN SELECT partition_name FROM trackd.history_partitions() LOOP
        FOR i IN 1 .. coalesce(array_length(old, 1), 0) LOOP
          EXECUTE format('DROP INDEX IF EXISTS trackd.%I', r.partition_name || old[i]);
        END LOOP;
        FOR s IN SELECT * FROM trackd.history_closed_indexes() LOOP
          EXECUTE format('CREATE INDEX %I ON trackd.%I %s', r.partition_name || s.suffix,
                         r.partition_name, s.definition);
        END LOOP;
      END LOOP; END \$set\$" >/dev/null || die "could not give $1 the history index set $2"
}
# use_database_collation_for_vehicle_ids NAME TABLE...: vehicle_id of these trackd tables in the
# database's collation, as before V0022 put them in byte order (COLLATE "C"); their indexes on it
# are rebuilt (meant for empty tables).
use_database_collation_for_vehicle_ids() {
  local db="$1" t
  shift
  for t in "$@"; do
    psql_at "$db" -v ON_ERROR_STOP=1 \
      -c "ALTER TABLE trackd.$t ALTER COLUMN vehicle_id TYPE text COLLATE pg_catalog.\"default\"" \
      >/dev/null || die "could not give $t.vehicle_id the database's collation on $db"
  done
}
# use_today_history_indexes NAME: the history partitions' indexes as the performance issue
# measured them (a GiST on geom, which V0013 made an SP-GiST, and the btree, on vehicle ids in
# the database's collation, which V0022 put in byte order), on a migrated
# database (and for the loader's --layout hot, which drops the closed set by its names).
use_today_history_indexes() {
  use_database_collation_for_vehicle_ids "$1" vehicle_telemetry_history
  use_history_index_set "$1" "('_geom_gist', 'USING gist (geom)'), ('_vehicle_time_idx', '(vehicle_id, recorded_at DESC)')"
}
drop_db() {
  psql_admin -c "SET client_min_messages = warning" \
    -c "DROP DATABASE IF EXISTS $1 WITH (FORCE)" >/dev/null 2>&1 || true
}

create_topic() { bash "$bench_repo/scripts/kafka.sh" create-topic "$1" "$2" >/dev/null; }
delete_topic() { bash "$bench_repo/scripts/kafka.sh" delete-topic "$1" >/dev/null 2>&1 || true; }

# CPU seconds (user + system) of a process and all its threads; with "children", plus the
# children it has reaped.
cpu_of() {
  local pid="$1" with_children="${2:-}"
  [[ -r /proc/$pid/stat ]] || {
    echo 0
    return
  }
  # Fields after "pid (comm) ": state=1 ... utime=12 stime=13 cutime=14 cstime=15.
  sed 's/^.*) //' "/proc/$pid/stat" | awk -v c="$with_children" -v hz="$clk_tck" \
    '{ t = $12 + $13; if (c == "children") t += $14 + $15; printf "%.2f\n", t / hz }'
}

pg_postmaster_pid() {
  local dir="${TRACKD_LOCAL_DIR:-$bench_repo/.local}/pg/data"
  head -n 1 "$dir/postmaster.pid" 2>/dev/null || true
}
kafka_pid() {
  cat "${TRACKD_LOCAL_DIR:-$bench_repo/.local}/kafka/kafka.pid" 2>/dev/null || true
}

# All CPU seconds the PostgreSQL cluster has used: the postmaster with its reaped children
# (ended backends) plus every live child. Differences between two readings give the cluster's
# CPU over an interval, whoever the backends served (other users of the cluster included).
pg_cpu_total() {
  local pm total child
  pm="$(pg_postmaster_pid)"
  [[ -n "$pm" ]] || {
    echo 0
    return
  }
  total="$(cpu_of "$pm" children)"
  for child in $(ps --ppid "$pm" -o pid= 2>/dev/null); do
    total="$(awk -v a="$total" -v b="$(cpu_of "$child")" 'BEGIN { printf "%.2f", a + b }')"
  done
  echo "$total"
}

# "busy idle" jiffies of the whole machine (/proc/stat), to tell how loaded it was.
machine_jiffies() {
  awk '/^cpu / { idle = $5 + $6; busy = $2 + $3 + $4 + $7 + $8 + $9; print busy, idle }' /proc/stat
}
# busy_share "BEFORE" "AFTER": the share of all cores that was busy between two readings.
busy_share() {
  awk -v a="$1" -v b="$2" 'BEGIN { split(a, x, " "); split(b, y, " ");
    busy = y[1] - x[1]; idle = y[2] - x[2];
    printf "%.2f", ((busy + idle) > 0 ? busy / (busy + idle) : 0) }'
}

# busy_seconds "BEFORE" "AFTER": CPU-seconds all cores were busy between two readings.
busy_seconds() {
  awk -v a="$1" -v b="$2" -v hz="$clk_tck" 'BEGIN { split(a, x, " "); split(b, y, " ");
    printf "%.2f", (y[1] - x[1]) / hz }'
}

# Waits (up to 10 s) until database $1 has no backend left but ours, so that the CPU of the
# backends that just ended is in the postmaster's reaped-children count.
# stop_trackd: SIGTERM to $trackd_pid, then wait for it; returns trackd's exit status and
# clears trackd_pid. trackd bounds its own stop (the writers' shutdown grace, the group leave),
# so one still running a minute later is hung: its threads' stacks go to $work/trackd-PID.stacks
# (with gdb, when installed), it is killed, and the driver stops naming that file. Without this
# a hang at exit held a benchmark until its outer timeout, with nothing to tell why.
stop_trackd() {
  local pid="$trackd_pid" i rc=0 stacks
  trackd_pid=""
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 600; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    stacks="$work/trackd-$pid.stacks"
    if command -v gdb >/dev/null; then
      gdb -p "$pid" -batch -ex 'thread apply all bt' >"$stacks" 2>&1 || true
    else
      echo "gdb is not installed: no stacks" >"$stacks"
    fi
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    die "trackd (pid $pid) had not exited 60 s after SIGTERM; its threads' stacks: $stacks"
  fi
  wait "$pid" 2>/dev/null || rc=$?  # 127 in a subshell (not its child): already gone
  return "$rc"
}

settle_backends() {
  local i n
  for i in $(seq 100); do
    n="$(psql_at "$1" -c 'SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()' 2>/dev/null || echo 0)"
    ((n == 0)) && break
    sleep 0.1
  done
  sleep 0.2
}

peak_rss_kib() { awk '/^VmHWM:/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0; }

# "comm cpu_seconds" per thread of a process.
threads_cpu() {
  local pid="$1" t
  for t in /proc/"$pid"/task/*; do
    [[ -r $t/stat ]] || continue
    printf '%s %s %s\n' "${t##*/}" "$(tr ' ' '_' <"$t/comm")" "$(cpu_of "$pid/task/${t##*/}")"
  done
}

git_describe() {
  local c
  if [[ -n "${TRACKD_BENCH_LABEL:-}" ]]; then
    echo "$TRACKD_BENCH_LABEL"
    return
  fi
  c="$(git -C "$bench_repo" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  if [[ -n "$(git -C "$bench_repo" status --porcelain -- server include sql 2>/dev/null)" ]]; then
    c="$c (with uncommitted changes in server/, include/ or sql/)"
  fi
  echo "$c"
}

machine_description() {
  local model mem load pgv postgis kafka
  model="$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo)"
  mem="$(awk '/^MemTotal:/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
  load="$(cut -d' ' -f1-3 /proc/loadavg)"
  pgv="$(psql -X -At "$admin_dsn" -c 'SHOW server_version' 2>/dev/null | cut -d' ' -f1)"
  postgis="$(psql_at trackd -c 'SELECT extversion FROM pg_extension WHERE extname = $$postgis$$' 2>/dev/null || true)"
  kafka="${KAFKA_VERSION:-4.4.0}"
  echo "$(nproc) cores ($model), $mem; load average at start $load; PostgreSQL $pgv, PostGIS ${postgis:-?}, Kafka $kafka${TRACKD_BENCH_DATABASE_OPTIONS:+; databases created with $TRACKD_BENCH_DATABASE_OPTIONS}"
}

# Appends a section to bench/RESULTS.md (stdin is the section's body).
append_results() {
  local title="$1"
  if [[ ! -f "$bench_results" ]]; then
    printf '# Benchmark results\n\nAppended by the bench/*.sh scripts, newest last (see docs/benchmarks.md).\n' \
      >"$bench_results"
  fi
  {
    printf '\n## %s — %s\n\n' "$(date -u '+%Y-%m-%d %H:%M UTC')" "$title"
    cat
  } >>"$bench_results"
}

# bench_workload NAME: the performance issue's workloads. Sets messages and vehicles where the
# options left them empty, and fleet_args (trackd-fleet's arguments beyond the defaults).
bench_workload() {
  fleet_args=()
  case "$1" in
    fleet) messages="${messages:-1000000}"; vehicles="${vehicles:-20000}" ;;
    moving) messages="${messages:-1000000}"; vehicles="${vehicles:-10000}" ;;
    each-vehicle-once)
      messages="${messages:-1000000}"; vehicles="${vehicles:-$messages}"
      fleet_args=(--duplicate-share 0) # a duplicate would send a vehicle twice
      ;;
    *) die "--workload: fleet, moving or each-vehicle-once, not '$1'" ;;
  esac
}
# bench_produce TOPIC: a 12-partition topic with $messages messages of $vehicles vehicles
# (trackd-fleet, $fleet_args); sets sent and accepted. Its summary is $work/fleet.json.
bench_produce() {
  create_topic "$1" 12
  "$bench_bin/tools/trackd-fleet" --brokers "$brokers" --topic "$1" --vehicles "$vehicles" \
    --messages "$messages" "${fleet_args[@]}" --quiet --summary-json "$work/fleet.json" \
    >"$work/fleet.log" 2>&1 || die "trackd-fleet failed: $(tail -n 5 "$work/fleet.log")"
  sent=$(jq -r .sent "$work/fleet.json")
  accepted=$(jq -r .accepted "$work/fleet.json")
}
# bench_scratch NAME: a driver's scratch state: tag (the pid), topic bench-NAME-<tag>, work (a
# fresh trackd-bench-NAME.* directory), no databases, no other topics (scratch_topics: a
# driver that makes more adds them there) and no trackd yet; bench_scratch_cleanup runs at exit.
bench_scratch() {
  tag="$$"
  topic="bench-$1-$tag"
  scratch_topics=()
  work="$(mktemp -d "${TMPDIR:-/tmp}/trackd-bench-$1.XXXXXX")"
  dbs=()
  trackd_pid=""
  trap bench_scratch_cleanup EXIT
  trap 'exit 130' INT TERM
}
# new_db NAME: a fresh migrated database, dropped at exit.
new_db() {
  dbs+=("$1")
  create_db "$1"
}
# bench_ingest_once DB GROUP: trackd (defaults) reads $topic from the start into DB as consumer
# group GROUP until all $sent messages are committed, then stops; its log is $work/trackd.log.
bench_ingest_once() {
  TRACKD_PG_DSN="$(dsn_of "$1")" TRACKD_KAFKA_BROKERS="$brokers" TRACKD_KAFKA_TOPIC="$topic" \
    TRACKD_KAFKA_GROUP="$2" TRACKD_HTTP_ENABLED=false \
    "$bench_bin/server/trackd" run >"$work/trackd.log" 2>&1 &
  trackd_pid=$!
  "$bench_bin/bench/trackd-bench-watch" --dsn "$(dsn_of "$1")" --group "$2" --topic "$topic" \
    --total "$sent" --interval-ms 100 --timeout-s 900 >"$work/watch.out" ||
    die "trackd did not commit everything (log: $work/trackd.log)"
  stop_trackd || true
}
# bench_scratch_cleanup: the EXIT trap of a driver that keeps its scratch state in trackd_pid,
# dbs, topic, scratch_topics and work: stops trackd, drops the databases and the topics, and
# removes $work unless the run failed.
bench_scratch_cleanup() {
  local rc=$? db t
  # In a subshell: a hang reported there ends the subshell, not the cleanup.
  [[ -z "${trackd_pid:-}" ]] || (stop_trackd) || true
  for db in "${dbs[@]}"; do drop_db "$db"; done
  delete_topic "$topic"
  for t in "${scratch_topics[@]}"; do delete_topic "$t"; done
  if ((rc != 0)); then say "failed (exit $rc); files kept in $work"; else rm -rf -- "$work"; fi
  exit $rc
}

# pgbench per-transaction logs (column 3: latency in µs) -> "p50 p90 p99" in ms.
pg_percentiles() {
  cat "$@" | awk '{print $3}' | sort -n | awk '{a[NR]=$1} END{
    printf "%.2f %.2f %.2f", a[int(NR*0.50)]/1000, a[int(NR*0.90)]/1000, a[int(NR*0.99)]/1000}'
}
# pgbench_steady DB FILE MODE LABEL SECONDS: pgbench with FILE on DB, one client, protocol MODE,
# for SECONDS; p50 / p99 (ms) and the number of runs into $work/LABEL.kv, counted from the
# connection's seventh run on: the plan cache makes five custom plans and then decides, so only
# from the seventh on does a prepared statement run as it will for the rest of the connection's
# life. Every protocol is counted the same way.
pgbench_steady() {
  local db="$1" file="$2" mode="$3" label="$4" seconds="$5" dir="$work/pgb_$4" n p50 p99
  mkdir -p "$dir"
  (cd "$dir" && pgbench -n -h 127.0.0.1 -p "$pg_port" -U postgres -M "$mode" -c 1 -T "$seconds" -l \
    --random-seed 42 -f "$file" "$db" >out 2>&1) || die "pgbench $label: $(tail -n 3 "$dir/out")"
  tail -n +7 "$dir"/pgbench_log.* >"$dir/steady"
  n=$(wc -l <"$dir/steady")
  ((n >= 1)) || die "pgbench $label: no run after the first six in ${seconds}s (raise --seconds)"
  read -r p50 _ p99 <<<"$(pg_percentiles "$dir/steady")"
  printf 'p50=%s\np99=%s\nn=%s\n' "$p50" "$p99" "$n" >"$work/$label.kv"
  say "$label: p50 $p50 ms, p99 $p99 ms over $n runs (after the first six)"
}
# kv FILE KEY: the value of a key=value line.
kv() { sed -n "s/^$2=//p" "$1" | tail -n 1; }
# Arithmetic with floats.
calc() { awk "BEGIN { printf \"${2:-%.2f}\", $1 }"; }
