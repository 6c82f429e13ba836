#!/usr/bin/env bash
# Starts, stops and reports the local services trackd's tests and demo use: a throwaway
# PostgreSQL/PostGIS cluster (scripts/pg.sh), its streaming replica (scripts/pg-replica.sh), a
# single-node Kafka broker (scripts/kafka.sh), a Confluent-compatible schema registry
# (scripts/registry.sh), an S3-compatible object store (moto, scripts/s3.sh) and Apache Iceberg's
# REST catalog server (scripts/iceberg-rest.sh, reading and writing s3:// through that store),
# all kept in the project-local folder .local/ (logs in .local/logs/).
#
#   scripts/services.sh start [--no-replica]   --no-replica: all but the replica (benchmarks)
#   scripts/services.sh stop | status | logs
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
logs="${TRACKD_LOCAL_DIR:-$repo/.local}/logs"

case "${1:-}" in
  start)
    bash "$here/pg.sh" start
    [[ "${2:-}" == --no-replica ]] || bash "$here/pg-replica.sh" start
    bash "$here/kafka.sh" start
    bash "$here/registry.sh" start
    bash "$here/s3.sh" start
    bash "$here/iceberg-rest.sh" start
    ;;
  stop)
    bash "$here/iceberg-rest.sh" stop || true
    bash "$here/s3.sh" stop || true
    bash "$here/registry.sh" stop || true
    bash "$here/kafka.sh" stop || true
    bash "$here/pg-replica.sh" stop || true
    bash "$here/pg.sh" stop || true
    ;;
  status)
    bash "$here/pg.sh" status || true
    bash "$here/pg-replica.sh" status || true
    bash "$here/kafka.sh" status || true
    bash "$here/registry.sh" status || true
    bash "$here/s3.sh" status || true
    bash "$here/iceberg-rest.sh" status || true
    ;;
  logs)
    # Printed by CI when something fails.
    for f in "$logs"/*.log; do
      [[ -e "$f" ]] || continue
      echo "===== $f (last ${LOG_LINES:-200} lines)"
      tail -n "${LOG_LINES:-200}" "$f"
    done
    ;;
  *)
    echo "usage: $0 start|stop|status|logs" >&2
    exit 2
    ;;
esac
