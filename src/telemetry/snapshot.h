#pragma once
// A consistent copy of everything the agent knows, taken from the sampler's cache. Renderers
// (Prometheus text, JSON, `stoker smi`) work on this copy, never on live sampler state, so a
// scrape holds no lock while it formats.

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/field.h"
#include "core/gpu.h"
#include "protocol/gpu_fields.h"

namespace stoker::telemetry {

struct GpuState {
  bool have_sample = false;          // false until the first successful sample
  GpuSample sample;                  // the latest successful sample
  std::string last_error;            // why the latest Sample() failed; empty when it succeeded
  uint64_t samples_total = 0;        // successful samples
  uint64_t sample_errors_total = 0;  // Sample() calls that returned an error
  uint64_t skipped_ticks_total = 0;  // ticks dropped because a read overran its interval
  Duration last_source_duration{};   // time spent inside GpuSource::Sample
  Duration last_agent_duration{};    // the agent's own work around it (attribution, caching)
  // Per GpuScalarFields() index: samples in which the field was in state kError.
  std::array<uint64_t, protocol::kMaxScalarFields> field_errors_total{};
  std::map<uint64_t, uint64_t> xid_counts;  // XID code -> events since start
  uint64_t last_xid = 0;                    // most recent XID within the hold time; 0 = none
  WallTime last_xid_time{};
};

struct HostStats {
  Field<double> load1, load5, load15;
  Field<uint64_t> memory_total_bytes;
  Field<uint64_t> memory_available_bytes;
};

// Reads <proc_root>/loadavg and <proc_root>/meminfo. Unreadable values stay unset.
HostStats ReadHostStats(const std::string& proc_root = "/proc");

struct TelemetrySnapshot {
  WallTime taken_at{};
  bool nvml_available = false;
  bool simulated = false;
  std::string source_description;  // GpuSource::Describe(), or why NVML is unavailable
  std::vector<GpuState> gpus;
  HostStats host;
  uint64_t event_errors_total = 0;  // WaitEvents failures
};

}  // namespace stoker::telemetry
