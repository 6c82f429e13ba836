#!/usr/bin/env bash
# Fuzzes each libFuzzer target (tests/fuzz/) for a while, starting from its committed corpus and
# regression inputs; fails on any finding (crash, leak, ASan/UBSan report, timeout, OOM).
#   scripts/fuzz.sh [seconds per target, default 60] [target ...]
# Builds the `fuzz` preset first (clang-14). New inputs go to a temporary directory: the
# committed corpus changes only by hand (docs/reliability.md says how to grow and minimise it).
# Findings are kept in build/fuzz/findings/ with the log of the run that found them.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
cd "$repo"

seconds="${1:-60}"
shift || true
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(fuzz_decoder fuzz_protobuf_decoder fuzz_wkb fuzz_fence fuzz_params)

cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "${TRACKD_BUILD_JOBS:-$(nproc)}"

bin="$repo/build/fuzz/tests/fuzz"
findings="$repo/build/fuzz/findings"
mkdir -p "$findings"
export ASAN_OPTIONS="detect_leaks=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# run_target T: one target for $seconds, one process; prints its verdict, exit 1 on a finding.
run_target() {
  local t="$1" work log runs
  work="$(mktemp -d)"
  local dirs=("$repo/tests/fuzz/corpus/$t")
  [[ -d "$repo/tests/fuzz/regressions/$t" ]] && dirs+=("$repo/tests/fuzz/regressions/$t")
  log="$findings/$t.log"
  if "$bin/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
       -artifact_prefix="$findings/$t-" "$work" "${dirs[@]}" >"$log" 2>&1; then
    runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")"
    echo "fuzz: $t: no finding in ${seconds}s, $runs executions ($((runs / seconds))/s)"
    rm -rf "$work"
  else
    echo "fuzz: $t: FINDING; log: $log" >&2
    tail -n 40 "$log" >&2
    rm -rf "$work"
    return 1
  fi
}

# Targets run side by side, TRACKD_FUZZ_JOBS at a time (default: one per core), each one process.
parallel="${TRACKD_FUZZ_JOBS:-$(nproc)}"
failed=()
declare -A pid_of=()
for t in "${targets[@]}"; do
  while (($(jobs -rp | wc -l) >= parallel)); do sleep 1; done
  run_target "$t" &
  pid_of[$t]=$!
done
for t in "${targets[@]}"; do
  wait "${pid_of[$t]}" || failed+=("$t")
done
[[ ${#failed[@]} -eq 0 ]] || { echo "fuzz: findings in: ${failed[*]}" >&2; exit 1; }
