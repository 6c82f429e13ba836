#!/usr/bin/env bash
# The fault suite on its own (docs/reliability.md): builds the release preset, starts the local
# services, and runs every fault case RUNS times in a row (default 3), stopping at the first
# failure. Cases that stop PostgreSQL or Kafka start private instances of their own.
#
# Usage: scripts/faults.sh [RUNS]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$(dirname "$here")"
runs="${1:-3}"
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || { echo "usage: scripts/faults.sh [RUNS]" >&2; exit 2; }

export TEST_PG_ADMIN_DSN="${TEST_PG_ADMIN_DSN:-postgresql://postgres@127.0.0.1:${LOCAL_PG_PORT:-55432}/postgres}"
export TEST_KAFKA_BROKERS="${TEST_KAFKA_BROKERS:-127.0.0.1:${LOCAL_KAFKA_PORT:-59092}}"

bash "$here/setup.sh"
bash "$here/python-env.sh"
cmake --preset release >/dev/null
cmake --build --preset release -j "${TRACKD_BUILD_JOBS:-$(nproc)}"
bash "$here/toxiproxy.sh" install >/dev/null
bash "$here/services.sh" start
ctest --preset release -L faults --repeat "until-fail:$runs" --output-on-failure
