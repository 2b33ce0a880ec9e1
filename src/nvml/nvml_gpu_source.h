#pragma once
// NvmlGpuSource: the GpuSource backed by NVML loaded with dlopen (the driver's libnvidia-ml, or
// the fake NVML library for tests and `--simulate`, through exactly the same code path).

#include <memory>
#include <string>

#include "core/gpu_source.h"
#include "core/status.h"

namespace stoker::nvml {

struct NvmlOptions {
  std::string library_path = "libnvidia-ml.so.1";
};

// dlopen()s NVML and initialises it. Errors name the library and the symbol or NVML code.
Result<std::unique_ptr<GpuSource>> OpenNvmlGpuSource(const NvmlOptions& options);

}  // namespace stoker::nvml
