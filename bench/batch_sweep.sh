#!/usr/bin/env bash
# Measures trackd's end-to-end ingest rate for several batch sizes over the same pre-produced
# messages, each into a fresh database, in one run (ratios between them hold on a noisy machine;
# absolute numbers drift). Needs the local services (scripts/services.sh start) and a release
# build. Usage: bench/batch_sweep.sh [messages] [vehicles] [max_rows[:writers]...]
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
messages="${1:-500000}"
vehicles="${2:-5000}"
shift 2 || true
sizes=("$@")
((${#sizes[@]})) || sizes=(5000:1 20000:1 5000:2 20000:2 50000:2 20000:3)
bin="$repo/build/release"
admin="postgresql://postgres@127.0.0.1:${LOCAL_PG_PORT:-55432}/postgres"
brokers="127.0.0.1:${LOCAL_KAFKA_PORT:-59092}"
topic="bench-sweep-$$"

bash "$repo/scripts/kafka.sh" create-topic "$topic" 4 >/dev/null
"$bin/tools/trackd-fleet" --brokers "$brokers" --topic "$topic" --vehicles "$vehicles" \
  --messages "$messages" --quiet >/dev/null
echo "produced $messages messages ($vehicles vehicles, 4 partitions)"
printf '%-10s %8s %10s %12s\n' max_rows writers seconds msgs_per_s
for item in "${sizes[@]}"; do
  rows="${item%%:*}"
  writers=1
  [[ "$item" == *:* ]] && writers="${item#*:}"
  db="trackd_bench_sweep_${rows}_$writers"
  psql -qX "$admin" -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" >/dev/null
  dsn="postgresql://postgres@127.0.0.1:${LOCAL_PG_PORT:-55432}/$db"
  TRACKD_PG_DSN="$dsn" "$bin/server/trackd" migrate >/dev/null 2>&1
  start=$(date +%s.%N)
  TRACKD_PG_DSN="$dsn" TRACKD_KAFKA_BROKERS="$brokers" TRACKD_KAFKA_TOPIC="$topic" \
    TRACKD_KAFKA_GROUP="sweep-$rows-$writers" TRACKD_BATCH_MAX_ROWS="$rows" \
    TRACKD_BATCH_WRITERS="$writers" TRACKD_HTTP_ENABLED=false \
    "$bin/server/trackd" run >"/tmp/sweep-$rows-$writers.log" 2>&1 &
  pid=$!
  while :; do
    done_msgs=$(psql -qtAX "$dsn" -c "SELECT coalesce(sum(greatest(next_offset,0)),0) FROM trackd.kafka_offsets")
    ((done_msgs >= messages)) && break
    sleep 0.2
  done
  end=$(date +%s.%N)
  kill "$pid"; wait "$pid" || true
  psql -qX "$admin" -c "DROP DATABASE $db" >/dev/null
  awk -v r="$rows" -v w="$writers" -v s="$start" -v e="$end" -v m="$messages" \
    'BEGIN { printf "%-10s %8s %10.2f %12.0f\n", r, w, e - s, m / (e - s) }'
done
bash "$repo/scripts/kafka.sh" delete-topic "$topic" >/dev/null
