#!/usr/bin/env bash
# clang-tidy with the project's checks (.clang-tidy) over the C++ files a change touches
# (default: against main), over every source (--all: what CI runs), or over the files named.
# Needs a built build/ (compile commands, and the generated headers some sources include).
# Runs one clang-tidy per core. Usage: scripts/check-tidy.sh [--all | FILE...]
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
# A finding in a header shows once per source that includes it: each is listed once. A clang-tidy
# that fails (it could not parse a file, or crashed) fails the check, findings or not.
log=$(mktemp)
trap 'rm -f "$log" "$log.err"' EXIT
rc=0
printf '%s\n' "${files[@]}" |
  xargs -P "$(nproc)" -n 4 clang-tidy -p build --quiet >"$log" 2>"$log.err" || rc=$?
out=$(grep -E 'warning:|error:' "$log" | sort -u || true)
if [[ -n $out ]]; then
  echo "$out"
  echo "tidy: $(wc -l <<<"$out") finding(s) in ${#files[@]} file(s)"
  exit 1
fi
if ((rc != 0)); then
  tail -20 "$log.err"
  echo "tidy: clang-tidy failed (exit $rc) on ${#files[@]} file(s)"
  exit 1
fi
echo "tidy: ${#files[@]} file(s) clean"
