#!/usr/bin/env bash
# An S3-compatible object store for the archive tests: moto's standalone server (moto.server from
# the project's .venv, scripts/python-requirements.txt), on 127.0.0.1. It keeps every object in
# memory (a restart empties it), answers any key pair and starts in about a second. Buckets are
# created by the tests (trackd never creates one). Why moto: SeaweedFS would have to be built
# from its Go module, and MinIO's server is AGPL (docs/archive.md).
#
#   scripts/s3.sh start     start and wait until it answers
#   scripts/s3.sh stop      SIGTERM, then SIGKILL after 10 s
#   scripts/s3.sh status    exit 0 when it answers
#   scripts/s3.sh logs      print its log
#   scripts/s3.sh endpoint  print its endpoint URL
#
# Environment:
#   LOCAL_S3_PORT      port on 127.0.0.1 (default 55900)
#   TRACKD_LOCAL_DIR   state root (default <repo>/.local): s3/server.pid, logs/s3.log
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
port="${LOCAL_S3_PORT:-55900}"
local_dir="${TRACKD_LOCAL_DIR:-$repo/.local}"
state="$local_dir/s3"
log_dir="$local_dir/logs"
log_file="$log_dir/s3.log"
pid_file="$state/server.pid"
python="$repo/.venv/bin/python"

say() { echo "s3: $*"; }
die() {
  echo "s3: error: $*" >&2
  exit 1
}

[[ "$port" =~ ^[0-9]+$ ]] || die "LOCAL_S3_PORT must be a number, got '$port'"

running_pid() {
  [[ -f "$pid_file" ]] || return 1
  local pid
  pid="$(tr -dc '0-9' <"$pid_file")"
  [[ -n "$pid" && -r "/proc/$pid/cmdline" ]] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q "moto.server" || return 1
  echo "$pid"
}

answers() { curl -fsS -m 2 -o /dev/null "http://127.0.0.1:$port/" 2>/dev/null; }
# shellcheck source=scripts/service-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/service-lib.sh"

start() {
  if pid="$(running_pid)" && answers; then
    say "already running (pid $pid) on 127.0.0.1:$port"
    return 0
  fi
  [[ -x "$python" ]] || bash "$here/python-env.sh"
  "$python" -c "import moto.server" 2>/dev/null || die "moto is not in $repo/.venv (run scripts/python-env.sh)"
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    die "port $port on 127.0.0.1 is in use by another process; set LOCAL_S3_PORT"
  fi
  mkdir -p "$state" "$log_dir"
  echo "==== s3.sh start $(date -u +%Y-%m-%dT%H:%M:%SZ) on 127.0.0.1:$port ====" >>"$log_file"
  (
    cd "$state"
    # moto answers every AWS service on one port; it loads a backend (here S3) on first use.
    exec setsid nohup "$python" -m moto.server -H 127.0.0.1 -p "$port" </dev/null >>"$log_file" 2>&1
  ) &
  echo $! >"$pid_file"
  wait_ready 30 0.2
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status)
    if pid="$(running_pid)" && answers; then
      say "running (pid $pid) on 127.0.0.1:$port"
    else
      say "not running"
      exit 1
    fi
    ;;
  logs) [[ -f "$log_file" ]] && cat "$log_file" ;;
  endpoint) echo "http://127.0.0.1:$port" ;;
  *)
    sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}" >&2
    exit 2
    ;;
esac
