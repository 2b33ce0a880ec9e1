#pragma once
// The shapes a GPU is handed out in, named once for everything that reads or checks a request:
// whole GPUs (at most kMaxGpusPerNode on one node, also the largest whole-GPU request) and
// Multi-Instance GPU profiles. The scheduler places them (scheduler/resources.h); the protocol
// checks a job spec's `gpus` and `mig` against them (protocol/job.h), in the small programs too.

#include <cstdint>
#include <string_view>

#include "core/status.h"

namespace stoker {

inline constexpr int kMaxGpusPerNode = 8;   // also the largest whole-GPU request
inline constexpr int kMigSlicesPerGpu = 7;  // A100/H100/H200: 7 compute slices

// Multi-Instance GPU profiles as allocatable units: the value is the number of compute slices
// (of kMigSlicesPerGpu) the instance occupies on one GPU.
enum class MigProfile : uint8_t { kNone = 0, k1g = 1, k2g = 2, k3g = 3, k4g = 4, k7g = 7 };

inline int MigSlices(MigProfile p) { return static_cast<int>(p); }
// Accepts "1g", "1g.10gb", "3g.40gb", "7g.80gb" (memory suffix ignored: it follows the GPU model).
Result<MigProfile> ParseMigProfile(std::string_view text);

}  // namespace stoker
