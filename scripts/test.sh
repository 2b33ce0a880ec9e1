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
# With -g ccache would also hash the build folder; clones in other folders then never hit.
export CCACHE_NOHASHDIR=1

echo "== layering =="
python3 scripts/check-layering.py .
echo "== format =="
scripts/check-format.sh

echo "== build (RelWithDebInfo) =="
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C build -j"$jobs"
echo "== tests =="
ctest --test-dir build -j"$jobs" --output-on-failure --timeout 600

if ((quick)); then exit 0; fi

echo "== clang-tidy (.clang-tidy's checks, every source) =="
scripts/check-tidy.sh --all

echo "== tests under ASan + UBSan =="
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DSTOKER_SANITIZE=ON -DSTOKER_BUILD_BENCH=OFF >/dev/null
ninja -C build-asan -j"$jobs"
# Slow reproduction and load tests are exercised in the normal build; sanitizers run the rest.
# The whole-process e2e tests (UpTest, the kill -9 Durability loop) run in the normal
# build above only: under ASan their process deadlines flake on two loaded cores.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan -j"$jobs" --output-on-failure --timeout 900 -LE slow -E 'UpTest\.|Durability\.'


echo "== fuzzing (libFuzzer, clang, ASan + UBSan) =="
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DSTOKER_FUZZ=ON -DSTOKER_BUILD_TESTS=OFF -DSTOKER_BUILD_BENCH=OFF >/dev/null
fuzzers=(fakenvml_scenario_fuzz agent_config_fuzz server_api_fuzz efficiency_config_fuzz efficiency_records_fuzz)
ninja -C build-fuzz -j"$jobs" "${fuzzers[@]}"
fuzz_seconds=${STOKER_FUZZ_SECONDS:-30}
for name in "${fuzzers[@]}"; do
  fuzzer=$(find build-fuzz/fuzz -type f -name "$name" | head -n 1)
  work=$(mktemp -d)
  # Seed corpora: the shipped scenarios for the scenario parser; the others start empty.
  [[ $name == fakenvml_scenario_fuzz ]] && cp scenarios/*.yaml "$work"/
  echo "-- $name for ${fuzz_seconds}s"
  if ! "$fuzzer" -max_total_time="$fuzz_seconds" -timeout=10 -rss_limit_mb=2048 "$work" >"$work.log" 2>&1; then
    tail -n 80 "$work.log"
    echo "fuzz: $name found a problem (input saved in the current directory as crash-*/leak-*)"
    exit 1
  fi
  grep -E "^Done" "$work.log" | tail -n 1 || true
  rm -rf "$work" "$work.log"
done
echo "fuzz: all targets ran without findings"
