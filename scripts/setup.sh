#!/usr/bin/env bash
# Installs every system package trackd's build, tests and demo need. Idempotent: packages
# already present are skipped, so a second run takes seconds.
set -euo pipefail

PACKAGES=(
  # build
  build-essential cmake ninja-build pkg-config git ccache
  librdkafka-dev libpqxx-dev libpq-dev libgeos-dev libproj-dev proj-data libsimdjson-dev
  libboost-dev libboost-system-dev libfmt-dev libtomlplusplus-dev
  # net/: https to REST catalogs and schema registries (Boost.Asio SSL over OpenSSL); the tests
  # make a throwaway CA with the openssl command
  libssl-dev openssl ca-certificates
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  # decode/: Protobuf payloads (protoc generates trackd.v1.Position at build time; the .proto
  # parser for registry schemas has its header in libprotoc-dev, its code in libprotobuf)
  protobuf-compiler libprotobuf-dev libprotoc-dev
  # archive/: Iceberg metadata JSON (Arrow/Parquet come from the pyarrow wheel, scripts/python-env.sh)
  nlohmann-json3-dev zlib1g-dev
  # tooling: format, lint, sanitizers, fuzzing
  clang clang-14 clang-format clang-tidy libclang-rt-14-dev
  # local services: PostgreSQL 15 + PostGIS 3, Java and Maven for the Kafka broker and the
  # Iceberg REST catalog server (javac: scripts/iceberg-rest.sh compiles its small main)
  postgresql-15 postgresql-15-postgis-3 postgresql-client-15 postgresql-contrib
  default-jre-headless default-jdk-headless maven
  # scripts and tests; nftables: the fault suite drops PostgreSQL's packets in the kernel
  python3 python3-venv curl jq procps psmisc nftables
  # bench/ingest.sh --profile: perf (cpu-clock sampling, DWARF call graphs)
  linux-perf
  # HTTP API: GDAL's OGC API - Features client (ogrinfo) in the tests, wrk for bench/api
  gdal-bin wrk
  # operations: promtool and the Prometheus server (CI checks deploy/prometheus, the metrics
  # integration test scrapes trackd with it), docker-compose (CI checks docker-compose.yml)
  prometheus docker-compose
  # the map page's browser test: Debian's chromium, headless, driven by playwright-core (npm,
  # scripts/web.sh); chromium-driver for WebDriver clients
  chromium chromium-driver
)

# The map page's npm packages (scripts/web.sh, run by CMake): Debian's Node.js and npm when the
# machine has none of its own.
if ! command -v npm >/dev/null; then PACKAGES+=(nodejs npm); fi

# The fault suite builds Toxiproxy from its Go module (scripts/toxiproxy.sh): Debian's Go when the
# machine has none of its own.
if ! command -v go >/dev/null && [[ ! -x /usr/local/go/bin/go ]]; then PACKAGES+=(golang-go); fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
