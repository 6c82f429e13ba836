#!/usr/bin/env bash
# Apache Iceberg's own REST catalog server (the servlet of org.apache.iceberg.rest.RESTCatalogServer
# from iceberg-open-api's test fixtures, with iceberg-core's RESTCatalogAdapter) for the archive
# tests, on 127.0.0.1. Its jars are resolved with Maven from scripts/iceberg-rest/pom.xml; a small
# main (scripts/iceberg-rest/LoopbackRestCatalogServer.java) starts the same servlet bound to
# loopback only (the stock main binds every interface). The backing catalog is a JdbcCatalog on a
# SQLite file (kept across restarts), FileIO is ResolvingFileIO (local paths and s3:// from one
# server). Tables are created with an explicit location, so every test chooses its warehouse.
#
#   scripts/iceberg-rest.sh start     resolve jars and compile the main (once), start, wait
#   scripts/iceberg-rest.sh stop      SIGTERM, then SIGKILL after 10 s
#   scripts/iceberg-rest.sh status    exit 0 when it answers GET /v1/config
#   scripts/iceberg-rest.sh reset     stop and delete its catalog and default warehouse
#   scripts/iceberg-rest.sh uri       print the catalog's base URI
#
# Environment:
#   LOCAL_ICEBERG_REST_PORT   port on 127.0.0.1 (default 55181)
#   LOCAL_S3_PORT             the port of scripts/s3.sh's S3 server (default 55900): s3://
#                             tables are read and written there (iceberg-aws is on the class
#                             path): CATALOG_S3_ENDPOINT defaults to it, with path-style access,
#                             region us-east-1 and the key pair the tests use
#   CATALOG_*                 any other setting of the server passes through (and the five
#                             above can be overridden): CATALOG_S3_ENDPOINT,
#                             CATALOG_S3_PATH__STYLE__ACCESS, CATALOG_S3_ACCESS__KEY__ID,
#                             CATALOG_S3_SECRET__ACCESS__KEY, CATALOG_CLIENT_REGION
#   TRACKD_TEST_REST_PAUSE_ARM  for the crash tests: metadata files written while this file
#                             exists stop the server after writing them (see the main's comment)
#   TRACKD_CACHE_DIR          jar cache root (default ~/.cache/trackd, shared by every clone)
#   TRACKD_LOCAL_DIR          state root (default <repo>/.local): iceberg-rest/, logs/iceberg-rest.log
#   ICEBERG_REST_HEAP         JVM heap flags (default "-Xmx384m")
#   MVN                       maven executable (default mvn)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
port="${LOCAL_ICEBERG_REST_PORT:-55181}"
cache="${TRACKD_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/trackd}/iceberg-rest-$(sha256sum "$here/iceberg-rest/pom.xml" | cut -c1-12)"
heap="${ICEBERG_REST_HEAP:--Xmx384m}"
MVN="${MVN:-mvn}"
DEP_PLUGIN="org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
main_class="org.apache.iceberg.rest.LoopbackRestCatalogServer"
main_source="$here/iceberg-rest/LoopbackRestCatalogServer.java"
classes="$cache/classes-$(sha256sum "$main_source" | cut -c1-12)"

service=iceberg-rest port_var=LOCAL_ICEBERG_REST_PORT process_marker="$main_class"
# shellcheck source=scripts/service-lib.sh
source "$here/service-lib.sh"
answers() { curl -fsS -m 2 "http://127.0.0.1:$port/v1/config" >/dev/null 2>&1; }

resolve() {
  [[ -f "$classes/.done" ]] && return 0
  command -v "$MVN" >/dev/null || die "maven ('$MVN') not found (scripts/setup.sh installs it)"
  command -v javac >/dev/null || die "javac not found (scripts/setup.sh installs a JDK)"
  mkdir -p "$cache"
  exec 8>"$cache/.lock"
  flock 8
  # The jars once per pom (classes/.done: the marker of a cache made before the main was keyed).
  if [[ ! -f "$cache/libs/.done" && ! -f "$cache/classes/.done" ]]; then
    say "resolving the Iceberg REST catalog server's jars with maven (first run only)"
    rm -rf "$cache/libs"
    if ! "$MVN" -B -q -f "$here/iceberg-rest/pom.xml" "$DEP_PLUGIN:copy-dependencies" \
      -DincludeScope=runtime -DoutputDirectory="$cache/libs" >"$cache/mvn.log" 2>&1; then
      tail -n 30 "$cache/mvn.log" >&2
      die "maven could not resolve the REST catalog server (full output: $cache/mvn.log)"
    fi
    touch "$cache/libs/.done"
    say "resolved $(find "$cache/libs" -name '*.jar' | wc -l) jars"
  fi
  # The main once per version of its source.
  if [[ ! -f "$classes/.done" ]]; then
    rm -rf "$classes"
    mkdir -p "$classes"
    javac -nowarn -d "$classes" -cp "$cache/libs/*" "$main_source"
    touch "$classes/.done"
  fi
  exec 8>&-
}

start() {
  resolve
  if pid="$(running_pid)" && answers; then
    say "already running (pid $pid) on 127.0.0.1:$port"
    return 0
  fi
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    die "port $port on 127.0.0.1 is in use by another process; set LOCAL_ICEBERG_REST_PORT"
  fi
  mkdir -p "$state/warehouse" "$log_dir"
  local -a heap_opts
  read -r -a heap_opts <<<"$heap"
  echo "==== iceberg-rest.sh start $(date -u +%Y-%m-%dT%H:%M:%SZ) on 127.0.0.1:$port ====" >>"$log_file"
  (
    cd "$state"
    # One connection to the SQLite file (CATALOG_CLIENTS, the JDBC catalog's pool size): with
    # several, requests side by side (tests run in parallel) fail with SQLITE_BUSY, a 500 to trackd.
    export CATALOG_WAREHOUSE="$state/warehouse" CATALOG_URI="jdbc:sqlite:$state/catalog.db"
    export CATALOG_CLIENTS="${CATALOG_CLIENTS:-1}"
    export CATALOG_REST_PORT="$port" CATALOG_IO__IMPL=org.apache.iceberg.io.ResolvingFileIO
    # s3:// through the same S3 server trackd and the readers use (scripts/s3.sh).
    export CATALOG_S3_ENDPOINT="${CATALOG_S3_ENDPOINT:-http://127.0.0.1:${LOCAL_S3_PORT:-55900}}"
    export CATALOG_S3_PATH__STYLE__ACCESS="${CATALOG_S3_PATH__STYLE__ACCESS:-true}"
    export CATALOG_S3_ACCESS__KEY__ID="${CATALOG_S3_ACCESS__KEY__ID:-trackd-test}"
    export CATALOG_S3_SECRET__ACCESS__KEY="${CATALOG_S3_SECRET__ACCESS__KEY:-trackd-test-secret}"
    export CATALOG_CLIENT_REGION="${CATALOG_CLIENT_REGION:-us-east-1}"
    exec setsid nohup java "${heap_opts[@]}" -XX:+UseSerialGC -cp "$classes:$cache/libs/*" \
      "$main_class" </dev/null >>"$log_file" 2>&1 9>&- 8>&-
  ) &
  echo $! >"$pid_file"
  wait_ready 60 0.3
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  reset)
    stop
    rm -rf "$state"
    ;;
  uri) echo "http://127.0.0.1:$port" ;;
  resolve) resolve ;;
  *)
    sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}" >&2
    exit 2
    ;;
esac
