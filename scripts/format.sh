#!/usr/bin/env bash
# Formats the C++ sources with clang-format, or with --check fails on any difference.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
mapfile -t files < <(git ls-files --cached --others --exclude-standard -- \
  '*.cpp' '*.hpp' | grep -v '^build/')
if [[ "${1:-}" == "--check" ]]; then
  clang-format --dry-run --Werror "${files[@]}"
  echo "format: ${#files[@]} files clean"
else
  clang-format -i "${files[@]}"
fi
