#include "efficiency/sizing.h"

#include <algorithm>
#include <map>

namespace stoker::efficiency {

Result<std::vector<SizedVariant>> SizeCluster(const std::vector<sim::SimJobSpec>& jobs,
                                              const SizingOptions& o) {
  if (!(o.targets.max_mean_s > 0) || !(o.targets.max_p99_s > 0)) {
    return InvalidArgument("queueing targets: must be positive");
  }
  const int gpn = o.base.cluster.gpus_per_node;
  if (gpn <= 0) return InvalidArgument("GPUs per node: must be positive");
  if (o.max_nodes <= 0) return InvalidArgument("largest cluster: must be positive");
  STOKER_RETURN_IF_ERROR(ValidateOversubscription(o.sim.oversub));
  for (const std::string& v : o.variants) {
    if (std::find(std::begin(kReclaimVariants), std::end(kReclaimVariants), v) ==
        std::end(kReclaimVariants)) {
      return InvalidArgument("variant: unknown '" + v + "' (static, reclaim, reclaim+oversub)");
    }
  }
  if (jobs.empty()) return InvalidArgument("the trace has no jobs");
  int64_t widest = 0;
  for (const sim::SimJobSpec& j : jobs) widest = std::max<int64_t>(widest, j.min_gpus);
  const int32_t smallest = static_cast<int32_t>(std::max<int64_t>(1, (widest + gpn - 1) / gpn));
  if (smallest > o.max_nodes) {
    return InvalidArgument("the widest job (" + std::to_string(widest) +
                           " GPUs) needs more than the largest cluster allowed");
  }
  const std::vector<IdleProfile> profiles = DrawIdleness(jobs, o.sim.idleness);
  const std::vector<bool> preemptible = DrawPreemptible(jobs, o.sim.preemptible);
  std::vector<SizedVariant> out;
  int done = 0;
  for (const std::string& name : o.variants) {
    SizedVariant sized;
    sized.name = name;
    std::map<int32_t, VariantResult> runs;
    auto probe = [&](int32_t nodes) -> Result<bool> {
      sim::JobsSimOptions opt = o.base;
      opt.cluster.nodes = nodes;
      STOKER_ASSIGN_OR_RETURN(VariantResult r,
                              RunReclaimVariant(jobs, profiles, preemptible, opt, o.sim, name));
      SizingProbe p{name,
                    nodes,
                    o.targets.Met(r.report),
                    r.report.queue_delay_s.mean,
                    r.report.queue_delay_s.p99,
                    ++done};
      sized.probes.push_back(p);
      if (o.on_probe) o.on_probe(p);
      runs.emplace(nodes, std::move(r));
      return p.met;
    };
    // Double from the smallest cluster the widest job fits, then bisect (missed, met].
    int32_t missed = smallest - 1, met = -1;
    for (int32_t n = smallest;;
         n = static_cast<int32_t>(std::min<int64_t>(int64_t{n} * 2, o.max_nodes))) {
      STOKER_ASSIGN_OR_RETURN(const bool ok, probe(n));
      if (ok) {
        met = n;
        break;
      }
      missed = n;
      if (n >= o.max_nodes) break;
    }
    if (met > 0) {
      while (met - missed > 1) {
        const int32_t mid = missed + (met - missed) / 2;
        STOKER_ASSIGN_OR_RETURN(const bool ok, probe(mid));
        (ok ? met : missed) = mid;
      }
      sized.nodes = met;
      sized.result = std::move(runs.at(met));
    } else {
      sized.result = std::move(runs.at(missed));
    }
    out.push_back(std::move(sized));
  }
  return out;
}

}  // namespace stoker::efficiency
