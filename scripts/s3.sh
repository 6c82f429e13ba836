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
python="$repo/.venv/bin/python"

service=s3 port_var=LOCAL_S3_PORT process_marker=moto.server
# shellcheck source=scripts/service-lib.sh
source "$here/service-lib.sh"
answers() { curl -fsS -m 2 -o /dev/null "http://127.0.0.1:$port/" 2>/dev/null; }

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
  status) status ;;
  logs) [[ -f "$log_file" ]] && cat "$log_file" ;;
  endpoint) echo "http://127.0.0.1:$port" ;;
  *)
    sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}" >&2
    exit 2
    ;;
esac
