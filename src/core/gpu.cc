#include "core/gpu.h"

#include <algorithm>
#include <cmath>

namespace stoker {

std::optional<int64_t> ActivityMilli(const GpuSample& s, ActivityMetric metric,
                                     ActivityMetric* used) {
  if (s.health == GpuHealth::kLost) return std::nullopt;
  auto clamp = [](int64_t v) { return std::clamp<int64_t>(v, 0, 100'000); };
  if (metric != ActivityMetric::kGpuUtil && s.gpm.sm_active.has_value()) {
    if (used) *used = ActivityMetric::kSmActive;
    return clamp(std::llround(s.gpm.sm_active.value() * 100'000.0));
  }
  if (metric == ActivityMetric::kSmActive) return std::nullopt;
  if (s.util_gpu_pct.has_value()) {
    if (used) *used = ActivityMetric::kGpuUtil;
    return clamp(static_cast<int64_t>(s.util_gpu_pct.value()) * 1000);
  }
  return std::nullopt;
}

}  // namespace stoker
