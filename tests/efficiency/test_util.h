#pragma once
// Sample builders for the efficiency tests: simulated time, no GPU.

#include <chrono>
#include <string>

#include "core/gpu.h"

namespace stoker::efficiency::testing {

inline WallTime T0() { return WallTime(std::chrono::seconds(1'767'225'600)); }

inline GpuSample Sample(const std::string& uuid, WallTime t, int util_pct,
                        const std::string& job = "", double sm_active = -1) {
  GpuSample s;
  s.id.uuid = uuid;
  s.id.name = "NVIDIA H100 80GB HBM3";
  s.timestamp = t;
  s.util_gpu_pct = Field<uint32_t>::Of(static_cast<uint32_t>(util_pct));
  s.temperature_c = Field<uint32_t>::Of(60);
  if (sm_active >= 0) s.gpm.sm_active = Field<double>::Of(sm_active);
  if (!job.empty()) {
    GpuProcess p;
    p.pid = 100;
    p.job.kind = JobRef::Kind::kStoker;
    p.job.id = job;
    p.job.user = "alice";
    s.processes.push_back(p);
  }
  return s;
}

}  // namespace stoker::efficiency::testing
