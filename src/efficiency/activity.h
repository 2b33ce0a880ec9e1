#pragma once
// Reading the engine's signals out of one GpuSample: which activity figure drives zones, the
// GPU's key, the jobs on it, and the per-GPU signal map alert rules are evaluated against.

#include <array>
#include <cstdint>
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

// The same GPU signals by position, without a map (the server's path computes them for every
// GPU every second). The order is KnownSignals(RuleScope::kGpu)'s.
enum class GpuSignal : uint8_t {
  kActivity,
  kGpuUtil,
  kSmActive,
  kTensorActive,
  kDramBwUtil,
  kMemUtil,
  kMemoryUsedPct,
  kTemperatureC,
  kPowerW,
  kAllocated,
  kMemoryBound,
  kXidFatal,
  kGpuLost,
};
inline constexpr size_t kGpuSignalCount = 13;

struct GpuSignalRow {
  std::array<double, kGpuSignalCount> value{};
  uint32_t present = 0;  // bit i: signal i is set

  void Set(GpuSignal s, double v) {
    value[static_cast<size_t>(s)] = v;
    present |= 1u << static_cast<unsigned>(s);
  }
  bool Has(GpuSignal s) const { return (present >> static_cast<unsigned>(s)) & 1u; }
  double Get(GpuSignal s) const { return value[static_cast<size_t>(s)]; }
};

// GpuSignals' values into `row` (cleared first); no allocation.
void FillGpuSignals(const GpuSample& s, ActivityMetric metric, GpuSignalRow* row);
// The position of a GPU signal's name (KnownSignals(RuleScope::kGpu)), or nullopt.
std::optional<GpuSignal> GpuSignalOf(const std::string& name);
// The map form of a row (names from KnownSignals(RuleScope::kGpu)), and back (names that are
// not GPU signals are left out: no GPU rule can name them).
Signals ToSignals(const GpuSignalRow& row);
GpuSignalRow ToGpuSignalRow(const Signals& signals);

}  // namespace stoker::efficiency
