#!/usr/bin/env bash
# Fails when a tracked C++ or CUDA file differs from what clang-format (.clang-format) would
# write; prints the files. Usage: scripts/check-format.sh [--fix]
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.cc' '*.h' '*.cu')
if [[ ${1:-} == --fix ]]; then
  clang-format -i "${files[@]}"
  exit 0
fi
bad=$(clang-format --dry-run "${files[@]}" 2>&1 | grep -oE '^[^:]+:[0-9]+:[0-9]+: (warning|error)' |
  cut -d: -f1 | sort -u || true)
if [[ -n $bad ]]; then
  echo "$bad"
  echo "format: $(wc -l <<<"$bad") file(s) differ from clang-format; run scripts/check-format.sh --fix"
  exit 1
fi
echo "format: ${#files[@]} files as clang-format writes them"
