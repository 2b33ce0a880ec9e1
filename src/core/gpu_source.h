#pragma once
// Where GPU readings come from. Production: NvmlGpuSource (dlopen'd libnvidia-ml). Tests and
// `--simulate`: the same NvmlGpuSource pointed at the fake NVML library built in this tree.
// Unit tests of consumers may implement it directly.

#include <cstdint>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/gpu.h"
#include "core/status.h"

namespace stoker {

// Thread-safety: Sample() may be called concurrently for *different* indices (one sampler
// thread per GPU, so a hung GPU never stalls the others); WaitEvents() from one thread.
class GpuSource {
 public:
  virtual ~GpuSource() = default;

  // Human-readable origin: driver/NVML versions and library path, or the simulated scenario.
  virtual std::string Describe() const = 0;
  // True when readings come from a simulated (fake NVML) node; shown wherever data is shown.
  virtual bool simulated() const = 0;

  virtual uint32_t DeviceCount() const = 0;

  // Reads GPU `index` into *out, reusing its vectors' capacity. A lost GPU yields OK with
  // out->health == kLost; a non-OK status means the sample could not be taken at all.
  virtual Status Sample(uint32_t index, GpuSample* out) = 0;

  // Waits up to `timeout` for critical events (XIDs ...). Returns an empty vector on timeout.
  virtual Result<std::vector<GpuEvent>> WaitEvents(Duration timeout) = 0;
};

}  // namespace stoker
