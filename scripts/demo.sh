#!/usr/bin/env bash
# The whole job on local defaults: install packages, build, start a local PostgreSQL/PostGIS
# and Kafka broker, apply the migrations, run trackd and a simulated fleet, and show where to
# look. Everything keeps running in the background until `scripts/demo.sh stop`.
# `scripts/demo.sh hints` prints only the "where to look" commands (the tests run them).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
local_dir="${TRACKD_LOCAL_DIR:-$repo/.local}"
logs="$local_dir/logs"
run="$local_dir/run"
bin="$repo/build/release"
topic="${DEMO_TOPIC:-vehicle-positions}"
vehicles="${DEMO_VEHICLES:-2000}"
rate="${DEMO_RATE:-2000}"
pg_port="${LOCAL_PG_PORT:-55432}"
http_addr="${TRACKD_HTTP_LISTEN:-127.0.0.1:8080}"
token="${DEMO_TOKEN:-demo-read-token-0123456789}"
dsn="postgresql://postgres@127.0.0.1:$pg_port/trackd"

hints() {
  cat <<EOT
Where to look:
  psql:    psql $dsn
           SELECT vehicle_id, last_updated, ST_AsText(geom) FROM trackd.vehicle_current_state LIMIT 10;
           SELECT reason_code, count(*) FROM trackd.dead_letters GROUP BY 1;
  QGIS:    Layer > Add PostGIS layers > New connection: host 127.0.0.1, port $pg_port,
           database trackd, user postgres (no password); layers trackd.vehicle_current_state
           and trackd.vehicle_telemetry_history (geom, PointZ, EPSG:4326)
  API:     curl -H 'Authorization: Bearer $token' 'http://$http_addr/v1/vehicles?limit=3'
           (docs/api.md); OGC API - Features at http://$http_addr/, for GDAL:
           ogrinfo -ro -so --config GDAL_HTTP_HEADERS 'Authorization: Bearer $token' OAPIF:http://$http_addr/ vehicles
  map:     http://$http_addr/map (enter the token $token)
  logs:    $logs/trackd.log (trackd), $logs/fleet.log (fleet), $logs/postgres.log, $logs/kafka.log
  stop:    bash scripts/demo.sh stop
EOT
}

stop_demo() {
  for name in fleet trackd; do
    if [[ -f "$run/$name.pid" ]]; then
      kill "$(cat "$run/$name.pid")" 2>/dev/null || true
      rm -f "$run/$name.pid"
    fi
  done
  sleep 2
  bash "$here/services.sh" stop
  echo "demo: stopped"
}

if [[ "${1:-}" == "stop" ]]; then
  stop_demo
  exit 0
fi
if [[ "${1:-}" == "hints" ]]; then
  hints
  exit 0
fi

echo "demo: installing packages and building (the first run takes a few minutes)"
bash "$here/setup.sh"
bash "$here/python-env.sh" >/dev/null  # Arrow/Parquet C++ for the archive come from pyarrow
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" >/dev/null
bash "$here/services.sh" start
mkdir -p "$logs" "$run"

export TRACKD_PG_DSN="$dsn"
export TRACKD_KAFKA_BROKERS="127.0.0.1:${LOCAL_KAFKA_PORT:-59092}"
export TRACKD_KAFKA_TOPIC="$topic"
# A read-only API token for the demo (configure real ones in [http.tokens]).
export TRACKD_HTTP_TOKENS_DEMO="read:$token"
"$bin/server/trackd" migrate
bash "$here/kafka.sh" create-topic "$topic" 4

for name in fleet trackd; do
  if [[ -f "$run/$name.pid" ]] && kill -0 "$(cat "$run/$name.pid")" 2>/dev/null; then
    kill "$(cat "$run/$name.pid")"; sleep 1
  fi
done
nohup "$bin/server/trackd" run >>"$logs/trackd.log" 2>&1 &
echo $! >"$run/trackd.pid"
nohup "$bin/tools/trackd-fleet" --brokers "$TRACKD_KAFKA_BROKERS" --topic "$topic" --start now \
  --vehicles "$vehicles" --rate "$rate" --duration-s 86400 >>"$logs/fleet.log" 2>&1 &
echo $! >"$run/fleet.pid"

echo "demo: trackd and a fleet of $vehicles vehicles ($rate positions/s) are running; waiting 10 s"
sleep 10
psql_cmd=(psql -X "$TRACKD_PG_DSN")
"${psql_cmd[@]}" -c "SELECT (SELECT count(*) FROM trackd.vehicle_telemetry_history) AS history_rows,
  (SELECT count(*) FROM trackd.vehicle_current_state) AS vehicles,
  (SELECT count(*) FROM trackd.dead_letters) AS dead_letters,
  (SELECT max(last_updated) FROM trackd.vehicle_current_state) AS newest_position;"

hints
