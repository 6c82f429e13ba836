#!/usr/bin/env bash
# clang-tidy over trackd's own sources (server/, tools/) with the checks of .clang-tidy; any
# warning fails. A translation unit whose text, project headers, compile command and .clang-tidy
# are unchanged since it last passed is skipped: its hash is kept in the cache folder
# (TRACKD_TIDY_CACHE, default ~/.cache/trackd/tidy), so a warm run costs seconds.
# Usage: scripts/tidy.sh [BUILD_DIR]   (default build/release; needs its compile_commands.json
# and the .d files of a finished build)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
build="$(cd "${1:-$repo/build/release}" && pwd)"
cache="${TRACKD_TIDY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/trackd/tidy}"
jobs="${TRACKD_BUILD_JOBS:-$(nproc)}"
mkdir -p "$cache"

# One line per translation unit: "<hash> <source>". The hash covers the source and every
# project file its depfile names (paths relative to the repository, so clones share the cache),
# the compile command with the repository path taken out, and .clang-tidy.
todo="$(mktemp)"
trap 'rm -f "$todo"' EXIT
python3 - "$repo" "$build" "$cache" > "$todo" <<'PY'
import hashlib, json, os, re, sys
repo, build, cache = sys.argv[1:4]
total = 0
tidy = open(os.path.join(repo, ".clang-tidy"), "rb").read()
for entry in json.load(open(os.path.join(build, "compile_commands.json"))):
    src = os.path.normpath(os.path.join(entry["directory"], entry["file"]))
    rel = os.path.relpath(src, repo)
    if not (rel.startswith("server/") or rel.startswith("tools/")):
        continue
    total += 1
    cmd = entry.get("command") or " ".join(entry["arguments"])
    obj = re.search(r" -o (\S+)", cmd)
    deps = [src]
    if obj:
        depfile = os.path.join(entry["directory"], obj.group(1) + ".d")
        if os.path.exists(depfile):
            text = open(depfile).read().replace("\\\n", " ")
            deps = [os.path.normpath(os.path.join(entry["directory"], d))
                    for d in text.split(":", 1)[1].split()]
    h = hashlib.sha256(tidy)
    h.update(cmd.replace(repo, "@").encode())
    for d in sorted(set(deps)):
        if d.startswith(repo + "/") and os.path.exists(d):
            h.update(os.path.relpath(d, repo).encode())
            h.update(open(d, "rb").read())
    digest = h.hexdigest()
    if not os.path.exists(os.path.join(cache, digest)):
        print(digest, src)
print("total", total)
PY
total="$(sed -n 's/^total //p' "$todo")"
sed -i '/^total /d' "$todo"
misses="$(wc -l < "$todo")"
echo "tidy: $misses of $total translation units to check ($((total - misses)) unchanged since they passed)"
[[ "$misses" -eq 0 ]] && exit 0

# Each passing unit leaves its hash in the cache; a warning fails the whole step.
export build cache
status=0
xargs -P "$jobs" -L 1 bash -c '
  digest=$0; src=$1
  if out="$(clang-tidy -p "$build" --quiet --warnings-as-errors="*" "$src" 2>&1)"; then
    touch "$cache/$digest"
  else
    printf "%s\n" "$out" | grep -v "^[0-9]* warnings\? generated" >&2
    exit 1
  fi' < "$todo" || status=$?
if [[ $status -ne 0 ]]; then
  echo "tidy: warnings above (.clang-tidy lists the checks)" >&2
  exit 1
fi
echo "tidy: clean"
