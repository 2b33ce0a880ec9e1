#!/usr/bin/env bash
# Builds Stoker and runs every test: the normal build (unit, integration, end-to-end, promtool
# checks), the same suites under AddressSanitizer + UndefinedBehaviorSanitizer, and a short
# libFuzzer run of each fuzz target. Usage: scripts/test.sh [--quick]  (--quick: normal build only)
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0; [[ ${1:-} == --quick ]] && quick=1
jobs=$(nproc)
# Let ccache share objects between clones in different folders (CI builds a fresh clone).
export CCACHE_BASEDIR=$PWD

echo "== build (RelWithDebInfo) =="
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C build -j"$jobs"
echo "== tests =="
ctest --test-dir build -j"$jobs" --output-on-failure --timeout 600

if ((quick)); then exit 0; fi

echo "== tests under ASan + UBSan =="
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DSTOKER_SANITIZE=ON -DSTOKER_BUILD_BENCH=OFF >/dev/null
ninja -C build-asan -j"$jobs"
# Slow reproduction and load tests are exercised in the normal build; sanitizers run the rest.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan -j"$jobs" --output-on-failure --timeout 900 -LE slow

echo "== fuzzing (libFuzzer, clang, ASan + UBSan) =="
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DSTOKER_FUZZ=ON -DSTOKER_BUILD_TESTS=OFF -DSTOKER_BUILD_BENCH=OFF >/dev/null
ninja -C build-fuzz -j"$jobs"
fuzz_seconds=${STOKER_FUZZ_SECONDS:-30}
shopt -s nullglob
for fuzzer in build-fuzz/fuzz/*/fuzz_*; do
  [[ -x $fuzzer && -f $fuzzer ]] || continue
  name=$(basename "$fuzzer")
  corpus_seed=fuzz/corpus/$name
  work=$(mktemp -d)
  [[ -d $corpus_seed ]] && cp -r "$corpus_seed"/. "$work"/
  echo "-- $name for ${fuzz_seconds}s"
  "$fuzzer" -max_total_time="$fuzz_seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 "$work" \
    2>&1 | tail -n 3
  rm -rf "$work"
done
echo "fuzz: all targets ran without findings"
