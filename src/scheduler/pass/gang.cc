#include "scheduler/pass/gang.h"

#include "scheduler/gang.h"

namespace stoker::pass {

std::vector<scheduler::Request> GangRequests(const JobView& j, const scheduler::Request& part,
                                             const scheduler::ClusterState& cluster,
                                             std::string* why) {
  std::vector<scheduler::Request> parts;
  scheduler::Request r = part;
  r.gpu_milli = r.num_gpu > 0 ? scheduler::kMilliPerGpu : 0;
  r.mig = scheduler::MigProfile::kNone;
  if (j.total_gpus > 0) {
    const int32_t per_node = scheduler::LargestGangPart(cluster, r);
    if (per_node == 0) {
      *why = "no node could ever host a part of this gang (CPU " + std::to_string(r.cpu_milli) +
             "m, memory " + std::to_string(r.memory_mib) + " MiB and one GPU, model constraint)";
      return parts;
    }
    for (int32_t gpus : scheduler::SplitGang(j.total_gpus, per_node)) {
      r.num_gpu = gpus;
      r.gpu_milli = scheduler::kMilliPerGpu;
      parts.push_back(r);
    }
    return parts;
  }
  parts.assign(static_cast<size_t>(j.nodes), r);
  return parts;
}

int64_t TotalGpus(const JobView& j) {
  if (j.total_gpus > 0) return j.total_gpus;
  if (j.nodes > 0) return int64_t{j.nodes} * j.gpus;
  return j.gpus;
}

}  // namespace stoker::pass
