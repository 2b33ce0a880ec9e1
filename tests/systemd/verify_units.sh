#!/usr/bin/env bash
# systemd-analyze verify on deploy/systemd/*.service with ExecStart pointing at the built
# binary: fails on any complaint (an unknown directive or a bad value is only a warning for
# systemd, so any output counts), and checks the restart policy and state directory are set.
set -euo pipefail
bin=$1
src=$(cd "$(dirname "$0")/../.." && pwd)/deploy/systemd
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for u in "$src"/*.service; do
  sed "s#/usr/local/bin/stoker#$bin#g" "$u" >"$tmp/$(basename "$u")"
  for key in Restart= StateDirectory= ExecStart= ProtectSystem=; do
    grep -q "^$key" "$u" || { echo "FAIL: $u has no $key"; exit 1; }
  done
done
out=$(systemd-analyze verify "$tmp"/*.service 2>&1) || { echo "FAIL: $out"; exit 1; }
if [[ -n $out ]]; then echo "FAIL: systemd-analyze verify: $out"; exit 1; fi
echo "ok: $(ls "$src"/*.service | wc -l) units verified"
