#!/usr/bin/env bash
# The whole test suite, as on a fresh machine: install packages, check the format, build
# (release and ASan+UBSan, through ccache), clang-tidy, fuzz, start the real local services, run
# unit, integration and fault tests, stop the services. Prints each step's time at the end.
# Exits non-zero on any failure and then prints the services' logs.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
cd "$repo"

jobs="${TRACKD_BUILD_JOBS:-$(nproc)}"
presets="${TRACKD_TEST_PRESETS:-release asan}"

# Each step's duration is printed at the end, so CI's output says where the time went.
step_names=()
step_starts=()
step() {
  printf '\n==== %s (%s)\n' "$*" "$(date -u +%H:%M:%S)"
  step_names+=("$*")
  step_starts+=("$(date +%s)")
}
step_summary() {
  local end n i
  end="$(date +%s)"
  n=${#step_names[@]}
  ((n == 0)) && return
  echo
  echo "==== time per step (s)"
  for ((i = 0; i < n; i++)); do
    local next=$end
    ((i + 1 < n)) && next=${step_starts[i + 1]}
    printf '%6d  %s\n' $((next - step_starts[i])) "${step_names[i]}"
  done
  printf '%6d  total\n' $((end - step_starts[0]))
}

on_exit() {
  local rc=$?
  step_summary
  if [[ $rc -ne 0 ]]; then
    echo "test.sh: FAILED (exit $rc); service logs follow" >&2
    bash "$here/services.sh" logs >&2 || true
  fi
  if [[ -n ${check_server_pid:-} ]]; then
    pkill -P "$check_server_pid" 2>/dev/null || true # a check still running
    kill "$check_server_pid" 2>/dev/null || true
    rm -f "$TEST_ARCHIVE_CHECK_SOCKET"
  fi
  if [[ "${TRACKD_KEEP_SERVICES:-0}" != 1 ]]; then
    bash "$here/services.sh" stop >/dev/null 2>&1 || true
  fi
  exit $rc
}
trap on_exit EXIT

# The tests find the services on the same ports the service scripts use. A second, proxied
# listener is for a fault case's own broker only (it sets these itself): inherited from the
# caller, it would make every private broker of the fault suite bind the same port.
unset LOCAL_KAFKA_PROXIED_PORT LOCAL_KAFKA_PROXIED_ADVERTISED
export TEST_PG_ADMIN_DSN="${TEST_PG_ADMIN_DSN:-postgresql://postgres@127.0.0.1:${LOCAL_PG_PORT:-55432}/postgres}"
export TEST_KAFKA_BROKERS="${TEST_KAFKA_BROKERS:-127.0.0.1:${LOCAL_KAFKA_PORT:-59092}}"
export TEST_PG_REPLICA_DSN="${TEST_PG_REPLICA_DSN:-postgresql://postgres@127.0.0.1:${LOCAL_PG_REPLICA_PORT:-55433}/postgres}"
export TEST_ICEBERG_REST_URI="${TEST_ICEBERG_REST_URI:-http://127.0.0.1:${LOCAL_ICEBERG_REST_PORT:-55181}}"
export TEST_S3_ENDPOINT="${TEST_S3_ENDPOINT:-http://127.0.0.1:${LOCAL_S3_PORT:-55900}}"

step "install system packages"
bash "$here/setup.sh"

# Before the build: the pyarrow wheel in .venv/ provides Arrow/Parquet C++ (Debian 12 has none).
step "python environment"
bash "$here/python-env.sh"

step "format check"
bash "$here/format.sh" --check

# A second or two: the Prometheus configuration, the alert rules and the compose file parse.
step "deploy checks"
promtool check config deploy/prometheus/prometheus.yml
promtool check rules deploy/prometheus/alerts.yml
docker-compose -f docker-compose.yml config -q

for preset in $presets; do
  step "build ($preset)"
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset" -j "$jobs"
done

# clang-tidy's short check list (.clang-tidy) on the release build; units unchanged since they
# last passed are skipped (scripts/tidy.sh keeps their hashes).
step "clang-tidy"
bash "$here/tidy.sh" build/release

# libFuzzer targets (tests/fuzz/, clang-14): every committed input once, then each target 10 s
# from its corpus (five targets, two at a time); any crash, leak or sanitizer report fails
# (docs/reliability.md).
step "fuzz"
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$jobs"
ctest --preset fuzz
bash "$here/fuzz.sh" "${TRACKD_FUZZ_SECONDS:-10}"

step "start local services"
bash "$here/services.sh" start

# The archive tests' reader checks (tests/integration/archive_check.py) go to one server that
# has imported PyIceberg, DuckDB and the rest once and forks for each check: started afresh,
# each check spent most of its CPU importing them (a third of the archive tests' CPU).
export TEST_ARCHIVE_CHECK_SOCKET="${TMPDIR:-/tmp}/trackd-archive-check.$$.sock"
"$repo/.venv/bin/python" "$repo/tests/integration/archive_check.py" serve \
  --socket "$TEST_ARCHIVE_CHECK_SOCKET" >"$repo/build/archive-check.log" 2>&1 &
check_server_pid=$!
for _ in $(seq 300); do
  [[ -S $TEST_ARCHIVE_CHECK_SOCKET ]] && break
  kill -0 "$check_server_pid" 2>/dev/null || break
  sleep 0.2
done
[[ -S $TEST_ARCHIVE_CHECK_SOCKET ]] || {
  cat "$repo/build/archive-check.log" >&2
  echo "test.sh: archive_check.py serve did not start" >&2
  exit 1
}

# The fault suite (docs/reliability.md, release build, each case once) runs in the background
# beside the unit and integration tests of both builds, from their start: most of its time is
# spent waiting (frozen instances, session timeouts, outages), and a case that stops a service
# runs its own. Two cases side by side. Its output is printed when it ends.
faults_pid=""
faults_log="$repo/build/faults.log"
start_faults() {
  bash "$here/toxiproxy.sh" install >/dev/null
  ctest --preset release -L faults -j "${TRACKD_FAULT_JOBS:-2}" >"$faults_log" 2>&1 &
  faults_pid=$!
  echo "fault suite started in the background (log: $faults_log)"
}

# Under ASan every integration test runs but these, whose code the other ASan tests run too:
# - the longest loops (3 to 8 minutes of ASan test time together): 200 archive snapshots before
#   a compaction or a maintenance run (compaction and maintenance are run under ASan by
#   ArchiveRest.LostAndFailedCommitRepliesLoseNothing and ArchiveS3.Orphans...), 30 databases
#   migrated (the migrator by every test), SIGKILL and restart loops and 100k messages of ingest
#   (recovery, reconnects and the events' replay by ProtobufIngest.*, LostCommitReply.*,
#   Archive.SurvivesSigkill..., Delivery.* and GeofenceEvents.ScriptedPaths...);
# - the two archives of 250,000 random rows whose data file goes up in three parts (45 and 70 s
#   each in CI, most of it Arrow's Parquet writer under ASan); the S3 requests trackd makes
#   itself run under ASan in every maintenance of ArchiveS3.Orphans... and in the unit tests;
# - the readers' checks of the jdbc, rest and S3 archives (PyIceberg, DuckDB and fastavro read
#   what trackd wrote: their time is Python's; ArchiveRestS3.IngestedHistoryReadBack... runs
#   under ASan and writes through the REST catalog and S3 both).
# They run in the release pass. The other way round, the Schemathesis runs (thousands of
# generated requests, most of their time Python's) run only under ASan, where a bad request
# that reads past a buffer shows as well as a 5xx or an answer off the schema.
asan_release_only='^(Archive\.CompactionAfter200SmallCommitsKeepsEveryRow|Archive\.MaintenanceAfter200CommitsExpiresMergesAndDeletesOrphans|Migrations\.SideBySideOnAFreshClusterAllSucceed|Ingest\.SurvivesRepeatedSigkillWithoutLossOrDuplicates|Ingest\.ExactAccountingOf100kMessages|Ingest\.SurvivesPostgresqlImmediateRestart|GeofenceEvents\.SurvivesRepeatedSigkillWithoutDuplicatedOrMissingEvents|(ArchiveRest|ArchiveS3)\.SurvivesSigkillAtRandomMomentsAndDuringCommits|ArchiveS3\.AMultipartUploadFailingHalfWayIsRetriedOrAbortedAndLosesNothing|ArchiveS3\.AnUploadLeftBegunByAKilledArchiverIsAbortedByMaintenance|(Archive|ArchiveRest|ArchiveS3)\.IngestedHistoryReadBackByPyIcebergDuckDbAndFastavro)$'
asan_only='^Http(Tools|Abuse)\.Schemathesis'

if [[ " $presets " == *" release "* ]]; then start_faults; fi
for preset in $presets; do
  step "unit tests ($preset)"
  # Twice the cores: the longest unit tests (KafkaSource.*) wait on the mock broker's group
  # timers, not on the CPU.
  ctest --preset "$preset" -L unit -j "$((jobs * 2))"
  # Side by side: every test has its own database and topic, and most of their time is spent
  # waiting on the services; a test that restarts a service starts its own.
  step "integration tests ($preset)"
  skip=()
  if [[ $preset == asan ]]; then skip=(-E "$asan_release_only"); fi
  if [[ $preset == release && " $presets " == *" asan "* ]]; then skip=(-E "$asan_only"); fi
  ctest --preset "$preset" -L integration -j "${TRACKD_TEST_JOBS:-3}" "${skip[@]}"
done

if [[ -n $faults_pid ]]; then
  step "fault suite (release, wait for the background run)"
  faults_rc=0
  wait "$faults_pid" || faults_rc=$?
  cat "$faults_log"
  if [[ $faults_rc -ne 0 ]]; then exit "$faults_rc"; fi
fi

step "all tests passed"
