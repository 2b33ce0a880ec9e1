#!/usr/bin/env bash
# Checks Stoker's agent against nvidia-smi on a machine with a real NVIDIA GPU.
#
#   scripts/gpu-check.sh [--binary PATH] [--out DIR] [--load-seconds N] [--only-inference]
#
# 1. Takes the given (portable) binary, or builds `stoker` from this tree.
# 2. Compares each GPU's reading in `stoker smi --json` with `nvidia-smi --query-gpu` taken at the
#    same moment, within stated tolerances (the two read NVML a few milliseconds apart):
#      uuid, name, memory.total: exact;  memory.used: ±max(256 MiB, 1 % of total);
#      temperature: ±3 °C;  power: ±max(25 W, 15 %);  utilization: ±20 points.
# 3. Runs a bf16 matrix-multiply load with PyTorch and shows GPU utilization, SM activity and
#    tensor activity (GPM, Hopper+) rising above idle while it runs.
# 4. Builds the example inference server (stoker-infer) with its CUDA path and runs
#    `stoker-infer --gpu-check`: the Fashion-MNIST test set through cuBLAS against the OpenBLAS
#    path (accuracy, agreement, largest logit difference) and the time per item by batch size.
#    --only-inference runs this step alone.
# Exit status 0 only when every comparison and the load check pass. A JSON summary goes to
# DIR/gpu-check.json (default: current directory).
set -uo pipefail
cd "$(dirname "$0")/.."
binary=""; out=.; load_seconds=25; only_inference=0
while (($#)); do
  case $1 in
    --binary) binary=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --load-seconds) load_seconds=$2; shift 2 ;;
    --only-inference) only_inference=1; shift ;;
    *) echo "usage: $0 [--binary PATH] [--out DIR] [--load-seconds N] [--only-inference]" >&2; exit 2 ;;
  esac
done
command -v nvidia-smi >/dev/null || { echo "gpu-check: nvidia-smi not found: this needs an NVIDIA GPU" >&2; exit 3; }

inference_check() {
  echo "== inference: the CUDA path of stoker-infer =="
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTOKER_BUILD_TESTS=OFF -DSTOKER_BUILD_BENCH=OFF >/dev/null &&
    ninja -C build-gpu stoker-infer || { echo "gpu-check: stoker-infer build failed" >&2; return 1; }
  mkdir -p "$out"
  build-gpu/bin/stoker-infer --weights "$out/fashion-mlp.bin" --gpu-check
}
if ((only_inference)); then inference_check; exit $?; fi
if [[ -z $binary ]]; then
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTOKER_BUILD_TESTS=OFF -DSTOKER_BUILD_BENCH=OFF >/dev/null &&
    ninja -C build-gpu stoker || { echo "gpu-check: build failed" >&2; exit 1; }
  binary=build-gpu/bin/stoker
fi
mkdir -p "$out"
echo "gpu-check: $(date -u +%FT%TZ) on $(hostname), binary $binary"
nvidia-smi --query-gpu=driver_version,name --format=csv,noheader | head -n 1

python3 - "$binary" "$out" "$load_seconds" <<'PY'
import json, subprocess, sys, time, threading

binary, out, load_seconds = sys.argv[1], sys.argv[2], int(sys.argv[3])
QUERY = "index,uuid,name,memory.total,memory.used,temperature.gpu,power.draw,utilization.gpu"

def smi():
    rows = subprocess.run(["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv,noheader,nounits"],
                          check=True, capture_output=True, text=True).stdout.strip().splitlines()
    res = {}
    for r in rows:
        f = [x.strip() for x in r.split(",")]
        num = lambda s: float(s) if s not in ("[N/A]", "N/A", "[Not Supported]") else None
        res[f[1]] = dict(index=int(f[0]), uuid=f[1], name=f[2], mem_total_mib=num(f[3]),
                         mem_used_mib=num(f[4]), temp_c=num(f[5]), power_w=num(f[6]), util=num(f[7]))
    return res

def stoker():
    p = subprocess.run([binary, "smi", "--json"], capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        raise SystemExit(f"stoker smi --json failed ({p.returncode}): {p.stderr.strip()}")
    return json.loads(p.stdout)

def val(g, name):
    f = g.get("fields", {}).get(name)
    return None if f is None else f.get("value")

checks, ok = [], True
def check(gpu, what, ours, theirs, tol):
    global ok
    good = ours is not None and theirs is not None and abs(ours - theirs) <= tol
    ok &= good
    checks.append(dict(gpu=gpu, what=what, stoker=ours, nvidia_smi=theirs, tolerance=tol, ok=good))
    print(f"  GPU {gpu} {what:14s} stoker={ours!s:>10} nvidia-smi={theirs!s:>10} tol={tol:<8.4g} {'ok' if good else 'MISMATCH'}")

ref_before = smi(); snap = stoker(); ref_after = smi()
if snap.get("simulated"):
    raise SystemExit("stoker reported a simulated node on a GPU machine: NVML did not load")
print(f"stoker source: {snap.get('source')}")
for g in snap["gpus"]:
    uuid = g["uuid"]
    if uuid not in ref_before:
        ok = False; print(f"  GPU {g['index']}: uuid {uuid} not reported by nvidia-smi"); continue
    a, b = ref_before[uuid], ref_after[uuid]
    i = g["index"]
    good = g["name"] == a["name"]
    ok &= good
    checks.append(dict(gpu=i, what="name", stoker=g["name"], nvidia_smi=a["name"], ok=good))
    print(f"  GPU {i} name           {g['name']} vs {a['name']} {'ok' if good else 'MISMATCH'}")
    mib = lambda v: None if v is None else v / 1048576.0
    check(i, "memory.total", mib(val(g, "memory_total_bytes")), a["mem_total_mib"], 1.0)
    mean = lambda k: None if a[k] is None or b[k] is None else (a[k] + b[k]) / 2
    check(i, "memory.used", mib(val(g, "memory_used_bytes")), mean("mem_used_mib"),
          max(256.0, 0.01 * (a["mem_total_mib"] or 0)))
    check(i, "temperature", val(g, "temperature_c"), mean("temp_c"), 3.0)
    pw = val(g, "power_mw"); pw = None if pw is None else pw / 1000.0
    check(i, "power", pw, mean("power_w"), max(25.0, 0.15 * (mean("power_w") or 0)))
    check(i, "utilization", val(g, "util_gpu_pct"), mean("util"), 20.0)

# Load phase: matmuls on GPU 0 while stoker samples.
LOAD = f"""
import torch, time
a = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16); b = torch.randn_like(a)
end = time.time() + {load_seconds}
while time.time() < end:
    for _ in range(20): c = a @ b
    torch.cuda.synchronize()
"""
idle = stoker()["gpus"][0]
loader = subprocess.Popen([sys.executable, "-c", LOAD])
time.sleep(min(10, load_seconds / 2))
busy = []
for _ in range(3):
    busy.append(stoker()["gpus"][0]); time.sleep(2)
loader.wait()
def series(name):
    return [val(idle, name)] + [val(g, name) for g in busy]
load = {n: series(n) for n in ("util_gpu_pct", "sm_active_ratio", "tensor_active_ratio", "power_mw")}
print("load (idle, then 3 samples under bf16 matmul):")
for n, s in load.items():
    print(f"  {n:22s} {s}")
def rose(name, threshold):
    s = load[name]
    return s[0] is not None and all(v is not None and v >= threshold for v in s[1:]) and max(s[1:]) > s[0]
load_ok = rose("util_gpu_pct", 50)
gpm = {n: rose(n, 0.2) for n in ("sm_active_ratio", "tensor_active_ratio")}
gpm_supported = all(v is not None for v in load["sm_active_ratio"][1:])
if gpm_supported:
    load_ok &= all(gpm.values())
print(f"utilization rose: {rose('util_gpu_pct', 50)}; GPM supported: {gpm_supported}; GPM rose: {gpm}")
ok &= load_ok
summary = dict(when=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), source=snap.get("source"),
               checks=checks, load=load, gpm_supported=gpm_supported, passed=bool(ok))
with open(f"{out}/gpu-check.json", "w") as f:
    json.dump(summary, f, indent=1)
print("gpu-check:", "PASSED" if ok else "FAILED")
sys.exit(0 if ok else 1)
PY
agent_rc=$?
inference_check; inference_rc=$?
((agent_rc == 0 && inference_rc == 0))
