#include "sim/packing_workload.h"

#include <algorithm>

#include "scheduler/rng.h"

namespace stoker::sim {

using scheduler::ClusterState;
using scheduler::Request;

std::string WorkloadVariant::Name(const std::string& workload) const {
  std::string name = workload;
  if (multi_gpu_pct > 0) name += "+mgpu" + std::to_string(multi_gpu_pct);
  if (constrain_pct > 0) name += "+spec" + std::to_string(constrain_pct);
  return name;
}

Status ValidateWorkloadVariant(const WorkloadVariant& v) {
  if (v.constrain_pct < 0 || v.constrain_pct > 100) {
    return InvalidArgument("constrained share: must be 0..100 %, got " +
                           std::to_string(v.constrain_pct));
  }
  if (v.multi_gpu_pct < 0 || v.multi_gpu_pct > 90) {
    return InvalidArgument("multi-GPU share: must be 0..90 % of the GPU request, got " +
                           std::to_string(v.multi_gpu_pct));
  }
  return Status::Ok();
}

namespace {

// Streams apart from the protocol's shuffle (which uses Rng(seed)).
constexpr uint64_t kMultiGpuStream = 0x6d756c7469677075ULL;
constexpr uint64_t kConstrainStream = 0x6770752d73706563ULL;

Status AppendMultiGpu(std::vector<Request>& pods, int pct, uint64_t seed) {
  std::vector<Request> multi;
  int64_t multi_milli = 0, total_milli = 0;
  for (const Request& r : pods) {
    total_milli += r.TotalGpuMilli();
    if (r.num_gpu > 1) {
      multi.push_back(r);
      multi_milli += r.TotalGpuMilli();
    }
  }
  if (multi.empty()) {
    return InvalidArgument("multi-GPU share: the pod list has no multi-GPU pod to copy");
  }
  scheduler::Rng rng(seed ^ kMultiGpuStream);
  // Append until multi / total >= pct / 100 (integers: 100 * multi >= pct * total).
  while (100 * multi_milli < int64_t{pct} * total_milli) {
    const Request& r = multi[rng.Uniform(multi.size())];
    pods.push_back(r);
    multi_milli += r.TotalGpuMilli();
    total_milli += r.TotalGpuMilli();
  }
  return Status::Ok();
}

void Constrain(std::vector<Request>& pods, const ClusterState& cluster, int pct, uint64_t seed) {
  // GPUs per model in the node list, and for each model the nodes of that model.
  const int models = cluster.models().size();
  std::vector<int64_t> gpus(static_cast<size_t>(models), 0);
  std::vector<std::vector<int32_t>> nodes(static_cast<size_t>(models));
  for (int32_t n = 0; n < cluster.num_nodes(); ++n) {
    const auto& spec = cluster.spec(n);
    if (spec.num_gpus == 0) continue;
    gpus[spec.gpu_model] += spec.num_gpus;
    nodes[spec.gpu_model].push_back(n);
  }
  std::vector<size_t> candidates;
  for (size_t i = 0; i < pods.size(); ++i) {
    if (pods[i].num_gpu > 0 && pods[i].allowed_models == 0) candidates.push_back(i);
  }
  scheduler::Rng rng(seed ^ kConstrainStream);
  for (size_t i = candidates.size(); i > 1; --i) {
    std::swap(candidates[i - 1], candidates[rng.Uniform(i)]);
  }
  // Of all GPU pods (already constrained ones included), pct % end up constrained.
  int64_t gpu_pods = 0;
  for (const Request& r : pods) gpu_pods += r.num_gpu > 0 ? 1 : 0;
  const int64_t already = gpu_pods - static_cast<int64_t>(candidates.size());
  const int64_t want = std::clamp<int64_t>((gpu_pods * pct + 50) / 100 - already, 0,
                                           static_cast<int64_t>(candidates.size()));
  for (int64_t k = 0; k < want; ++k) {
    Request& r = pods[candidates[static_cast<size_t>(k)]];
    // Weight of each model: its GPUs, where some node of it could host the pod.
    std::vector<int64_t> weight(static_cast<size_t>(models), 0);
    int64_t total = 0;
    for (int m = 0; m < models; ++m) {
      for (int32_t n : nodes[static_cast<size_t>(m)]) {
        if (cluster.CouldEverFit(n, r)) {
          weight[static_cast<size_t>(m)] = gpus[static_cast<size_t>(m)];
          total += gpus[static_cast<size_t>(m)];
          break;
        }
      }
    }
    if (total == 0) continue;  // no node could host it anyway: left as it is
    int64_t pick = static_cast<int64_t>(rng.Uniform(static_cast<uint64_t>(total)));
    for (int m = 0; m < models; ++m) {
      pick -= weight[static_cast<size_t>(m)];
      if (pick < 0) {
        r.allowed_models = scheduler::GpuModelTable::Bit(static_cast<scheduler::GpuModelId>(m));
        break;
      }
    }
  }
}

}  // namespace

Result<std::vector<Request>> GenerateWorkload(const std::vector<Request>& pods,
                                              const ClusterState& cluster,
                                              const WorkloadVariant& variant, uint64_t seed) {
  STOKER_RETURN_IF_ERROR(ValidateWorkloadVariant(variant));
  std::vector<Request> out = pods;
  if (variant.multi_gpu_pct > 0) {
    STOKER_RETURN_IF_ERROR(AppendMultiGpu(out, variant.multi_gpu_pct, seed));
  }
  if (variant.constrain_pct > 0) Constrain(out, cluster, variant.constrain_pct, seed);
  return out;
}

Result<PackingCurve> RunPackingVariant(const ClusterState& cluster,
                                       const std::vector<Request>& pods,
                                       const WorkloadVariant& variant,
                                       std::optional<uint64_t> variant_seed,
                                       const PackingRun& run) {
  if (variant.empty()) {
    return RunPacking(cluster, pods, scheduler::ComputeTypicalShapes(pods, 95), run);
  }
  STOKER_ASSIGN_OR_RETURN(
      std::vector<Request> generated,
      GenerateWorkload(pods, cluster, variant, variant_seed.value_or(run.seed)));
  return RunPacking(cluster, generated, scheduler::ComputeTypicalShapes(generated, 95), run);
}

}  // namespace stoker::sim
