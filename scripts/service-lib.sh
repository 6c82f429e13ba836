#!/usr/bin/env bash
# Shared by scripts/s3.sh and scripts/iceberg-rest.sh (sourced, not run): their state and log
# paths, messages, the server's pid, waiting for a server the script started in the background,
# stopping it and its status. The sourcing script sets repo, service (its name: state in
# <TRACKD_LOCAL_DIR>/<service>/, log in logs/<service>.log), port, port_var (the variable that
# sets the port) and process_marker (a word of the server's command line), and defines answers.

local_dir="${TRACKD_LOCAL_DIR:-$repo/.local}"
state="$local_dir/$service"
log_dir="$local_dir/logs"
log_file="$log_dir/$service.log"
pid_file="$state/server.pid"

say() { echo "$service: $*"; }
die() {
  echo "$service: error: $*" >&2
  exit 1
}

[[ "$port" =~ ^[0-9]+$ ]] || die "$port_var must be a number, got '$port'"

# The pid this script recorded for the server it started, if any.
recorded_pid() {
  [[ -f "$pid_file" ]] || return 1
  local pid
  pid="$(tr -dc '0-9' <"$pid_file")"
  [[ -n "$pid" ]] || return 1
  echo "$pid"
}

# The pid of the server this script started, if it still runs.
running_pid() {
  local pid
  pid="$(recorded_pid)" && [[ -r "/proc/$pid/cmdline" ]] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q "$process_marker" || return 1
  echo "$pid"
}

# The server this script has just started is still alive: its pid is there and not a zombie.
# (running_pid would not know it yet: until the background subshell has exec'd the server, its
# command line is the subshell's, without the process marker; on a busy machine that window
# was long enough for a start to be taken for an exit.)
started_alive() {
  local pid
  pid="$(recorded_pid)" && [[ -r "/proc/$pid/stat" ]] || return 1
  [[ "$(sed 's/^.*) //' "/proc/$pid/stat" | cut -d' ' -f1)" != Z ]]
}

# wait_ready SECONDS INTERVAL: until `answers` succeeds; stops the script if the server exits or
# does not answer within SECONDS.
wait_ready() {
  local deadline=$((SECONDS + $1))
  while ((SECONDS < deadline)); do
    if answers; then
      say "ready on 127.0.0.1:$port (pid $(cat "$pid_file"))"
      return 0
    fi
    started_alive || { tail -n 30 "$log_file" >&2; die "the server exited during start-up"; }
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

# Exit 0 when it runs and answers.
status() {
  local pid
  if pid="$(running_pid)" && answers; then
    say "running (pid $pid) on 127.0.0.1:$port"
  else
    say "not running"
    exit 1
  fi
}
