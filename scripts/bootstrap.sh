#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to a running Stoker: installs the Debian packages,
# builds the `stoker` binary and starts the main job, `stoker up` (server + local agent).
# Without a GPU the local agent serves a simulated node (fake NVML), and says so.
# Extra arguments go to `stoker up` (e.g. --listen 127.0.0.1:9470 --data-dir /tmp/stoker).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C build stoker
exec build/bin/stoker up "$@"
