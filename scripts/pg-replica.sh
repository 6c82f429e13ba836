#!/usr/bin/env bash
# A streaming replica (hot standby) of the local PostgreSQL cluster of scripts/pg.sh, on
# 127.0.0.1, for the API's reads from a replica (`http.pg_dsn`) in tests, the demo and benchmarks.
# Made with `pg_basebackup -R -X stream` from the running primary (trust authentication on
# loopback, as the primary); started again as it is when it exists and belongs to that primary,
# made anew when the primary was re-initialised or no longer has the WAL the replica needs
# (after a long stop: it would never catch up, and reads would see old data).
#
#   scripts/pg-replica.sh start     base backup if needed, start, wait until it accepts reads
#   scripts/pg-replica.sh stop      stop (fast)
#   scripts/pg-replica.sh status    exit 0 when running, 3 when not
#   scripts/pg-replica.sh psql ...  psql against the replica's database
#   scripts/pg-replica.sh dsn       its libpq URI, e.g. for TRACKD_HTTP_PG_DSN
#   scripts/pg-replica.sh reset     stop and delete its data folder
#
# Environment (the primary's variables of scripts/pg.sh apply too: LOCAL_PG_PORT, LOCAL_PG_DB,
# LOCAL_PG_BIN, TRACKD_LOCAL_DIR, LOCAL_PG_TIMEOUT):
#   LOCAL_PG_REPLICA_PORT  TCP port on 127.0.0.1 (default 55433); data in pg-replica/data, log in
#                          logs/postgres-replica.log
set -euo pipefail

SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"
REPO_DIR="$(dirname -- "$SCRIPT_DIR")"
LOCAL_DIR="${TRACKD_LOCAL_DIR:-$REPO_DIR/.local}"
PRIMARY_PORT="${LOCAL_PG_PORT:-55432}"
PORT="${LOCAL_PG_REPLICA_PORT:-55433}"
PG_DB="${LOCAL_PG_DB:-trackd}"
PG_BIN="${LOCAL_PG_BIN:-/usr/lib/postgresql/15/bin}"
TIMEOUT="${LOCAL_PG_TIMEOUT:-60}"
HOST="127.0.0.1"
ROOT="$LOCAL_DIR/pg-replica"
DATA="$ROOT/data"
RUN="$ROOT/run"
LOG_DIR="$LOCAL_DIR/logs"
LOG="$LOG_DIR/postgres-replica.log"
PRIMARY_DATA="$LOCAL_DIR/pg/data"
OS_USER="postgres" # only when running as root

say() { echo "pg-replica: $*"; }
die() {
  echo "pg-replica: error: $*" >&2
  exit 1
}
is_root() { [[ $(id -u) -eq 0 ]]; }
as_owner() {
  if is_root; then (cd / && runuser -u "$OS_USER" -- "$@"); else "$@"; fi
}
fail_with_log() {
  echo "pg-replica: error: $*" >&2
  [[ -f $LOG ]] && tail -n 40 "$LOG" >&2
  exit 1
}

[[ $PORT =~ ^[0-9]+$ ]] && ((PORT > 0 && PORT < 65536)) ||
  die "LOCAL_PG_REPLICA_PORT must be a TCP port number, got '$PORT'"
[[ $PORT != "$PRIMARY_PORT" ]] || die "LOCAL_PG_REPLICA_PORT must differ from LOCAL_PG_PORT ($PORT)"

running() {
  [[ -f $DATA/PG_VERSION ]] && as_owner "$PG_BIN/pg_ctl" status -D "$DATA" >/dev/null 2>&1
}

system_id() {
  as_owner "$PG_BIN/pg_controldata" -D "$1" 2>/dev/null | sed -n 's/^Database system identifier: *//p'
}

# The replica's own settings, over what the base backup copied from the primary.
write_config() {
  cat >"$DATA/trackd.conf" <<CONF
# Written by scripts/pg-replica.sh on every start; edits here are lost.
listen_addresses = '$HOST'
port = $PORT
unix_socket_directories = '$RUN'
max_connections = 200
shared_buffers = 256MB
effective_cache_size = 4GB
work_mem = 16MB
max_locks_per_transaction = 128
jit = off
hot_standby = on
# Queries on the replica are not cancelled for replay at once (tests pause replay on purpose).
max_standby_streaming_delay = 30s
hot_standby_feedback = on
shared_preload_libraries = 'pg_stat_statements'
log_line_prefix = '%m [%p] %q%u@%d '
CONF
  if is_root; then chown "$OS_USER:" "$DATA/trackd.conf"; fi
}

replica_sql() { "$PG_BIN/psql" -X -h "$HOST" -p "$PORT" -U postgres -d postgres -Atc "$1"; }

cmd_start() {
  mkdir -p "$ROOT" "$RUN" "$LOG_DIR"
  touch "$LOG"
  if is_root; then chown "$OS_USER:" "$ROOT" "$RUN" "$LOG"; fi
  chmod 0700 "$RUN"
  if running; then
    say "already running on $HOST:$PORT"
    return 0
  fi
  start_replica "$(($(stat -c %s "$LOG") + 1))"
}

# start_replica LOG_OFFSET [again]: base backup if needed, start, wait for reads and streaming.
start_replica() {
  "$PG_BIN/pg_isready" -q -h "$HOST" -p "$PRIMARY_PORT" -t 5 ||
    die "the primary does not answer on $HOST:$PRIMARY_PORT: run scripts/pg.sh start first"
  if [[ -f $DATA/PG_VERSION && -d $PRIMARY_DATA ]] &&
    [[ "$(system_id "$DATA")" != "$(system_id "$PRIMARY_DATA")" ]]; then
    say "the primary was initialised anew: making the replica again"
    rm -rf -- "$DATA"
  fi
  if [[ ! -f $DATA/PG_VERSION ]]; then
    rm -rf -- "$DATA" "$ROOT/data.backup"
    say "pg_basebackup from $HOST:$PRIMARY_PORT"
    # Into a temporary folder, then renamed: an interrupted backup never leaves half a replica.
    as_owner "$PG_BIN/pg_basebackup" -h "$HOST" -p "$PRIMARY_PORT" -U postgres \
      -D "$ROOT/data.backup" -R -X stream -c fast >>"$LOG" 2>&1 ||
      fail_with_log "pg_basebackup failed"
    mv -- "$ROOT/data.backup" "$DATA"
  fi
  write_config
  say "starting on $HOST:$PORT, log $LOG"
  as_owner "$PG_BIN/pg_ctl" start -D "$DATA" -l "$LOG" -w -t "$TIMEOUT" >/dev/null 2>&1 ||
    fail_with_log "the replica failed to start within ${TIMEOUT}s"
  local deadline=$((SECONDS + TIMEOUT))
  until [[ "$(replica_sql 'SELECT pg_is_in_recovery()' 2>/dev/null)" == t ]]; do
    ((SECONDS < deadline)) || fail_with_log "the replica does not answer as a standby on $HOST:$PORT"
    sleep 0.3
  done
  # Streaming; or the primary refuses to stream to it (it removed the WAL the replica needs
  # next, or the replica names a slot it does not have): then made anew, once.
  local log_from="$1" receiver=""
  deadline=$((SECONDS + 15))
  while ((SECONDS < deadline)); do
    receiver="$(replica_sql 'SELECT status FROM pg_stat_wal_receiver' 2>/dev/null || true)"
    [[ $receiver == streaming ]] && break
    if tail -c +"$log_from" "$LOG" | grep -Eq 'requested WAL segment .* has already been removed|could not start WAL streaming'; then
      [[ ${2:-} != again ]] || fail_with_log "the replica made anew cannot stream from the primary"
      say "the primary cannot stream to this replica: making it again"
      as_owner "$PG_BIN/pg_ctl" stop -D "$DATA" -m fast -w -t "$TIMEOUT" >/dev/null 2>&1 || true
      rm -rf -- "$DATA"
      start_replica "$(($(stat -c %s "$LOG") + 1))" again
      return
    fi
    sleep 0.3
  done
  [[ $receiver == streaming ]] || say "warning: not streaming from the primary yet (status '${receiver:-none}'; see $LOG)"
  say "ready: $(cmd_dsn)"
}

cmd_stop() {
  if ! running; then
    say "not running"
    return 0
  fi
  as_owner "$PG_BIN/pg_ctl" stop -D "$DATA" -m fast -w -t "$TIMEOUT" >/dev/null 2>&1 ||
    fail_with_log "the replica did not stop within ${TIMEOUT}s"
  say "stopped"
}

cmd_dsn() { echo "postgresql://postgres@$HOST:$PORT/$PG_DB"; }

case "${1:-}" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status)
    if running; then
      say "running on $HOST:$PORT (data $DATA)"
    else
      say "not running"
      exit 3
    fi
    ;;
  psql)
    shift
    PGHOST="$HOST" PGPORT="$PORT" PGUSER=postgres PGDATABASE="$PG_DB" exec "$PG_BIN/psql" "$@"
    ;;
  dsn) cmd_dsn ;;
  reset)
    cmd_stop
    [[ $DATA == */pg-replica/data ]] || die "refusing to delete unexpected path $DATA"
    rm -rf -- "$DATA" "$ROOT/data.backup" "$RUN"
    say "deleted $DATA"
    ;;
  *)
    sed -n '2,/^set -euo pipefail/{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}" >&2
    exit 2
    ;;
esac
