#!/usr/bin/env bash
# Sourced by bench/lib.sh and bench/api/lib.sh: one benchmark at a time on this machine. Two at
# once measure each other (bench/RESULTS.md 2026-12-02 14:14 UTC: a freshness run that shared
# the cores with a COPY-limit load). A benchmark that another one starts inherits the lock.
# shellcheck disable=SC2034 # bench_lock_fd stays open for the life of the script

if [[ -z "${TRACKD_BENCH_LOCKED:-}" ]]; then
  bench_lock_file="${TMPDIR:-/tmp}/trackd-bench.lock"
  exec {bench_lock_fd}>"$bench_lock_file"
  if ! flock -n "$bench_lock_fd"; then
    echo "bench: another benchmark is running on this machine (it holds $bench_lock_file);" \
      "wait for it to end: side by side, each measures the other" >&2
    exit 1
  fi
  export TRACKD_BENCH_LOCKED=1
fi
