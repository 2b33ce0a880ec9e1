#pragma once
// Resource vocabulary of the scheduler: GPU models, MIG profiles and placement requests.
// All quantities are integers in fixed units (milli-CPU, MiB, milli-GPU): sums of them are exact,
// so the cluster's aggregates never drift however many allocations and releases happen.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/gpu_shapes.h"
#include "core/status.h"

namespace stoker::scheduler {

// The whole-GPU bound and the MIG profiles are core's (core/gpu_shapes.h), shared with the
// protocol's check of a job spec.
using ::stoker::kMaxGpusPerNode;
using ::stoker::kMigSlicesPerGpu;
using ::stoker::MigProfile;
using ::stoker::MigSlices;
using ::stoker::ParseMigProfile;

inline constexpr int32_t kMilliPerGpu = 1000;
inline constexpr int kMaxGpuModels = 64;  // GpuModelMask has one bit per model

using GpuModelId = uint8_t;
// Bit i set = model i allowed. 0 = any model.
using GpuModelMask = uint64_t;

// Interned GPU model names ("G2", "T4", "A100-SXM4-80GB"): ids are small dense integers so nodes
// and requests compare models with a bit test.
class GpuModelTable {
 public:
  // Returns the id of `name`, adding it if new. ResourceExhausted past kMaxGpuModels models;
  // InvalidArgument for an empty name.
  Result<GpuModelId> Intern(std::string_view name);
  std::optional<GpuModelId> Find(std::string_view name) const;
  const std::string& Name(GpuModelId id) const { return names_[id]; }
  int size() const { return static_cast<int>(names_.size()); }
  // "V100M16|V100M32" -> mask of those models. Empty text -> 0 (any). NotFound names the unknown
  // model.
  Result<GpuModelMask> ParseMask(std::string_view pipe_list) const;
  static GpuModelMask Bit(GpuModelId id) { return GpuModelMask{1} << id; }

 private:
  std::vector<std::string> names_;
};

// True for the models whose GPUs can be partitioned (A100, H100, H200 families).
bool ModelSupportsMig(std::string_view model_name);

// What one job/pod/task asks for. Exactly one of the GPU shapes:
//   CPU-only:      num_gpu == 0, gpu_milli == 0, mig == kNone
//   whole GPUs:    num_gpu in 1..8, gpu_milli == 1000 (per GPU)
//   GPU share:     num_gpu == 1, gpu_milli in 1..999 (a fraction of ONE GPU)
//   MIG instance:  num_gpu == 1, gpu_milli == 0, mig != kNone (on a MIG-enabled GPU)
struct Request {
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int32_t num_gpu = 0;
  int32_t gpu_milli = 0;            // per GPU
  int64_t gpu_memory_mib = 0;       // per GPU; 0 = no constraint
  GpuModelMask allowed_models = 0;  // 0 = any model
  MigProfile mig = MigProfile::kNone;
  std::string job_class;     // e.g. "recsys", "cv"; used by the weighted policy
  bool best_effort = false;  // may use the oversubscribed CPU/memory share

  static Request CpuOnly(int64_t cpu_milli, int64_t memory_mib);
  static Request WholeGpus(int32_t n, int64_t cpu_milli, int64_t memory_mib);
  static Request GpuShare(int32_t gpu_milli, int64_t cpu_milli, int64_t memory_mib);
  static Request Mig(MigProfile profile, int64_t cpu_milli, int64_t memory_mib);

  bool IsCpuOnly() const { return num_gpu == 0; }
  bool IsGpuShare() const { return num_gpu == 1 && gpu_milli > 0 && gpu_milli < kMilliPerGpu; }
  bool IsMig() const { return mig != MigProfile::kNone; }
  // GPU milli the request takes from the cluster (a MIG slice counts as 1000/7, rounded down).
  int64_t TotalGpuMilli() const;
};

// Checks the shape rules above and value ranges. InvalidArgument names the offending field.
Status ValidateRequest(const Request& r);

}  // namespace stoker::scheduler
