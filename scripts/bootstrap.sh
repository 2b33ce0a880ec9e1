#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to a running Stoker: installs the Debian packages,
# builds `stoker` (and stoker-full beside it, which runs the server: docs/architecture.md,
# "Programs") and starts the main job, `stoker up` (server + local agent).
# Without a GPU the local agent serves a simulated node (fake NVML), and says so.
# Extra arguments go to `stoker up` (e.g. --listen 127.0.0.1:9470 --data-dir /tmp/stoker).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C build stoker
# A root agent refuses jobs that would run as root; on a machine where the one user is root
# (a fresh VM or container) that would refuse every job, so allow it here, and say so.
extra=()
if [[ $(id -u) -eq 0 ]]; then
  echo "bootstrap: running as root: jobs submitted as root run as root (--allow-root-jobs)"
  extra=(--allow-root-jobs)
fi
exec build/bin/stoker up "${extra[@]}" "$@"
