#!/usr/bin/env bash
# Toxiproxy (a TCP proxy that injects latency, resets and black holes) for the fault suite,
# built once from its Go module with the machine's Go into the project's cache.
#
# Usage: scripts/toxiproxy.sh install   build it if missing; print the server binary's path
#        scripts/toxiproxy.sh path      print the server binary's path (install first)
#
# Environment: TRACKD_CACHE_DIR (default ~/.cache/trackd, shared by every clone), TOXIPROXY_VERSION (default v2.5.0).
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$SCRIPT_DIR/.." && pwd)"
CACHE="${TRACKD_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/trackd}"
VERSION="${TOXIPROXY_VERSION:-v2.5.0}"
BIN_DIR="$CACHE/toxiproxy-$VERSION"
SERVER="$BIN_DIR/server"

die() { echo "toxiproxy: $*" >&2; exit 1; }

install() {
  if [[ -x "$SERVER" ]]; then echo "$SERVER"; return 0; fi
  command -v go >/dev/null || PATH="$PATH:/usr/local/go/bin"
  command -v go >/dev/null || die "needs Go (scripts/setup.sh installs Debian's golang-go when no Go is on the PATH)"
  mkdir -p "$BIN_DIR"
  echo "toxiproxy: building github.com/Shopify/toxiproxy/v2 $VERSION into $BIN_DIR" >&2
  GOBIN="$BIN_DIR" GOPATH="$CACHE/go" GOFLAGS=-modcacherw \
    go install "github.com/Shopify/toxiproxy/v2/cmd/server@$VERSION" >&2 ||
    die "go install failed"
  echo "$SERVER"
}

case "${1:-}" in
  install) install ;;
  path) [[ -x "$SERVER" ]] || die "not installed; run scripts/toxiproxy.sh install"; echo "$SERVER" ;;
  *) die "usage: scripts/toxiproxy.sh install|path" ;;
esac
