#!/usr/bin/env bash
# Shared by scripts/s3.sh and scripts/iceberg-rest.sh (sourced, not run): waiting for a server
# the script started in the background, and stopping it. The sourcing script defines say, die,
# running_pid, answers and the variables port, pid_file and log_file.

# wait_ready SECONDS INTERVAL: until `answers` succeeds; stops the script if the server exits or
# does not answer within SECONDS.
wait_ready() {
  local deadline=$((SECONDS + $1))
  while ((SECONDS < deadline)); do
    if answers; then
      say "ready on 127.0.0.1:$port (pid $(cat "$pid_file"))"
      return 0
    fi
    running_pid >/dev/null || { tail -n 30 "$log_file" >&2; die "the server exited during start-up"; }
    sleep "$2"
  done
  tail -n 30 "$log_file" >&2
  die "no answer on 127.0.0.1:$port within $1 s"
}

# SIGTERM, up to 10 s for it to exit, then SIGKILL.
stop() {
  local pid i
  if ! pid="$(running_pid)"; then
    say "not running"
    rm -f "$pid_file"
    return 0
  fi
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 40; i++)); do
    [[ -r "/proc/$pid/cmdline" ]] || break
    sleep 0.25
  done
  [[ -r "/proc/$pid/cmdline" ]] && kill -KILL "$pid" 2>/dev/null || true
  rm -f "$pid_file"
  say "stopped"
}
