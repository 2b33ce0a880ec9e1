#include "efficiency/oversub.h"

#include <algorithm>
#include <optional>

namespace stoker::efficiency {

int64_t CommittedMilli(const GpuLoad& g, std::optional<Tier> tier) {
  int64_t sum = 0;
  for (const auto& s : g.shares) {
    if (!tier || s.tier == *tier) sum += s.milli;
  }
  return sum;
}

bool AdmitPreemptible(const OversubscriptionPolicy& p, const GpuLoad& g, int64_t milli) {
  if (!g.healthy || milli <= 0) return false;
  if (g.reclaimed && !p.use_reclaimed_capacity) return false;
  return CommittedMilli(g) + milli <= p.max_ratio_milli;
}

PreemptionPlan PlanPreemption(const OversubscriptionPolicy& p, const std::vector<GpuLoad>& gpus,
                              int needed_gpus, int64_t milli, WallTime now) {
  struct Option {
    const GpuLoad* gpu;
    std::vector<const GpuShare*> victims;
    WallTime youngest{};
  };
  std::vector<Option> options;
  for (const auto& g : gpus) {
    if (!g.healthy) continue;
    const int64_t guaranteed = CommittedMilli(g, Tier::kGuaranteed);
    if (guaranteed + milli > 1000) continue;
    // Preemptible shares, youngest first; evict until the guaranteed job fits within 1000
    // counting what remains (oversubscription never squeezes guaranteed work).
    std::vector<const GpuShare*> pre;
    for (const auto& s : g.shares) {
      if (s.tier == Tier::kPreemptible) pre.push_back(&s);
    }
    std::sort(pre.begin(), pre.end(), [](const GpuShare* a, const GpuShare* b) {
      return a->started != b->started ? a->started > b->started : a->job < b->job;
    });
    Option o{&g, {}, WallTime{}};
    int64_t total = guaranteed + CommittedMilli(g, Tier::kPreemptible);
    for (const GpuShare* s : pre) {
      if (total + milli <= 1000) break;
      o.victims.push_back(s);
      total -= s->milli;
    }
    for (const GpuShare* v : o.victims) o.youngest = std::max(o.youngest, v->started);
    options.push_back(std::move(o));
  }
  PreemptionPlan plan;
  if (static_cast<int>(options.size()) < needed_gpus) {
    plan.reason = "only " + std::to_string(options.size()) + " GPUs can take the job";
    return plan;
  }
  std::sort(options.begin(), options.end(), [](const Option& a, const Option& b) {
    if (a.victims.size() != b.victims.size()) return a.victims.size() < b.victims.size();
    if (a.youngest != b.youngest) return a.youngest > b.youngest;
    return a.gpu->gpu < b.gpu->gpu;
  });
  plan.feasible = true;
  for (int i = 0; i < needed_gpus; ++i) {
    plan.gpus.push_back(options[i].gpu->gpu);
    for (const GpuShare* v : options[i].victims) {
      plan.victims.push_back({v->job, options[i].gpu->gpu, now + p.grace});
    }
  }
  plan.reason = plan.victims.empty()
                    ? "fits without preemption"
                    : std::to_string(plan.victims.size()) + " preemptible job(s) preempted";
  return plan;
}

}  // namespace stoker::efficiency
