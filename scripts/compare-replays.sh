#!/usr/bin/env bash
# Shows that a change leaves the scheduling pass's decisions as they were: replays the same
# job traces through `stoker sim jobs` (the production pass, docs/scheduling.md) with two
# builds and compares every output file byte for byte.
#
# The matrix (41 replays, about 5 minutes per build on 2 cores):
#   - five queue policies (fifo, sjf, srtf, las, priority), each with and without EASY backfill,
#     on Philly (80 x 8 GPUs, Helios' window), ITP cluster 1 and Tiresias' 60-job trace;
#   - four more placement policies (fgd, weighted, bestfit, random) with FIFO on Philly and on
#     ITP cluster 2;
#   - ITP clusters 3 to 5 with SJF.
# Each replay writes its JSON summary, its per-job CSV (placements, starts, ends, preemptions)
# and what it printed on stderr; the LAS and SRTF runs on Philly preempt 17,000-19,000 times.
#
# Usage: scripts/compare-replays.sh BEFORE AFTER [OUT_DIR]
#   BEFORE, AFTER: a `stoker` binary each (stoker-full beside it, as the build puts it), or a
#   directory of replays made earlier by this script (BEFORE/<name>.json, .csv and .err).
# Exit status 0 when every output is identical, 1 when one differs (the diff names it).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
if [ $# -lt 2 ]; then
  echo "usage: $0 BEFORE AFTER [OUT_DIR]" >&2
  exit 2
fi
out="${3:-}"
# A folder for the replays only when a side is a binary to replay with (temporary if not given).
if [ -z "$out" ] && { [ ! -d "$1" ] || [ ! -d "$2" ]; }; then out=$(mktemp -d); fi
trace() { "$root/scripts/trace-path.sh" "$1"; }
philly=$(trace philly/philly.csv)
tiresias=$(trace tiresias/60_job.csv)
itp() { trace "itp/cluster$1.csv"; }

# replays STOKER DIR: the whole matrix into DIR.
replays() {
  local stoker=$1 dir=$2
  mkdir -p "$dir"
  run() {
    local name=$1
    shift
    if ! "$stoker" sim jobs "$@" --json --no-progress --csv "$dir/$name.csv" >"$dir/$name.json" \
      2>"$dir/$name.err"; then
      echo "$name failed with $stoker:" >&2
      cat "$dir/$name.err" >&2
      exit 1
    fi
  }
  local window=(--since 2017-10-01 --until "2017-11-30 23:59:00")
  for q in fifo sjf srtf las priority; do
    for b in none easy; do
      run "philly-$q-$b" --trace "$philly" --format philly --cluster 80x8 --queue "$q" \
        --backfill "$b" "${window[@]}"
      run "itp1-$q-$b" --trace "$(itp 01)" --format itp --queue "$q" --backfill "$b"
      run "tiresias-$q-$b" --trace "$tiresias" --format tiresias --queue "$q" --backfill "$b"
    done
  done
  for p in fgd weighted bestfit random; do
    run "philly-fifo-$p" --trace "$philly" --format philly --cluster 80x8 --policy "$p" \
      "${window[@]}"
    run "itp2-fifo-$p" --trace "$(itp 02)" --format itp --policy "$p"
  done
  for c in 03 04 05; do run "itp$c-sjf" --trace "$(itp "$c")" --format itp --queue sjf; done
}

side() {  # side ARG NAME: the replays of ARG (a binary, run now; or a directory, as it is)
  if [ -d "$1" ]; then
    echo "$1"
  else
    echo "replaying with $1 into $out/$2" >&2
    replays "$1" "$out/$2"
    echo "$out/$2"
  fi
}
before=$(side "$1" before)
after=$(side "$2" after)
files=$(find "$after" -type f | wc -l)
if diff -r "$before" "$after"; then
  echo "identical: $files files ($(du -sh "$after" | cut -f1)) in $before and $after"
else
  echo "DIFFERENT: see the diff above ($before, $after)" >&2
  exit 1
fi
