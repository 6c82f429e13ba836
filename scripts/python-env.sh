#!/usr/bin/env bash
# Makes the project's Python environment, .venv/, with the pinned tools the tests and the build use
# (pyarrow for Arrow/Parquet C++, schemathesis, PyIceberg, DuckDB, fastavro, moto). Idempotent.
#
# The environment itself lives in the user's cache, one per version of
# scripts/python-requirements.txt (TRACKD_CACHE_DIR, default ~/.cache/trackd, as for the jars: venv-<hash>/), and
# .venv is a link to it: every clone of the same requirements shares one, so a fresh clone
# (as CI makes) does not install pyarrow again. A .venv that is a directory of its own (made
# before this) is kept while it matches the requirements.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$repo/.venv"
req="$repo/scripts/python-requirements.txt"

want="$(sha256sum "$req" | cut -d' ' -f1)"
up_to_date() { [[ -x "$1/bin/schemathesis" && -f "$1/.requirements.sha256" && "$(cat "$1/.requirements.sha256")" == "$want" ]]; }
if up_to_date "$venv"; then
  echo "python-env: $venv up to date"
  exit 0
fi

cache="${TRACKD_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/trackd}"
shared="$cache/venv-${want:0:16}"
mkdir -p "$cache"
# One maker at a time (two clones set up side by side); a virtual environment cannot be moved
# once made, so it is made in place, and the stamp written last says it is complete.
exec 9>"$cache/venv.lock"
flock 9
if ! up_to_date "$shared"; then
  # Debian's interpreter when there is one (python3-venv is in scripts/setup.sh), so that the
  # environment does not depend on whatever python3 a user's PATH finds first.
  py=/usr/bin/python3
  [[ -x "$py" ]] || py="$(command -v python3)"
  rm -rf "$shared"
  "$py" -m venv "$shared"
  "$shared/bin/pip" install --quiet --disable-pip-version-check --no-input -r "$req"
  echo "$want" > "$shared/.requirements.sha256"
  echo "python-env: made $shared ($("$shared/bin/schemathesis" --version 2>&1 | head -1))"
fi
flock -u 9
rm -rf "$venv"
ln -s "$shared" "$venv"
echo "python-env: $venv -> $shared"
