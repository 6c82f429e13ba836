#!/usr/bin/env bash
# Creates the project's Python environment in .venv/ with the pinned tools the tests use
# (schemathesis, for the OpenAPI conformance test of the HTTP API). Idempotent: a venv whose
# installed set already matches scripts/python-requirements.txt is left alone.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$repo/.venv"
req="$repo/scripts/python-requirements.txt"
stamp="$venv/.requirements.sha256"

want="$(sha256sum "$req" | cut -d' ' -f1)"
if [[ -x "$venv/bin/schemathesis" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  echo "python-env: $venv up to date"
  exit 0
fi

# Debian's interpreter when there is one (python3-venv is in scripts/setup.sh), so that the
# environment does not depend on whatever python3 a user's PATH finds first.
py=/usr/bin/python3
[[ -x "$py" ]] || py="$(command -v python3)"
rm -rf "$venv"
"$py" -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check --no-input -r "$req"
echo "$want" > "$stamp"
echo "python-env: $venv ready ($("$venv/bin/schemathesis" --version 2>&1 | head -1))"
