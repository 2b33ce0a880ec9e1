#pragma once
// Right-sizing onto MIG: the smallest profile that holds a job's compute and memory, and its
// name as NVIDIA writes it ("3g.40gb"). One rule for the zone plans (packing small jobs onto one
// GPU's MIG layout) and for the sizing of a server's recorded history.

#include <cmath>
#include <cstdint>
#include <string>

namespace stoker::efficiency {

// A profile of A100/H100/H200-class GPUs: compute slices of 7, memory in eighths of the GPU's.
struct MigFit {
  int slices;
  int memory_eighths;
};
inline constexpr MigFit kMigFits[] = {{1, 1}, {2, 2}, {3, 4}, {4, 4}, {7, 8}};

// The smallest profile whose compute (slices/7) covers `activity_milli` (0..100000) and whose
// memory holds `memory_bytes` on a GPU of `gpu_memory_bytes`; nullptr when none does.
inline const MigFit* SmallestMigFit(int64_t activity_milli, uint64_t memory_bytes,
                                    uint64_t gpu_memory_bytes) {
  for (const MigFit& p : kMigFits) {
    const bool compute_ok = activity_milli * 7 <= int64_t{p.slices} * 100'000;
    const bool memory_ok =
        memory_bytes * 8 <= gpu_memory_bytes * static_cast<uint64_t>(p.memory_eighths);
    if (compute_ok && memory_ok) return &p;
  }
  return nullptr;
}

// "3g.40gb": the memory in GiB rounded, as NVIDIA names the profiles from what the GPU reports
// (an H100 80GB reports 79.6 GiB: 1g.10gb, 2g.20gb, 3g.40gb, 7g.80gb).
inline std::string MigFitName(const MigFit& p, uint64_t gpu_memory_bytes) {
  const double gib = static_cast<double>(gpu_memory_bytes) / (1024.0 * 1024 * 1024);
  return std::to_string(p.slices) + "g." +
         std::to_string(std::llround(gib * p.memory_eighths / 8.0)) + "gb";
}

}  // namespace stoker::efficiency
