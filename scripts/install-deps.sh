#!/usr/bin/env bash
# Installs every Debian 12 package Stoker needs to build, test and run (idempotent).
set -euo pipefail
packages=(
  build-essential cmake ninja-build ccache pkg-config clang clang-format clang-tidy libclang-rt-14-dev
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libyaml-cpp-dev libcli11-dev libspdlog-dev libfmt-dev libsqlite3-dev
  libcpp-httplib-dev libboost1.74-dev libsimdjson-dev libssl-dev zlib1g-dev libbrotli-dev
  libjemalloc-dev
  prometheus prometheus-node-exporter prometheus-alertmanager curl openssl python3 procps
  slurm-wlm slurmctld slurmd slurm-client munge
  libopenblas-dev dataset-fashion-mnist
  # The web dashboard: node and npm build it (npm ci from web/package-lock.json), Chromium runs
  # its browser tests headless. Debian 12 ships Node.js 18 and npm 9; web/ is pinned to versions
  # that run there.
  nodejs npm chromium
  # Kubernetes: gRPC and protobuf for the device plugin and the kubelet's PodResources API;
  # kubectl (1.20, with kustomize) renders deploy/kubernetes in the tests.
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler kubernetes-client
  # scripts/check-k8s-manifests.py reads the rendered manifests with PyYAML.
  python3-yaml
)
missing=()
for p in "${packages[@]}"; do
  # A Node.js from elsewhere (NodeSource) brings its own npm, which Debian's npm would conflict with.
  if [[ $p == npm ]] && command -v npm >/dev/null; then continue; fi
  # Likewise a kubectl from elsewhere (Google's or Kubernetes' own package) owns /usr/bin/kubectl.
  if [[ $p == kubernetes-client ]] && command -v kubectl >/dev/null; then continue; fi
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO=sudo
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  # Debian's prometheus, munge and slurm packages try to start services; keep them from doing
  # so (the tests start their own daemons: scripts/slurm-cluster.sh): a policy-rc.d that denies
  # every start while installing, removed afterwards unless one was there already.
  policy=/usr/sbin/policy-rc.d
  own_policy=0
  if [[ ! -e $policy ]]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
    $SUDO chmod 755 "$policy"
    own_policy=1
  fi
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  if ((own_policy)); then $SUDO rm -f "$policy"; fi
fi
