#!/usr/bin/env bash
# Prints the path of a public trace file, looked up as docs/traces.md says (the tests use the same
# order, tests/support/traces.h): $STOKER_TRACES, then ../shared/traces beside the checkout, then
# data/traces in the checkout (scripts/fetch-traces.sh). Fails with a hint when it is nowhere.
#
# Usage: scripts/trace-path.sh RELATIVE_PATH     e.g. scripts/trace-path.sh openb/openb_pod_list_default.csv
#        scripts/trace-path.sh                   prints the first folder that exists
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dirs=()
[[ -n ${STOKER_TRACES:-} ]] && dirs+=("$STOKER_TRACES")
dirs+=("$root/../shared/traces" "$root/data/traces")
for d in "${dirs[@]}"; do
  if [[ $# -eq 0 && -d $d ]] || [[ $# -gt 0 && -f $d/$1 ]]; then
    # Canonical, so that printed paths do not carry "..".
    if [[ $# -eq 0 ]]; then (cd "$d" && pwd); else echo "$(cd "$(dirname "$d/$1")" && pwd)/$(basename "$1")"; fi
    exit 0
  fi
done
{
  echo "trace ${1:-folder} not found in: ${dirs[*]}"
  echo "get the public traces with scripts/fetch-traces.sh (into data/traces), or set STOKER_TRACES"
} >&2
exit 1
