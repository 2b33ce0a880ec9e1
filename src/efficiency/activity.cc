#include "efficiency/activity.h"

#include <algorithm>
#include <cmath>

namespace stoker::efficiency {

std::string GpuKey(const GpuSample& s) {
  return s.id.uuid.empty() ? "gpu" + std::to_string(s.id.index) : s.id.uuid;
}

std::vector<std::string> JobsOnGpu(const GpuSample& s) {
  std::vector<std::string> out;
  for (const auto& p : s.processes) {
    if (!p.job.known() || p.job.id.empty()) continue;
    if (std::find(out.begin(), out.end(), p.job.id) == out.end()) out.push_back(p.job.id);
  }
  return out;
}

Signals GpuSignals(const GpuSample& s, ActivityMetric metric) {
  Signals out;
  out["gpu_lost"] = s.health == GpuHealth::kLost ? 1 : 0;
  if (auto a = ActivityMilli(s, metric)) out["activity"] = static_cast<double>(*a) / 1000.0;
  if (s.util_gpu_pct.has_value()) out["gpu_util"] = s.util_gpu_pct.value();
  if (s.util_mem_pct.has_value()) out["mem_util"] = s.util_mem_pct.value();
  if (s.gpm.sm_active.has_value()) out["sm_active"] = s.gpm.sm_active.value() * 100.0;
  if (s.gpm.tensor_active.has_value()) out["tensor_active"] = s.gpm.tensor_active.value() * 100.0;
  if (s.gpm.dram_bw_util.has_value()) out["dram_bw_util"] = s.gpm.dram_bw_util.value() * 100.0;
  if (s.temperature_c.has_value()) out["temperature_c"] = s.temperature_c.value();
  if (s.power_mw.has_value()) out["power_w"] = s.power_mw.value() / 1000.0;
  if (s.memory_used_bytes.has_value() && s.memory_total_bytes.has_value() &&
      s.memory_total_bytes.value() > 0) {
    out["memory_used_pct"] = 100.0 * static_cast<double>(s.memory_used_bytes.value()) /
                             static_cast<double>(s.memory_total_bytes.value());
  }
  out["allocated"] = JobsOnGpu(s).empty() ? 0 : 1;
  // Memory-bound heuristic (the PromQL rules use the same): DRAM busier than the SMs.
  out["memory_bound"] = s.gpm.dram_bw_util.has_value() && s.gpm.sm_active.has_value() &&
                                s.gpm.dram_bw_util.value() > s.gpm.sm_active.value()
                            ? 1
                            : 0;
  return out;
}

}  // namespace stoker::efficiency
