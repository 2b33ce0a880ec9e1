#pragma once
// Generated variants of a pod list for the static packing experiment, as the FGD paper (ATC'23)
// builds its GPU-type and multi-GPU experiments from the published lists:
//
// - GPU-model constraints: a chosen share of the GPU pods must run on one GPU model, drawn in
//   proportion to the GPUs of each model in the node list, among the models with a node that
//   could host the pod at all (an 8-GPU pod is never pinned to a model whose nodes have two).
//   Pods that already name models keep theirs and are not counted as candidates.
// - Multi-GPU-heavy: copies of the list's multi-GPU pods (drawn uniformly with replacement) are
//   appended until multi-GPU pods ask for the chosen share of the list's GPU request. (FGD's
//   published openb_pod_list_multigpu20 … 50 have this composition: the default list plus
//   multi-GPU pods up to 20 … 50 % of the GPU request.)
//
// Both are deterministic for a seed. The packing protocol then shuffles and inflates the
// generated list as it does a published one.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "scheduler/cluster.h"
#include "scheduler/resources.h"
#include "sim/packing.h"

namespace stoker::sim {

struct WorkloadVariant {
  int constrain_pct = 0;  // share of GPU pods pinned to one GPU model, 0..100
  int multi_gpu_pct = 0;  // multi-GPU pods' share of the GPU request, 0 (as is) .. 90
  bool empty() const { return constrain_pct == 0 && multi_gpu_pct == 0; }
  // "default" -> "default+spec20+mgpu30"; the name alone when nothing is generated.
  std::string Name(const std::string& workload) const;
};

// InvalidArgument for a share out of range, or a multi-GPU share asked of a list without
// multi-GPU pods.
Status ValidateWorkloadVariant(const WorkloadVariant& v);

// The generated list (the multi-GPU copies first appended, then the constraints drawn over all
// GPU pods). `cluster` gives the GPU models, their GPU counts and which nodes could host a pod.
Result<std::vector<scheduler::Request>> GenerateWorkload(
    const std::vector<scheduler::Request>& pods, const scheduler::ClusterState& cluster,
    const WorkloadVariant& variant, uint64_t seed);

// One run of the packing protocol on `pods`, or on the variant drawn from them with
// `variant_seed` (the run's own seed when absent, so every seed draws its own variant). The
// offline typical shapes (fgd, and the fragmentation metrics) are those of the list run.
Result<PackingCurve> RunPackingVariant(const scheduler::ClusterState& cluster,
                                       const std::vector<scheduler::Request>& pods,
                                       const WorkloadVariant& variant,
                                       std::optional<uint64_t> variant_seed, const PackingRun& run);

}  // namespace stoker::sim
