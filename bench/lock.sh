#!/usr/bin/env bash
# Sourced by bench/lib.sh: one benchmark at a time on this machine. Two at
# once measure each other (bench/RESULTS.md 2026-12-02 14:14 UTC: a freshness run that shared
# the cores with a COPY-limit load). A benchmark that another one starts runs under its lock.
# The lock is the running benchmark's pid in a file, not an open file descriptor: the services
# a benchmark starts (PostgreSQL, Kafka, the replica) outlive it and would inherit one.

if [[ -z "${TRACKD_BENCH_LOCKED:-}" ]]; then
  bench_lock_file="${TMPDIR:-/tmp}/trackd-bench.pid"
  bench_lock_other="$(cat "$bench_lock_file" 2>/dev/null || true)"
  if [[ "$bench_lock_other" =~ ^[0-9]+$ ]] && [[ "$bench_lock_other" != "$$" ]] &&
    kill -0 "$bench_lock_other" 2>/dev/null; then
    echo "bench: another benchmark is running on this machine (pid $bench_lock_other, in" \
      "$bench_lock_file); wait for it to end: side by side, each measures the other" >&2
    exit 1
  fi
  echo "$$" >"$bench_lock_file"
  export TRACKD_BENCH_LOCKED=$$
fi
