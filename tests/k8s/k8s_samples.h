#pragma once
// GPU samples as an agent on a Kubernetes node sends them, for the extender's tests and
// benchmarks: idle GPUs, GPUs with memory held by processes no pod owns, lost GPUs, pod claims.

#include <string>
#include <vector>

#include "core/gpu.h"

namespace stoker::k8s::testing {

inline constexpr uint64_t kGiB = uint64_t{1} << 30;

// An idle 80 GiB H100 ("GPU-<node>-<index>"): 0.5 GiB used by the driver, no process.
inline GpuSample IdleGpu(const std::string& node, uint32_t index, WallTime at) {
  GpuSample s;
  s.id.index = index;
  s.id.uuid = "GPU-" + node + "-" + std::to_string(index);
  s.id.name = "NVIDIA H100 80GB HBM3";
  s.timestamp = at;
  s.memory_total_bytes = Field<uint64_t>::Of(80 * kGiB);
  s.memory_used_bytes = Field<uint64_t>::Of(kGiB / 2);
  s.util_gpu_pct = Field<uint32_t>::Of(0);
  s.mig_enabled = Field<bool>::Of(false);
  s.remapping_pending = Field<bool>::Of(false);
  s.remapping_failed = Field<bool>::Of(false);
  return s;
}

// Adds a process using `bytes` that belongs to `job` (kind none: no pod owns it).
inline void AddProcess(GpuSample& s, uint32_t pid, uint64_t bytes, JobRef job = {}) {
  GpuProcess p;
  p.pid = pid;
  p.name = "python";
  p.used_memory_bytes = Field<uint64_t>::Of(bytes);
  p.job = std::move(job);
  s.processes.push_back(std::move(p));
  s.memory_used_bytes = Field<uint64_t>::Of(s.memory_used_bytes.value_or(0) + bytes);
}

inline JobRef Pod(const std::string& ns_name, const std::string& container = "main") {
  JobRef j;
  j.kind = JobRef::Kind::kKubernetes;
  j.id = ns_name;
  j.container = container;
  return j;
}

inline void AddShareClaim(GpuSample& s, const std::string& pod, int32_t milli) {
  GpuClaim c;
  c.job = Pod(pod);
  c.gpu_milli = milli;
  s.claims.push_back(c);
}

inline void AddWholeClaim(GpuSample& s, const std::string& pod) {
  GpuClaim c;
  c.job = Pod(pod);
  c.whole = true;
  c.gpu_milli = 1000;
  s.claims.push_back(c);
}

inline std::vector<GpuSample> IdleNode(const std::string& node, int gpus, WallTime at) {
  std::vector<GpuSample> out;
  for (int i = 0; i < gpus; ++i) out.push_back(IdleGpu(node, static_cast<uint32_t>(i), at));
  return out;
}

}  // namespace stoker::k8s::testing
