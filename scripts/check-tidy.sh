#!/usr/bin/env bash
# clang-tidy with the project's checks (.clang-tidy) over the C++ files a change touches
# (default: against main), or over the files named. Needs a configured build/ (compile
# commands). Usage: scripts/check-tidy.sh [--all | FILE...]
set -euo pipefail
cd "$(dirname "$0")/.."
[[ -f build/compile_commands.json ]] || cmake -S . -B build -G Ninja >/dev/null
if [[ ${1:-} == --all ]]; then
  mapfile -t files < <(git ls-files 'src/*.cc')
elif (($#)); then
  files=("$@")
else
  mapfile -t files < <(git diff --name-only --diff-filter=AM main -- 'src/*.cc')
fi
((${#files[@]})) || { echo "tidy: no C++ sources to check"; exit 0; }
out=$(clang-tidy -p build --quiet "${files[@]}" 2>/dev/null | grep -E 'warning:|error:' || true)
if [[ -n $out ]]; then
  echo "$out"
  echo "tidy: $(wc -l <<<"$out") finding(s) in ${#files[@]} file(s)"
  exit 1
fi
echo "tidy: ${#files[@]} file(s) clean"
