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

void FillGpuSignals(const GpuSample& s, ActivityMetric metric, GpuSignalRow* row) {
  GpuSignalRow& r = *row;
  r.present = 0;
  r.Set(GpuSignal::kGpuLost, s.health == GpuHealth::kLost ? 1 : 0);
  if (auto a = ActivityMilli(s, metric))
    r.Set(GpuSignal::kActivity, static_cast<double>(*a) / 1000.0);
  if (s.util_gpu_pct.has_value()) r.Set(GpuSignal::kGpuUtil, s.util_gpu_pct.value());
  if (s.util_mem_pct.has_value()) r.Set(GpuSignal::kMemUtil, s.util_mem_pct.value());
  if (s.gpm.sm_active.has_value()) r.Set(GpuSignal::kSmActive, s.gpm.sm_active.value() * 100.0);
  if (s.gpm.tensor_active.has_value())
    r.Set(GpuSignal::kTensorActive, s.gpm.tensor_active.value() * 100.0);
  if (s.gpm.dram_bw_util.has_value())
    r.Set(GpuSignal::kDramBwUtil, s.gpm.dram_bw_util.value() * 100.0);
  if (s.temperature_c.has_value()) r.Set(GpuSignal::kTemperatureC, s.temperature_c.value());
  if (s.power_mw.has_value()) r.Set(GpuSignal::kPowerW, s.power_mw.value() / 1000.0);
  if (s.memory_used_bytes.has_value() && s.memory_total_bytes.has_value() &&
      s.memory_total_bytes.value() > 0) {
    r.Set(GpuSignal::kMemoryUsedPct, 100.0 * static_cast<double>(s.memory_used_bytes.value()) /
                                         static_cast<double>(s.memory_total_bytes.value()));
  }
  const bool has_job = std::any_of(s.processes.begin(), s.processes.end(), [](const GpuProcess& p) {
    return p.job.known() && !p.job.id.empty();
  });
  r.Set(GpuSignal::kAllocated, has_job ? 1 : 0);
  // Memory-bound heuristic (the PromQL rules use the same): DRAM busier than the SMs.
  r.Set(GpuSignal::kMemoryBound, s.gpm.dram_bw_util.has_value() && s.gpm.sm_active.has_value() &&
                                         s.gpm.dram_bw_util.value() > s.gpm.sm_active.value()
                                     ? 1
                                     : 0);
}

std::optional<GpuSignal> GpuSignalOf(const std::string& name) {
  const auto& names = KnownSignals(RuleScope::kGpu);
  for (size_t i = 0; i < names.size() && i < kGpuSignalCount; ++i) {
    if (names[i] == name) return static_cast<GpuSignal>(i);
  }
  return std::nullopt;
}

Signals ToSignals(const GpuSignalRow& row) {
  Signals out;
  const auto& names = KnownSignals(RuleScope::kGpu);
  for (size_t i = 0; i < kGpuSignalCount; ++i) {
    const auto s = static_cast<GpuSignal>(i);
    if (row.Has(s)) out[names[i]] = row.Get(s);
  }
  return out;
}

GpuSignalRow ToGpuSignalRow(const Signals& signals) {
  GpuSignalRow row;
  for (const auto& [name, v] : signals) {
    if (auto s = GpuSignalOf(name)) row.Set(*s, v);
  }
  return row;
}

Signals GpuSignals(const GpuSample& s, ActivityMetric metric) {
  GpuSignalRow row;
  FillGpuSignals(s, metric, &row);
  return ToSignals(row);
}

}  // namespace stoker::efficiency
