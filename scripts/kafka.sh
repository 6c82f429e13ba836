#!/usr/bin/env bash
# Runs a real single-node Apache Kafka broker (KRaft, combined broker+controller) for local
# development and CI, from the Apache Kafka jars resolved with Maven. No docker.
#
# Usage: scripts/kafka.sh COMMAND [ARGS]
#   start                          resolve jars (once), format storage (once), start, wait until ready
#   stop                           SIGTERM, wait up to KAFKA_STOP_TIMEOUT s, then SIGKILL
#   restart                        stop + start (data kept)
#   status                         exit 0 when running and answering, 1 otherwise
#   reset                          stop and delete the data dir (next start formats anew)
#   create-topic NAME PARTITIONS   idempotent; raises the partition count if the topic has fewer
#   delete-topic NAME              idempotent
#   list-topics                    topic names, one per line
#   end-offsets TOPIC              "partition offset" lines (log-end offsets), by partition
#   produce TOPIC                  stdin lines -> messages; with KAFKA_KEY_SEPARATOR set, the text
#                                  before the first separator on each line is the key
#   logs [N]                       last N (default 100) lines of the broker log
#   resolve                        only resolve the jars
#   run-class CLASS [ARGS...]      run any class on the Kafka classpath (e.g. a console consumer)
#   env                            print the effective settings
#
# Environment:
#   KAFKA_VERSION                  org.apache.kafka:kafka_2.13 version (default 4.4.0)
#   TRACKD_CACHE_DIR               jar cache root (default ~/.cache/trackd, shared by every clone)
#   TRACKD_LOCAL_DIR               data/config/pid/log root (default <repo>/.local)
#   LOCAL_KAFKA_PORT               PLAINTEXT listener on 127.0.0.1 (default 59092)
#   LOCAL_KAFKA_CONTROLLER_PORT    KRaft controller listener on 127.0.0.1 (default 59093)
#   LOCAL_KAFKA_TIMEOUT            seconds start waits for readiness (default 90)
#   LOCAL_KAFKA_PROXIED_PORT       optional second listener on 127.0.0.1 that advertises
#   LOCAL_KAFKA_PROXIED_ADVERTISED   host:port of a proxy in front of it, so clients that
#                                  bootstrap through the proxy stay on it (the fault tests);
#                                  default: the listener itself
#   KAFKA_STOP_TIMEOUT             seconds stop waits before SIGKILL (default 20)
#   KAFKA_HEAP                     broker heap flags (default "-Xmx768m -Xms256m")
#   KAFKA_JVM_OPTS                 extra broker JVM flags
#   KAFKA_TOOL_OPTS                JVM flags for the command-line tools
#   MVN                            maven executable (default mvn)
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$SCRIPT_DIR/.." && pwd)"

KAFKA_VERSION="${KAFKA_VERSION:-4.4.0}"
CACHE_ROOT="${TRACKD_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/trackd}"
LOCAL_ROOT="${TRACKD_LOCAL_DIR:-$REPO_DIR/.local}"
KAFKA_PORT="${LOCAL_KAFKA_PORT:-59092}"
CONTROLLER_PORT="${LOCAL_KAFKA_CONTROLLER_PORT:-59093}"
START_TIMEOUT="${LOCAL_KAFKA_TIMEOUT:-90}"
PROXIED_PORT="${LOCAL_KAFKA_PROXIED_PORT:-}"
PROXIED_ADVERTISED="${LOCAL_KAFKA_PROXIED_ADVERTISED:-}"
STOP_TIMEOUT="${KAFKA_STOP_TIMEOUT:-20}"
KAFKA_HEAP="${KAFKA_HEAP:--Xmx768m -Xms256m}"
KAFKA_JVM_OPTS="${KAFKA_JVM_OPTS:--XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true}"
KAFKA_TOOL_OPTS="${KAFKA_TOOL_OPTS:--Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xshare:auto -Djava.awt.headless=true}"
MVN="${MVN:-mvn}"
# Pinned so the "copy" goal accepts -Dartifact whatever Maven's default plugin version is.
DEP_PLUGIN="org.apache.maven.plugins:maven-dependency-plugin:3.8.1"

KAFKA_HOME="$CACHE_ROOT/kafka-$KAFKA_VERSION"
LIBS="$KAFKA_HOME/libs"
RESOLVED="$KAFKA_HOME/resolved.env" # written last: its presence means libs/ is complete
KDIR="$LOCAL_ROOT/kafka"
DATA_DIR="$KDIR/data"
CONF="$KDIR/server.properties"
CLIENT_CONF="$KDIR/client.properties"
BROKER_LOG4J="$KDIR/log4j2-broker.properties"
TOOLS_LOG4J="$KDIR/log4j2-tools.properties"
PID_FILE="$KDIR/kafka.pid"
LOG_DIR="$LOCAL_ROOT/logs"
LOG_FILE="$LOG_DIR/kafka.log"
BOOTSTRAP="127.0.0.1:$KAFKA_PORT"

# Filled from $RESOLVED by load_classes.
KAFKA_MAIN_CLASS=""
STORAGE_TOOL_CLASS=""
TOPIC_COMMAND_CLASS="org.apache.kafka.tools.TopicCommand"
GET_OFFSET_SHELL_CLASS="org.apache.kafka.tools.GetOffsetShell"
CONSOLE_PRODUCER_CLASS="org.apache.kafka.tools.ConsoleProducer"

log() { echo "kafka: $*"; }
err() { echo "kafka: error: $*" >&2; }
die() {
  err "$*"
  exit 1
}

usage() {
  sed -n '5,33p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

is_uint() { [[ "$1" =~ ^[0-9]+$ ]]; }

# True when version $1 >= version $2.
version_ge() {
  [[ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -n 1)" == "$2" ]]
}

validate_settings() {
  is_uint "$KAFKA_PORT" || die "LOCAL_KAFKA_PORT must be a number, got '$KAFKA_PORT'"
  if [[ -n "$PROXIED_PORT" ]]; then
    is_uint "$PROXIED_PORT" || die "LOCAL_KAFKA_PROXIED_PORT must be a number, got '$PROXIED_PORT'"
    # Without a proxy named, the listener advertises itself (a second plain listener).
    [[ -n "$PROXIED_ADVERTISED" ]] || PROXIED_ADVERTISED="127.0.0.1:$PROXIED_PORT"
  fi
  is_uint "$CONTROLLER_PORT" || die "LOCAL_KAFKA_CONTROLLER_PORT must be a number, got '$CONTROLLER_PORT'"
  [[ "$KAFKA_PORT" != "$CONTROLLER_PORT" ]] || die "LOCAL_KAFKA_PORT and LOCAL_KAFKA_CONTROLLER_PORT must differ"
  is_uint "$START_TIMEOUT" || die "LOCAL_KAFKA_TIMEOUT must be a number of seconds, got '$START_TIMEOUT'"
  is_uint "$STOP_TIMEOUT" || die "KAFKA_STOP_TIMEOUT must be a number of seconds, got '$STOP_TIMEOUT'"
  [[ "$KAFKA_VERSION" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "KAFKA_VERSION must look like 4.1.1, got '$KAFKA_VERSION'"
}

# ---------------------------------------------------------------------------------------------
# Jar resolution
# ---------------------------------------------------------------------------------------------

write_pom() {
  cat >"$KAFKA_HOME/pom.xml" <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<!-- Generated by scripts/kafka.sh: the jars of an Apache Kafka $KAFKA_VERSION broker and its tools. -->
<project>
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.trackd</groupId>
  <artifactId>kafka-runtime</artifactId>
  <version>$KAFKA_VERSION</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_2.13</artifactId>
      <version>$KAFKA_VERSION</version>
    </dependency>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka-tools</artifactId>
      <version>$KAFKA_VERSION</version>
      <exclusions>
        <!-- Kafka Connect's REST server is only needed by the connect plugin-path tool. -->
        <exclusion><groupId>org.apache.kafka</groupId><artifactId>connect-runtime</artifactId></exclusion>
        <exclusion><groupId>com.fasterxml.jackson.jakarta.rs</groupId><artifactId>*</artifactId></exclusion>
      </exclusions>
    </dependency>
  </dependencies>
</project>
EOF
}

# Prints the first candidate class found in a jar of $1 (zip entry names are stored as plain text).
find_class() {
  local dir="$1" cls path
  shift
  for cls in "$@"; do
    path="${cls//.//}.class"
    if grep -qaF -- "$path" "$dir"/*.jar 2>/dev/null; then
      echo "$cls"
      return 0
    fi
  done
  return 1
}

resolve_libs() {
  [[ -f "$RESOLVED" && -d "$LIBS" ]] && return 0
  command -v "$MVN" >/dev/null 2>&1 || die "maven ('$MVN') not found; install it (scripts/setup.sh)"
  command -v java >/dev/null 2>&1 || die "java not found; install a Java 17+ runtime (scripts/setup.sh)"
  mkdir -p "$KAFKA_HOME"

  # One resolver at a time (parallel CI steps, two shells).
  exec 8>"$KAFKA_HOME/.lock"
  if command -v flock >/dev/null 2>&1; then flock 8; fi
  if [[ -f "$RESOLVED" && -d "$LIBS" ]]; then
    exec 8>&-
    return 0
  fi

  log "resolving Apache Kafka $KAFKA_VERSION jars with maven into $LIBS (first run only)"
  local started=$SECONDS tmp="$KAFKA_HOME/libs.tmp" mvn_log="$KAFKA_HOME/mvn.log"
  rm -rf "$tmp" "$LIBS" "$RESOLVED"
  write_pom
  if ! "$MVN" -B -q -f "$KAFKA_HOME/pom.xml" "$DEP_PLUGIN:copy-dependencies" \
    -DincludeScope=runtime -DoutputDirectory="$tmp" >"$mvn_log" 2>&1; then
    tail -n 40 "$mvn_log" >&2 || true
    die "maven could not resolve org.apache.kafka:kafka_2.13:$KAFKA_VERSION (full output: $mvn_log)"
  fi

  # The broker logs through slf4j; bind it to the log4j2 core Kafka already depends on.
  local core slf4j log4j_ver binding
  core="$(find "$tmp" -maxdepth 1 -name 'log4j-core-*.jar' -printf '%f\n' | head -n 1)"
  slf4j="$(find "$tmp" -maxdepth 1 -name 'slf4j-api-*.jar' -printf '%f\n' | head -n 1)"
  [[ -n "$core" && -n "$slf4j" ]] || die "resolved jars lack log4j-core or slf4j-api; cannot set up broker logging"
  log4j_ver="${core#log4j-core-}"
  log4j_ver="${log4j_ver%.jar}"
  if [[ "$slf4j" == slf4j-api-1.* ]]; then binding="log4j-slf4j-impl"; else binding="log4j-slf4j2-impl"; fi
  if ! "$MVN" -B -q "$DEP_PLUGIN:copy" -Dartifact="org.apache.logging.log4j:$binding:$log4j_ver" \
    -DoutputDirectory="$tmp" >>"$mvn_log" 2>&1; then
    tail -n 40 "$mvn_log" >&2 || true
    die "maven could not resolve org.apache.logging.log4j:$binding:$log4j_ver (full output: $mvn_log)"
  fi

  local main storage cls
  main="$(find_class "$tmp" kafka.Kafka)" || die "kafka.Kafka not found in the $KAFKA_VERSION jars"
  storage="$(find_class "$tmp" kafka.tools.StorageTool org.apache.kafka.tools.StorageTool)" ||
    die "no StorageTool class found in the $KAFKA_VERSION jars"
  for cls in "$TOPIC_COMMAND_CLASS" "$GET_OFFSET_SHELL_CLASS" "$CONSOLE_PRODUCER_CLASS"; do
    find_class "$tmp" "$cls" >/dev/null || die "$cls not found in the $KAFKA_VERSION jars"
  done

  mv "$tmp" "$LIBS"
  {
    echo "KAFKA_MAIN_CLASS=$main"
    echo "STORAGE_TOOL_CLASS=$storage"
  } >"$RESOLVED.tmp"
  mv "$RESOLVED.tmp" "$RESOLVED"
  exec 8>&-
  log "resolved $(find "$LIBS" -maxdepth 1 -name '*.jar' | wc -l) jars in $((SECONDS - started))s"
}

load_classes() {
  resolve_libs
  local line
  while IFS= read -r line; do
    case "$line" in
      KAFKA_MAIN_CLASS=*) KAFKA_MAIN_CLASS="${line#*=}" ;;
      STORAGE_TOOL_CLASS=*) STORAGE_TOOL_CLASS="${line#*=}" ;;
    esac
  done <"$RESOLVED"
  [[ -n "$KAFKA_MAIN_CLASS" && -n "$STORAGE_TOOL_CLASS" ]] || die "$RESOLVED is incomplete; delete $KAFKA_HOME and retry"
}

# ---------------------------------------------------------------------------------------------
# Configuration
# ---------------------------------------------------------------------------------------------

write_configs() {
  mkdir -p "$KDIR" "$DATA_DIR" "$LOG_DIR"
  cat >"$CONF.tmp" <<EOF
# Generated by scripts/kafka.sh on every start; edits are overwritten.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$CONTROLLER_PORT
listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,CONTROLLER://127.0.0.1:$CONTROLLER_PORT${PROXIED_PORT:+,PROXIED://127.0.0.1:$PROXIED_PORT}
advertised.listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT${PROXIED_PORT:+,PROXIED://$PROXIED_ADVERTISED}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT${PROXIED_PORT:+,PROXIED:PLAINTEXT}
log.dirs=$DATA_DIR
num.partitions=4
default.replication.factor=1
auto.create.topics.enable=false
delete.topic.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
num.network.threads=2
num.io.threads=4
num.recovery.threads.per.data.dir=1
log.retention.hours=168
EOF
  mv "$CONF.tmp" "$CONF"

  cat >"$CLIENT_CONF" <<EOF
# Admin client settings for scripts/kafka.sh's tools: fail fast instead of retrying for minutes.
request.timeout.ms=10000
default.api.timeout.ms=15000
socket.connection.setup.timeout.ms=2000
socket.connection.setup.timeout.max.ms=5000
EOF

  # shutdownHook = disable: Kafka logs during its own shutdown hook; log4j's hook must not
  # stop the logging context before that.
  cat >"$BROKER_LOG4J" <<'EOF'
status = warn
shutdownHook = disable
appender.out.type = Console
appender.out.name = STDOUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.out.ref = STDOUT
logger.request.name = kafka.request.logger
logger.request.level = warn
logger.requestchannel.name = kafka.network.RequestChannel$
logger.requestchannel.level = warn
EOF

  cat >"$TOOLS_LOG4J" <<'EOF'
status = error
appender.err.type = Console
appender.err.name = STDERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.err.ref = STDERR
EOF
}

ensure_tool_configs() {
  [[ -f "$CLIENT_CONF" && -f "$TOOLS_LOG4J" ]] || write_configs
}

# ---------------------------------------------------------------------------------------------
# Processes
# ---------------------------------------------------------------------------------------------

# Sets TOOL_CMD to the command line that runs Kafka tool class $1 with arguments $2...
TOOL_CMD=()
tool_cmd() {
  local cls="$1"
  shift
  local -a opts
  read -r -a opts <<<"$KAFKA_TOOL_OPTS"
  TOOL_CMD=(java "${opts[@]}" -Dlog4j2.configurationFile="$TOOLS_LOG4J" -cp "$LIBS/*" "$cls" "$@")
}

# Runs a Kafka tool class in the foreground.
run_tool() {
  tool_cmd "$@"
  "${TOOL_CMD[@]}"
}

# True when pid $1 is a broker started with our config file.
is_our_broker() {
  local pid="$1" cmdline
  [[ -r "/proc/$pid/cmdline" ]] || return 1
  cmdline="$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)" || return 1
  [[ "$cmdline" == *" kafka.Kafka $CONF " ]]
}

# Prints the broker pid if it runs; cleans a stale pid file.
broker_pid() {
  local pid=""
  if [[ -f "$PID_FILE" ]]; then
    pid="$(tr -dc '0-9' <"$PID_FILE")"
    if [[ -n "$pid" ]] && is_our_broker "$pid"; then
      echo "$pid"
      return 0
    fi
    rm -f "$PID_FILE"
  fi
  # A broker of ours whose pid file was lost (matched by our own config path, nothing broader).
  local f
  for f in /proc/[0-9]*/cmdline; do
    pid="${f#/proc/}"
    pid="${pid%/cmdline}"
    if is_our_broker "$pid"; then
      mkdir -p "$KDIR"
      echo "$pid" >"$PID_FILE"
      echo "$pid"
      return 0
    fi
  done
  return 1
}

# Prints the Kafka version the running broker $1 was started from (its libs path).
running_version() {
  local cmdline
  cmdline="$(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null)" || return 0
  if [[ "$cmdline" =~ kafka-([0-9]+\.[0-9]+\.[0-9]+)/libs ]]; then echo "${BASH_REMATCH[1]}"; fi
}

port_open() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# A real request: the broker must answer a metadata (topic list) call.
broker_answers() {
  port_open "$KAFKA_PORT" || return 1
  ensure_tool_configs
  tool_cmd "$TOPIC_COMMAND_CLASS" --bootstrap-server "$BOOTSTRAP" --command-config "$CLIENT_CONF" --list
  timeout 30 "${TOOL_CMD[@]}" >/dev/null 2>&1
}

require_running() {
  if ! broker_pid >/dev/null || ! port_open "$KAFKA_PORT"; then
    die "broker is not running on $BOOTSTRAP (start it with: scripts/kafka.sh start)"
  fi
}

rotate_log() {
  if [[ -f "$LOG_FILE" ]] && (($(stat -c %s "$LOG_FILE") > 50 * 1024 * 1024)); then
    mv -f "$LOG_FILE" "$LOG_FILE.1"
  fi
}

tail_log() {
  local n="${1:-50}"
  if [[ -f "$LOG_FILE" ]]; then
    echo "kafka: ---- last $n lines of $LOG_FILE ----" >&2
    tail -n "$n" "$LOG_FILE" >&2
    echo "kafka: ---- end of log ----" >&2
  else
    echo "kafka: (no log at $LOG_FILE)" >&2
  fi
}

# Storage formatted by a newer Kafka cannot be read by an older one; remember who formatted it.
check_data_version() {
  local stamp="$KDIR/data-version" formatted
  if [[ ! -f "$stamp" ]]; then
    echo "$KAFKA_VERSION" >"$stamp"
    return 0
  fi
  formatted="$(head -n 1 "$stamp")"
  [[ "$formatted" == "$KAFKA_VERSION" ]] && return 0
  if ! version_ge "$KAFKA_VERSION" "$formatted"; then
    die "the data in $DATA_DIR was written by Kafka $formatted, newer than KAFKA_VERSION=$KAFKA_VERSION; run 'scripts/kafka.sh reset' first"
  fi
  log "data was written by Kafka $formatted; starting $KAFKA_VERSION on it (upgrade)"
  echo "$KAFKA_VERSION" >"$stamp"
}

format_storage() {
  if [[ -f "$DATA_DIR/meta.properties" ]]; then
    check_data_version
    return 0
  fi
  local cluster_id
  cluster_id="$(run_tool "$STORAGE_TOOL_CLASS" random-uuid 2>>"$LOG_FILE" | tail -n 1)"
  [[ -n "$cluster_id" ]] || die "could not generate a cluster id (see $LOG_FILE)"
  log "formatting storage in $DATA_DIR (cluster id $cluster_id)"
  if ! run_tool "$STORAGE_TOOL_CLASS" format -t "$cluster_id" -c "$CONF" >>"$LOG_FILE" 2>&1; then
    tail_log 20
    die "formatting the storage failed"
  fi
  echo "$KAFKA_VERSION" >"$KDIR/data-version"
}

wait_ready() {
  local pid="$1" deadline=$((SECONDS + START_TIMEOUT))
  while ((SECONDS < deadline)); do
    if ! is_our_broker "$pid"; then
      rm -f "$PID_FILE"
      err "broker process $pid exited during startup"
      tail_log 50
      return 1
    fi
    if broker_answers; then
      return 0
    fi
    sleep 1
  done
  err "broker did not answer on $BOOTSTRAP within ${START_TIMEOUT}s (LOCAL_KAFKA_TIMEOUT)"
  tail_log 50
  return 1
}

check_java() {
  command -v java >/dev/null 2>&1 || die "java not found; install a Java 17+ runtime (scripts/setup.sh)"
  local line major
  line="$(java -version 2>&1 | head -n 1)"
  if [[ "$line" =~ version\ \"([0-9]+) ]]; then
    major="${BASH_REMATCH[1]}"
    if ((major < 17)); then die "Apache Kafka 4 brokers need Java 17+, the default java is: $line"; fi
  fi
}

cmd_start() {
  check_java
  load_classes
  local pid started=$SECONDS
  if pid="$(broker_pid)"; then
    if broker_answers; then
      log "already running (pid $pid, Apache Kafka $(running_version "$pid")) on $BOOTSTRAP"
      return 0
    fi
    log "broker process $pid exists but does not answer yet; waiting"
    if wait_ready "$pid"; then
      log "ready on $BOOTSTRAP (pid $pid)"
      return 0
    fi
    exit 1
  fi

  local port
  for port in "$KAFKA_PORT" "$CONTROLLER_PORT"; do
    if port_open "$port"; then
      die "port $port on 127.0.0.1 is in use by another process; set LOCAL_KAFKA_PORT / LOCAL_KAFKA_CONTROLLER_PORT"
    fi
  done

  write_configs
  rotate_log
  format_storage

  local -a heap jvm
  read -r -a heap <<<"$KAFKA_HEAP"
  read -r -a jvm <<<"$KAFKA_JVM_OPTS"
  echo "==== kafka.sh start $(date -u +%Y-%m-%dT%H:%M:%SZ) version $KAFKA_VERSION on $BOOTSTRAP ====" >>"$LOG_FILE"
  log "starting Apache Kafka $KAFKA_VERSION on $BOOTSTRAP (log: $LOG_FILE)"
  # The launcher shell writes its own pid and then becomes java through exec, so the recorded
  # pid is the broker's whether or not setsid had to fork. fd 9 (the command lock) is closed
  # so the broker does not hold it.
  rm -f "$PID_FILE.launch"
  (
    cd "$KDIR"
    # shellcheck disable=SC2016 # $$ and $1 expand in the launcher shell
    exec setsid nohup bash -c 'echo $$ >"$1"; shift; exec "$@"' kafka-launcher "$PID_FILE.launch" \
      java "${heap[@]}" "${jvm[@]}" \
      -Dlog4j2.configurationFile="$BROKER_LOG4J" \
      -Dkafka.logs.dir="$LOG_DIR" \
      -cp "$LIBS/*" "$KAFKA_MAIN_CLASS" "$CONF" </dev/null >>"$LOG_FILE" 2>&1 9>&-
  ) &
  pid=""
  local i
  for ((i = 0; i < 100; i++)); do
    if [[ -z "$pid" && -s "$PID_FILE.launch" ]]; then pid="$(tr -dc '0-9' <"$PID_FILE.launch")"; fi
    if [[ -n "$pid" ]] && is_our_broker "$pid"; then break; fi
    if [[ -n "$pid" ]] && ! kill -0 "$pid" 2>/dev/null; then break; fi
    sleep 0.1
  done
  rm -f "$PID_FILE.launch"
  if [[ -z "$pid" ]] || ! is_our_broker "$pid"; then
    err "the broker process exited right after launch"
    tail_log 50
    exit 1
  fi
  echo "$pid" >"$PID_FILE"

  if wait_ready "$pid"; then
    log "ready on $BOOTSTRAP (pid $pid) in $((SECONDS - started))s"
    return 0
  fi
  if is_our_broker "$pid"; then
    log "stopping the broker that did not become ready"
    stop_pid "$pid" || true
    rm -f "$PID_FILE"
  fi
  die "start failed (full log: $LOG_FILE)"
}

stop_pid() {
  local pid="$1" i
  kill -TERM "$pid" 2>/dev/null || return 0
  for ((i = 0; i < STOP_TIMEOUT * 4; i++)); do
    is_our_broker "$pid" || break
    sleep 0.25
  done
  if is_our_broker "$pid"; then
    log "broker $pid still running after ${STOP_TIMEOUT}s; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    while is_our_broker "$pid"; do sleep 0.2; done
  fi
}

cmd_stop() {
  local pid
  if ! pid="$(broker_pid)"; then
    log "not running"
    return 0
  fi
  log "stopping broker (pid $pid)"
  stop_pid "$pid"
  rm -f "$PID_FILE"
  log "stopped"
}

cmd_status() {
  local pid
  if ! pid="$(broker_pid)"; then
    log "not running"
    return 1
  fi
  resolve_libs
  if broker_answers; then
    log "running (pid $pid) on $BOOTSTRAP, Apache Kafka $(running_version "$pid"), data in $DATA_DIR"
    return 0
  fi
  log "process $pid is up but the broker does not answer on $BOOTSTRAP"
  return 1
}

cmd_reset() {
  cmd_stop
  rm -rf "$DATA_DIR" "$KDIR/data-version"
  log "data deleted ($DATA_DIR)"
}

# Prints the partition count of topic $1, or nothing when it does not exist.
topic_partitions() {
  local out
  out="$(run_tool "$TOPIC_COMMAND_CLASS" --bootstrap-server "$BOOTSTRAP" --command-config "$CLIENT_CONF" \
    --describe --topic "$1" 2>/dev/null)" || return 0
  sed -n 's/.*PartitionCount:[[:space:]]*\([0-9][0-9]*\).*/\1/p' <<<"$out" | head -n 1
}

check_topic_name() {
  [[ "$1" =~ ^[A-Za-z0-9._-]{1,249}$ ]] || die "invalid topic name '$1'"
}

cmd_create_topic() {
  (($# == 2)) || die "usage: scripts/kafka.sh create-topic NAME PARTITIONS"
  local name="$1" parts="$2" have
  check_topic_name "$name"
  if ! is_uint "$parts" || ((parts == 0)); then
    die "PARTITIONS must be a positive number, got '$parts'"
  fi
  load_classes
  ensure_tool_configs
  require_running
  # Create first (one JVM for the common case of a new topic); describe only when it exists.
  local out
  if out="$(run_tool "$TOPIC_COMMAND_CLASS" --bootstrap-server "$BOOTSTRAP" --command-config "$CLIENT_CONF" \
    --create --topic "$name" --partitions "$parts" --replication-factor 1 2>&1)"; then
    log "created topic '$name' with $parts partitions"
    return 0
  fi
  if [[ "$out" != *"already exists"* ]]; then
    echo "$out" >&2
    die "could not create topic '$name'"
  fi
  have="$(topic_partitions "$name")"
  [[ -n "$have" ]] || die "topic '$name' exists but could not be described"
  if ((have >= parts)); then
    log "topic '$name' exists with $have partitions"
    return 0
  fi
  log "topic '$name' has $have partitions; raising to $parts"
  run_tool "$TOPIC_COMMAND_CLASS" --bootstrap-server "$BOOTSTRAP" --command-config "$CLIENT_CONF" \
    --alter --topic "$name" --partitions "$parts" >/dev/null ||
    die "could not raise the partition count of '$name' to $parts"
}

cmd_delete_topic() {
  (($# == 1)) || die "usage: scripts/kafka.sh delete-topic NAME"
  check_topic_name "$1"
  load_classes
  ensure_tool_configs
  require_running
  run_tool "$TOPIC_COMMAND_CLASS" --bootstrap-server "$BOOTSTRAP" --command-config "$CLIENT_CONF" \
    --delete --if-exists --topic "$1" >/dev/null || die "could not delete topic '$1'"
  log "topic '$1' deleted (or absent)"
}

cmd_list_topics() {
  load_classes
  ensure_tool_configs
  require_running
  run_tool "$TOPIC_COMMAND_CLASS" --bootstrap-server "$BOOTSTRAP" --command-config "$CLIENT_CONF" --list
}

cmd_end_offsets() {
  (($# == 1)) || die "usage: scripts/kafka.sh end-offsets TOPIC"
  check_topic_name "$1"
  load_classes
  ensure_tool_configs
  require_running
  local out
  out="$(run_tool "$GET_OFFSET_SHELL_CLASS" --bootstrap-server "$BOOTSTRAP" --command-config "$CLIENT_CONF" \
    --topic "$1" --time -1)" || die "could not read the end offsets of '$1'"
  # Lines are TOPIC:PARTITION:OFFSET; topic names cannot contain ':'.
  out="$(awk -F: 'NF >= 3 { print $(NF-1), $NF }' <<<"$out" | sort -n -k1,1)"
  [[ -n "$out" ]] || die "topic '$1' not found"
  echo "$out"
}

cmd_produce() {
  (($# == 1)) || die "usage: scripts/kafka.sh produce TOPIC  (messages on stdin)"
  check_topic_name "$1"
  load_classes
  ensure_tool_configs
  require_running
  local -a keyed=()
  if [[ -n "${KAFKA_KEY_SEPARATOR:-}" ]]; then
    # 4.2 renamed --property to --reader-property (the old name warns).
    local opt="--property"
    if version_ge "$KAFKA_VERSION" 4.2.0; then opt="--reader-property"; fi
    keyed=("$opt" parse.key=true "$opt" "key.separator=$KAFKA_KEY_SEPARATOR")
  fi
  run_tool "$CONSOLE_PRODUCER_CLASS" --bootstrap-server "$BOOTSTRAP" --topic "$1" "${keyed[@]}"
}

cmd_logs() {
  local n="${1:-100}"
  is_uint "$n" || die "usage: scripts/kafka.sh logs [LINES]"
  [[ -f "$LOG_FILE" ]] || die "no log yet at $LOG_FILE"
  tail -n "$n" "$LOG_FILE"
}

cmd_run_class() {
  (($# >= 1)) || die "usage: scripts/kafka.sh run-class CLASS [ARGS...]"
  load_classes
  ensure_tool_configs
  run_tool "$@"
}

cmd_env() {
  cat <<EOF
KAFKA_VERSION=$KAFKA_VERSION
LOCAL_KAFKA_PORT=$KAFKA_PORT
LOCAL_KAFKA_CONTROLLER_PORT=$CONTROLLER_PORT
LOCAL_KAFKA_TIMEOUT=$START_TIMEOUT
KAFKA_STOP_TIMEOUT=$STOP_TIMEOUT
KAFKA_HEAP=$KAFKA_HEAP
bootstrap=$BOOTSTRAP
libs=$LIBS
config=$CONF
data=$DATA_DIR
pid_file=$PID_FILE
log=$LOG_FILE
EOF
}

# Serializes start/stop/reset of this broker (several shells or CI steps at once). The lock is
# on fd 9 and is released when the script exits.
lock_commands() {
  mkdir -p "$KDIR"
  exec 9>"$KDIR/.lock"
  if command -v flock >/dev/null 2>&1; then
    flock -w $((START_TIMEOUT + STOP_TIMEOUT + 300)) 9 || die "another scripts/kafka.sh is busy with this broker ($KDIR/.lock)"
  fi
}

main() {
  local cmd="${1:-}"
  (($# > 0)) && shift
  validate_settings
  case "$cmd" in
    start)
      lock_commands
      cmd_start
      ;;
    stop)
      lock_commands
      cmd_stop
      ;;
    restart)
      lock_commands
      cmd_stop
      cmd_start
      ;;
    status) cmd_status ;;
    reset)
      lock_commands
      cmd_reset
      ;;
    create-topic) cmd_create_topic "$@" ;;
    delete-topic) cmd_delete_topic "$@" ;;
    list-topics) cmd_list_topics ;;
    end-offsets) cmd_end_offsets "$@" ;;
    produce) cmd_produce "$@" ;;
    logs) cmd_logs "$@" ;;
    resolve) resolve_libs ;;
    run-class) cmd_run_class "$@" ;;
    env) cmd_env ;;
    -h | --help | help) usage ;;
    "")
      usage >&2
      exit 2
      ;;
    *)
      err "unknown command '$cmd'"
      usage >&2
      exit 2
      ;;
  esac
}

main "$@"
