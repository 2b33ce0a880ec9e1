#pragma once
// Reading the engine's signals out of one GpuSample: which activity figure drives zones, the
// GPU's key, the jobs on it, and the per-GPU signal map alert rules are evaluated against.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/gpu.h"
#include "efficiency/config.h"

namespace stoker::efficiency {

// Stable key for a GPU: its UUID, or "gpu<index>" when the UUID is unknown.
std::string GpuKey(const GpuSample& s);

// Activity in milli-percent (0..100000) per the configured metric (core/gpu.h).
using stoker::ActivityMilli;

// Distinct known job ids among the sample's processes, in order of first appearance.
std::vector<std::string> JobsOnGpu(const GpuSample& s);

// Signal values (percent for ratios) for GPU-scope rules; a signal the sample lacks is absent,
// and a condition on an absent signal is false.
using Signals = std::map<std::string, double>;
Signals GpuSignals(const GpuSample& s, ActivityMetric metric);

}  // namespace stoker::efficiency
