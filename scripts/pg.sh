#!/usr/bin/env bash
# A throwaway PostgreSQL 15 + PostGIS 3 cluster in a project-local folder, for development,
# integration tests and benchmarks. No system service, no password: trust authentication on
# 127.0.0.1 and the unix socket only. Never point production at it.
#
#   scripts/pg.sh start                 initdb if needed, start, wait until ready, create the
#                                       database and the postgis extension (idempotent)
#   scripts/pg.sh stop [fast|immediate] stop the server (default: fast)
#   scripts/pg.sh restart [immediate]   stop (fast, or immediate) then start
#   scripts/pg.sh status                exit 0 when running, 3 when not
#   scripts/pg.sh psql [args...]        psql against the local database
#   scripts/pg.sh dsn                   print the libpq URI, e.g. for TRACKD_PG_DSN
#   scripts/pg.sh reset                 stop and delete the data folder
#
# Environment:
#   TRACKD_LOCAL_DIR  local state folder (default: <repo>/.local); data in pg/data,
#                     socket in pg/run, log in logs/postgres.log
#   LOCAL_PG_PORT     TCP port on 127.0.0.1 (default 55432)
#   LOCAL_PG_DB       database to create (default trackd)
#   LOCAL_PG_TIMEOUT  seconds to wait for start/stop (default 60)
#   LOCAL_PG_OPTS     extra server options, passed to pg_ctl -o, e.g. "-c work_mem=64MB"
#   LOCAL_PG_BIN      PostgreSQL binaries (default /usr/lib/postgresql/15/bin)
#
# PostgreSQL refuses to run as root: when this script runs as root (CI), the server commands run
# as the `postgres` system user and the data folder is owned by it.
set -euo pipefail

SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"
REPO_DIR="$(dirname -- "$SCRIPT_DIR")"

LOCAL_DIR="${TRACKD_LOCAL_DIR:-$REPO_DIR/.local}"
PG_PORT="${LOCAL_PG_PORT:-55432}"
PG_DB="${LOCAL_PG_DB:-trackd}"
PG_TIMEOUT="${LOCAL_PG_TIMEOUT:-60}"
PG_OPTS="${LOCAL_PG_OPTS:-}"
PG_BIN="${LOCAL_PG_BIN:-/usr/lib/postgresql/15/bin}"
PG_HOST="127.0.0.1"
PG_SUPERUSER="postgres"
PG_OS_USER="postgres" # only used when running as root

PG_ROOT="$LOCAL_DIR/pg"
PG_DATA="$PG_ROOT/data"
PG_RUN="$PG_ROOT/run"
LOG_DIR="$LOCAL_DIR/logs"
PG_LOG="$LOG_DIR/postgres.log"

say() { echo "pg: $*"; }
die() {
  echo "pg: error: $*" >&2
  exit 1
}

usage() {
  sed -n '2,/^set -euo pipefail/{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}"
}

is_root() { [[ $(id -u) -eq 0 ]]; }

# Runs a command as the user that owns the cluster: `postgres` when we are root, else ourselves.
# From / so that the postgres user never trips over an unreadable working directory.
as_owner() {
  if is_root; then
    (cd / && runuser -u "$PG_OS_USER" -- "$@")
  else
    "$@"
  fi
}

check_inputs() {
  [[ $PG_PORT =~ ^[0-9]+$ ]] && ((PG_PORT > 0 && PG_PORT < 65536)) ||
    die "LOCAL_PG_PORT must be a TCP port number, got '$PG_PORT'"
  [[ $PG_TIMEOUT =~ ^[0-9]+$ ]] && ((PG_TIMEOUT > 0)) ||
    die "LOCAL_PG_TIMEOUT must be a positive number of seconds, got '$PG_TIMEOUT'"
  [[ -n $PG_DB ]] || die "LOCAL_PG_DB must not be empty"
  for b in initdb pg_ctl pg_isready psql; do
    [[ -x $PG_BIN/$b ]] || die "$PG_BIN/$b not found: install postgresql-15 (scripts/setup.sh) or set LOCAL_PG_BIN"
  done
  if is_root; then
    id -u "$PG_OS_USER" >/dev/null 2>&1 ||
      die "running as root needs the '$PG_OS_USER' system user (installed with postgresql-15)"
  fi
}

# psql as the superuser against the local server; extra args go to psql.
pg_psql() {
  "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$PG_HOST" -p "$PG_PORT" -U "$PG_SUPERUSER" "$@"
}

# 0 when the postmaster of OUR data folder is running.
server_running() {
  [[ -f $PG_DATA/PG_VERSION ]] || return 1
  as_owner "$PG_BIN/pg_ctl" status -D "$PG_DATA" >/dev/null 2>&1
}

server_pid() {
  head -n 1 "$PG_DATA/postmaster.pid" 2>/dev/null || true
}

# 0 when something answers PostgreSQL's protocol on our port (ours or not).
port_answers() {
  local rc=0
  "$PG_BIN/pg_isready" -q -h "$PG_HOST" -p "$PG_PORT" -U "$PG_SUPERUSER" -d postgres -t 2 >/dev/null 2>&1 || rc=$?
  ((rc == 0 || rc == 1)) # 0 accepting, 1 rejecting (starting up); 2 no response, 3 bad params
}

show_log_tail() {
  if [[ -f $PG_LOG ]]; then
    echo "pg: last 50 lines of $PG_LOG:" >&2
    tail -n 50 "$PG_LOG" >&2 || true
  else
    echo "pg: no log at $PG_LOG" >&2
  fi
}

fail_with_log() {
  echo "pg: error: $*" >&2
  show_log_tail
  exit 1
}

prepare_dirs() {
  mkdir -p "$PG_ROOT" "$PG_RUN" "$LOG_DIR"
  touch "$PG_LOG"
  if is_root; then
    chown "$PG_OS_USER:" "$PG_ROOT" "$PG_RUN" "$PG_LOG"
    # A data folder created by another user (e.g. an earlier non-root run) is handed over.
    if [[ -d $PG_DATA && $(stat -c %U "$PG_DATA") != "$PG_OS_USER" ]]; then
      say "handing $PG_DATA over to the $PG_OS_USER user"
      chown -R "$PG_OS_USER:" "$PG_DATA"
    fi
    # A checkout in a private folder (mktemp -d is 0700) is not traversable by the server's
    # user: grant traverse-only (o+x, no listing) on each parent folder that lacks it.
    local d="$PG_ROOT"
    while [[ "$d" != / ]]; do
      d="$(dirname "$d")"
      if ! as_owner test -x "$d"; then
        say "granting the $PG_OS_USER user traverse access (o+x) to $d"
        chmod o+x "$d"
      fi
    done
    as_owner test -w "$PG_ROOT" -a -w "$PG_LOG" ||
      die "the $PG_OS_USER user cannot reach $PG_ROOT: every parent folder needs o+x (or set TRACKD_LOCAL_DIR elsewhere)"
  elif [[ -d $PG_DATA && ! -O $PG_DATA ]]; then
    die "$PG_DATA belongs to $(stat -c %U "$PG_DATA"), not $(id -un): run as root, or '$0 reset' as root first"
  fi
  chmod 0700 "$PG_RUN"
  # Unix socket paths are limited to 107 bytes.
  local sock="$PG_RUN/.s.PGSQL.$PG_PORT"
  ((${#sock} <= 107)) || die "socket path too long (${#sock} > 107 bytes): $sock; set TRACKD_LOCAL_DIR to a shorter path"
}

init_cluster() {
  [[ -f $PG_DATA/PG_VERSION ]] && return 0
  if [[ -e $PG_DATA ]]; then
    die "$PG_DATA exists but is not a PostgreSQL data folder (an interrupted initdb?): run '$0 reset'"
  fi
  local tmp="$PG_ROOT/data.initdb"
  rm -rf -- "$tmp"
  local locale=C
  if locale -a 2>/dev/null | grep -qiE '^c\.utf-?8$'; then locale=C.UTF-8; fi
  say "initdb into $PG_DATA (locale $locale, encoding UTF8)"
  # Into a temporary folder, then renamed: an interrupted initdb never leaves a half cluster.
  if ! as_owner "$PG_BIN/initdb" -D "$tmp" -U "$PG_SUPERUSER" --encoding=UTF8 --locale="$locale" \
    --auth-local=trust --auth-host=trust >>"$PG_LOG" 2>&1; then
    rm -rf -- "$tmp"
    fail_with_log "initdb failed"
  fi
  mv -- "$tmp" "$PG_DATA"
}

# Settings are rewritten on every start, so editing this script and restarting applies them.
write_config() {
  local conf="$PG_DATA/trackd.conf"
  cat >"$conf" <<EOF
# Written by scripts/pg.sh on every start; edits here are lost. Extra settings: LOCAL_PG_OPTS.
listen_addresses = '$PG_HOST'
port = $PG_PORT
unix_socket_directories = '$PG_RUN'

# Sized for a 2-core / 24 GiB machine running ingest tests and benchmarks.
max_connections = 200
shared_buffers = 1GB
effective_cache_size = 12GB
work_mem = 16MB
maintenance_work_mem = 512MB
wal_buffers = 64MB
max_wal_size = 4GB
min_wal_size = 1GB
checkpoint_timeout = 15min
checkpoint_completion_target = 0.9
wal_compression = off
random_page_cost = 1.1
effective_io_concurrency = 200
# Partitioned history: queries and DDL touch many partitions, each needing a lock slot.
max_locks_per_transaction = 128
# JIT compiles expensive-looking PostGIS queries for longer than they run.
jit = off

# Durability stays on: benchmarks must measure what production would do.
fsync = on
synchronous_commit = on
full_page_writes = on

shared_preload_libraries = 'pg_stat_statements'
track_io_timing = on

log_line_prefix = '%m [%p] %q%u@%d '
log_checkpoints = on
log_lock_waits = on
log_autovacuum_min_duration = 10s
EOF
  if is_root; then chown "$PG_OS_USER:" "$conf"; fi
  if ! grep -q "^include_if_exists = 'trackd.conf'" "$PG_DATA/postgresql.conf"; then
    printf "\n# trackd local cluster settings (scripts/pg.sh)\ninclude_if_exists = 'trackd.conf'\n" \
      >>"$PG_DATA/postgresql.conf"
  fi
}

# Until START_DEADLINE (set by cmd_start: one LOCAL_PG_TIMEOUT for the whole start).
wait_ready() {
  while ((SECONDS < START_DEADLINE)); do
    if "$PG_BIN/pg_isready" -q -h "$PG_HOST" -p "$PG_PORT" -U "$PG_SUPERUSER" -d postgres -t 2 >/dev/null 2>&1 &&
      pg_psql -d postgres -Atc 'SELECT 1' >/dev/null 2>&1; then
      return 0
    fi
    server_running || fail_with_log "the server exited before accepting connections"
    sleep 0.3
  done
  fail_with_log "the server did not accept 'SELECT 1' on $PG_HOST:$PG_PORT within ${PG_TIMEOUT}s (LOCAL_PG_TIMEOUT)"
}

ensure_database() {
  pg_psql -d postgres -v db="$PG_DB" <<'SQL' || fail_with_log "could not create database $PG_DB"
SELECT format('CREATE DATABASE %I', :'db')
WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = :'db') \gexec
SQL
  pg_psql -d "$PG_DB" -c 'SET client_min_messages = warning' \
    -c 'CREATE EXTENSION IF NOT EXISTS postgis' \
    -c 'CREATE EXTENSION IF NOT EXISTS pg_stat_statements' ||
    fail_with_log "could not create the postgis extension in $PG_DB (is postgresql-15-postgis-3 installed?)"
}

cmd_start() {
  START_DEADLINE=$((SECONDS + PG_TIMEOUT))
  prepare_dirs
  if server_running; then
    say "already running (pid $(server_pid))"
  else
    if port_answers; then
      die "another PostgreSQL server answers on $PG_HOST:$PG_PORT (not the one in $PG_DATA): stop it or set LOCAL_PG_PORT"
    fi
    init_cluster
    write_config
    say "starting on $PG_HOST:$PG_PORT, log $PG_LOG"
    local -a opts=()
    [[ -n $PG_OPTS ]] && opts=(-o "$PG_OPTS")
    if ! as_owner "$PG_BIN/pg_ctl" start -D "$PG_DATA" -l "$PG_LOG" -w -t "$PG_TIMEOUT" "${opts[@]}" >/dev/null 2>&1; then
      fail_with_log "the server failed to start, or took longer than ${PG_TIMEOUT}s (LOCAL_PG_TIMEOUT)"
    fi
  fi
  wait_ready
  ensure_database
  say "ready: $(cmd_dsn)"
}

cmd_stop() {
  local mode="${1:-fast}"
  [[ $mode == fast || $mode == immediate ]] || die "stop mode must be fast or immediate, got '$mode'"
  if ! server_running; then
    say "not running"
    return 0
  fi
  say "stopping (mode $mode, pid $(server_pid))"
  if ! as_owner "$PG_BIN/pg_ctl" stop -D "$PG_DATA" -m "$mode" -w -t "$PG_TIMEOUT" >/dev/null 2>&1; then
    fail_with_log "the server did not stop within ${PG_TIMEOUT}s"
  fi
  say "stopped"
}

cmd_restart() {
  local mode="${1:-fast}"
  [[ $mode == fast || $mode == immediate ]] || die "restart mode must be immediate (or fast, the default), got '$mode'"
  cmd_stop "$mode"
  cmd_start
}

cmd_status() {
  if ! [[ -f $PG_DATA/PG_VERSION ]]; then
    say "not initialised ($PG_DATA)"
    return 3
  fi
  if ! server_running; then
    say "not running (data $PG_DATA)"
    return 3
  fi
  local state="not accepting connections"
  if "$PG_BIN/pg_isready" -q -h "$PG_HOST" -p "$PG_PORT" -U "$PG_SUPERUSER" -d postgres -t 2 >/dev/null 2>&1; then
    state="accepting connections"
  fi
  say "running (pid $(server_pid)), $state on $PG_HOST:$PG_PORT"
  say "data $PG_DATA, log $PG_LOG"
  say "dsn $(cmd_dsn)"
}

cmd_psql() {
  # Through the environment, so that arguments (-d, -U, ...) still override.
  PGHOST="$PG_HOST" PGPORT="$PG_PORT" PGUSER="$PG_SUPERUSER" PGDATABASE="$PG_DB" \
    exec "$PG_BIN/psql" "$@"
}

cmd_dsn() {
  echo "postgresql://$PG_SUPERUSER@$PG_HOST:$PG_PORT/$PG_DB"
}

cmd_reset() {
  if server_running; then cmd_stop immediate; fi
  # Guard the rm: only ever our own pg folder.
  [[ $PG_DATA == */pg/data && $PG_RUN == */pg/run ]] || die "refusing to delete unexpected path $PG_DATA"
  rm -rf -- "$PG_DATA" "$PG_RUN" "$PG_ROOT/data.initdb"
  say "deleted $PG_DATA"
}

main() {
  local cmd="${1:-}"
  [[ $# -gt 0 ]] && shift
  case "$cmd" in
    -h | --help | help)
      usage
      exit 0
      ;;
    "") usage >&2 && exit 2 ;;
    *) ;;
  esac
  check_inputs
  case "$cmd" in
    start)
      (($# == 0)) || die "usage: $0 start"
      cmd_start
      ;;
    stop)
      (($# <= 1)) || die "usage: $0 stop [fast|immediate]"
      cmd_stop "$@"
      ;;
    restart)
      (($# <= 1)) || die "usage: $0 restart [immediate]"
      cmd_restart "$@"
      ;;
    status) cmd_status ;;
    psql) cmd_psql "$@" ;;
    dsn) cmd_dsn ;;
    reset) cmd_reset ;;
    *)
      echo "pg: unknown command '$cmd'" >&2
      usage >&2
      exit 2
      ;;
  esac
}

main "$@"
