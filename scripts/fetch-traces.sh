#!/usr/bin/env bash
# Fetches the public GPU-cluster traces that the simulator, the tests and the benchmarks read,
# from their publishers, at pinned commits, and checks every file against its SHA-256. Each set
# gets its publisher's licence beside it (docs/traces.md lists sources, licences and the papers
# to cite).
#
# Usage: scripts/fetch-traces.sh [DIR]     (default: data/traces in this checkout, which the
#                                           lookup of docs/traces.md finds without settings)
# Env: STOKER_TRACES_BASE_URL replaces https://raw.githubusercontent.com (a mirror laid out
#      OWNER/REPO/COMMIT/PATH, e.g. file:///srv/mirror).
#
# Needs curl (or wget), sha256sum, tar and python3. Nothing is overwritten that already matches
# its checksum, so the script can be run again to complete an interrupted download.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${1:-data/traces}
base=${STOKER_TRACES_BASE_URL:-https://raw.githubusercontent.com}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Publishers and the commits the checksums below belong to.
CLUSTERDATA=alibaba/clusterdata/7a6c496e4f4b6ce6150be8f881cb051bf2abff42
FGD_SIM=hkust-adsl/kubernetes-scheduler-simulator/8f3d6417353c5083c6d56617f255fadd8dc306bc
ELASTICFLOW_TRACES=microsoft/elasticflow-traces/277ed24d0e908c31a1c98145819e2e3853d8ac00
ELASTICFLOW=pkusys/ElasticFlow/04a0109a6acdd7d89f4cb31b6a6a7a128bee6bb0
TIRESIAS=SymbioticLab/Tiresias/959f9b08f44fa1b4f2b3aed79b01e4d439264a94

download() {  # URL FILE
  if command -v curl >/dev/null; then
    curl --fail --silent --show-error --location --retry 3 -o "$2" "$1"
  else
    wget --quiet --tries=3 -O "$2" "$1"
  fi
}

failed=0
# fetch REPO/COMMIT PATH DEST SHA256: downloads unless DEST already has that checksum.
fetch() {
  local src=$1 path=$2 out=$3 sum=$4
  if [[ -f $out ]] && echo "$sum  $out" | sha256sum --check --status; then
    return 0
  fi
  mkdir -p "$(dirname "$out")"
  if ! download "$base/$src/$path" "$out.part"; then
    echo "fetch-traces: cannot download $base/$src/$path" >&2
    failed=1
    return 0
  fi
  if ! echo "$sum  $out.part" | sha256sum --check --status; then
    echo "fetch-traces: $path from $src: checksum mismatch (want $sum); not kept" >&2
    rm -f "$out.part"
    failed=1
    return 0
  fi
  mv "$out.part" "$out"
  echo "fetched $out"
}

# --- openb: Alibaba GPU-sharing cluster (FGD, USENIX ATC'23). The pod and node lists as
# published in alibaba/clusterdata (cluster-trace-gpu-v2023/csv); the licence is that of the FGD
# simulator's repository, which ships the same files under Apache-2.0.
o="$dest/openb"
while read -r sum name; do
  fetch "$CLUSTERDATA" "cluster-trace-gpu-v2023/csv/$name" "$o/$name" "$sum"
done <<'LIST'
5a85c2af79c66a1efff8bbcbda430400aae56d8431370d738480967e1a9c6b15 openb_node_list_all_node.csv
2beca64b4d3dfa342036a34b56a495c6cef9225db836c81f541282cb1df320b5 openb_node_list_gpu_node.csv
1bc3fd9ee5c1468ccd018f624d9222746e08d59f963f66b925804734271c0eaa openb_pod_list_cpu0.csv
8ed554026d041b15ff21ddc104d9a21dbd9a93c496262fa23ef7b5be27e220dc openb_pod_list_cpu037.csv
747f43247bffc2b0bb081d7f61f0705ca8d390dafc0b647e642c92f3baf3ba1e openb_pod_list_cpu050.csv
f8a2b031461b54d7b9f06d55473c2371eb3357b78a255c646bdca5e0833a8a2f openb_pod_list_cpu072.csv
bec1c33fbdde61fd463877534ec79b393aec73e1cbb22d55fab9f166ac480982 openb_pod_list_cpu100.csv
b7e9d8a1a601da84d6e0b4110b19ef5001be5e4796d33e7b82f166ba95161f87 openb_pod_list_cpu200.csv
87bebd4d012faa8305ce1fd82737f51cf03361aac28b75d42e34aa656d7f4ee0 openb_pod_list_cpu235.csv
134c21ff96d57533df8a37b67632972884fec9396e77cd0898ddc370cc8e607d openb_pod_list_cpu250.csv
76528825f40ee662cb098b3b6e683c1efd9f87a0c8af7e628df1f32c639636d1 openb_pod_list_cpu300.csv
1ee7ed79c27a3b0861cda8ddba86a004c6aba904caafa329a76ae93ca63834a8 openb_pod_list_default.csv
12dbc07d6a49bf8641e2275a2ff5bf7be74b5df7d148d531e135b140b95f9a3d openb_pod_list_gpushare100.csv
9be2d0efb52e242c32e23dd184cc5fcc1983478c6c9c02cbb6b4b62925c0ffcd openb_pod_list_gpushare20.csv
d83ce79a4eb6987524bedbb0c65e41aed3a36bf6c1b78b86234c3687a07e1d40 openb_pod_list_gpushare40.csv
d31809628128a1f24491086eda4af3e23882b9213d3ef57a56ee2d1af69492fe openb_pod_list_gpushare60.csv
88b6649369ced40d0fde287d2498ea61ff4b05fccba8bdc95daf6042f2f8431e openb_pod_list_gpushare80.csv
8f1c0ef7e4e511e982bd2818898ba22ee6d273bf5fce124b7ace285b5928cf4e openb_pod_list_gpuspec05.csv
2dc7e4cb9480484f08539720b433a9ec9ab5d76b396f3f7557c53a2ff78a7611 openb_pod_list_gpuspec10.csv
6b9b89ab8913c1c074e994e98f548cf1a872fc5f76f2442ca8cd514a478b00a9 openb_pod_list_gpuspec20.csv
9d030679a2ccd7e27a7ec9ff15baff34480d22a0012515691fc187e3f35ee68c openb_pod_list_gpuspec25.csv
eca4f746db1e5b25864ad021b55ece3943e101a3ebd4574d09dcb95c46117652 openb_pod_list_gpuspec33.csv
d9ec6f6c74fb980cc0b81239470c6353fceea077ea9abd610003b604c7cc2b01 openb_pod_list_multigpu20.csv
a5e479c6444b1d83eef848159cf00c3cfa13441b2d1e2c113c391b91f1cc5b11 openb_pod_list_multigpu30.csv
32c9e8731ca07ef96108aa65f2a289bb9aacb47f642ed9e3789f99b242df60eb openb_pod_list_multigpu40.csv
206f2f5959db30ecb7c44e7f13197c8ec50b7a35558ad3777cc3662ef0fe5373 openb_pod_list_multigpu50.csv
LIST
fetch "$FGD_SIM" LICENSE "$o/LICENSE" c71d239df91726fc519c6eb72d318ec65820627232b2f796219e87dcf35d0ab4
# The published results of the FGD paper's simulator, per seed; reference_results.csv (below)
# is their mean over the seeds 42-51.
ex="$tmp/expected"
fetch "$FGD_SIM" experiments/analysis/expected_results/analysis_allo_discrete.csv \
  "$ex/analysis_allo_discrete.csv" e00aff5923a52d53e47c16ec9d19190de4e788c15334865a77bd46e1bd006ea1
fetch "$FGD_SIM" experiments/analysis/expected_results/analysis_frag_discrete.csv \
  "$ex/analysis_frag_discrete.csv" 0d9181864ef9adb2169f232124c6af767579fe2a3c08f940419b4989420c8ce2
fetch "$FGD_SIM" experiments/analysis/expected_results/analysis_frag_ratio_discrete.csv \
  "$ex/analysis_frag_ratio_discrete.csv" 78f55e6324b532c6af8d69da8e312d8cbe6f953719ccfa3f51e5a392b6b1d860
if [[ -f $ex/analysis_allo_discrete.csv && -f $ex/analysis_frag_discrete.csv &&
      -f $ex/analysis_frag_ratio_discrete.csv ]]; then
  python3 scripts/fgd-reference-results.py "$ex" >"$o/reference_results.csv.part"
  mv "$o/reference_results.csv.part" "$o/reference_results.csv"
  echo "derived $o/reference_results.csv"
fi

# --- itp: Microsoft ITP training clusters (ElasticFlow, ASPLOS'23), MIT. One tarball of ten
# clusters; the simulator's examples use cluster01-05.
i="$dest/itp"
fetch "$ELASTICFLOW_TRACES" data/raw-traces.tar.gz "$tmp/raw-traces.tar.gz" \
  67398e1a89245c50ae0881bf997e6cda0c95f9f47980af5bc56d67998965669f
if [[ -f $tmp/raw-traces.tar.gz ]]; then
  mkdir -p "$tmp/itp"
  tar -xzf "$tmp/raw-traces.tar.gz" -C "$tmp/itp"
  while read -r sum name; do
    got=$(find "$tmp/itp" -name "$name" -type f | head -n 1)
    if [[ -n $got ]] && echo "$sum  $got" | sha256sum --check --status; then
      mkdir -p "$i"
      cp "$got" "$i/$name"
    else
      echo "fetch-traces: itp/$name missing from the tarball or checksum mismatch" >&2
      failed=1
    fi
  done <<'LIST'
27d707f576fce5637f9efec43f610da3d335f36e3c6fd4ded2f5bccfce05974a cluster01.csv
7a5849e73aff9f9bc33f87c9bacadf8aab2f3a9e7bc5d70956f5cbf40126526c cluster02.csv
282d765c5289ab0ba870f494dd2c67893f9d16d726fdc8a51f13b7412515dbf8 cluster03.csv
247850e4265f35749e98d15e82a67765301e81272334265f1fe60d65787892a9 cluster04.csv
1553359ddd673a0ffc531ca10e73ba729dbacbce905ce878dbb8499d2dbed0fb cluster05.csv
LIST
  echo "unpacked $i (cluster01-05)"
fi
fetch "$ELASTICFLOW_TRACES" LICENSE "$i/LICENSE" c2cfccb812fe482101a8f04597dfc5a9991a6b2748266c47ac91b6a5aae15383

# --- philly: Microsoft Philly (ATC'19) as the Pollux artifact (OSDI'21) derived it, from the
# ElasticFlow repository that ships it with its Apache-2.0 licence (the raw trace,
# msr-fiddle/philly-traces, is CC BY 4.0).
p="$dest/philly"
fetch "$ELASTICFLOW" pollux/pollux_simulator/traces/philly.csv "$p/philly.csv" \
  ebffb3dd1589bdf4e7bcd74496201c5ded1d557d498ee14f560463f37ec353da
fetch "$ELASTICFLOW" LICENCE "$p/LICENSE" 525bcac8394c7ecd3847fc92758edb5cafaae6acf103379e4a540a6f64f2e066

# --- tiresias: the 60-job example of the Tiresias simulator (NSDI'19), Apache-2.0.
t="$dest/tiresias"
fetch "$TIRESIAS" simulator/60_job.csv "$t/60_job.csv" \
  17575949a6e570960db42bc5576739de9c334ed4c664859841c4f01ede38bd1b
fetch "$TIRESIAS" simulator/cluster_spec.csv "$t/cluster_spec.csv" \
  58c1241b524064b2226012547eba1c9033f0820818c79b85e85a984c4d6b1867
fetch "$TIRESIAS" LICENSE "$t/LICENSE" c71d239df91726fc519c6eb72d318ec65820627232b2f796219e87dcf35d0ab4

if ((failed)); then
  echo "fetch-traces: some files are missing (see above); run again to retry" >&2
  exit 1
fi
echo "traces in $dest; cite the papers named in docs/traces.md"
