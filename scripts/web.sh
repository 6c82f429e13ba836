#!/usr/bin/env bash
# Installs the map page's npm packages, exactly as web/package-lock.json pins them (`npm ci`), into
# web/node_modules/: MapLibre GL JS, whose ES modules and CSS the build embeds into trackd (GET
# /map, no internet needed at run time), and playwright-core, which drives Debian's chromium in
# the browser test. CMake runs this at configure time; it does nothing while the lock is unchanged.
#
#   scripts/web.sh          install if needed
#   scripts/web.sh --force  install again
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
web="$(dirname "$here")/web"
stamp="$web/node_modules/.trackd-lock.sha256"

want="$(sha256sum "$web/package-lock.json" | cut -d' ' -f1)"
if [[ "${1:-}" != --force && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  exit 0
fi
command -v npm >/dev/null || {
  echo "web: npm not found: run scripts/setup.sh (it installs nodejs and npm)" >&2
  exit 1
}
echo "web: npm ci in $web (package-lock.json)"
# No install scripts: the packages are files to serve and a library to import, nothing to build.
(cd "$web" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error)
echo "$want" >"$stamp"
