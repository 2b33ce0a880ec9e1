#include "efficiency/sim_idle.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "efficiency/idle_reclaim.h"
#include "scheduler/queue/queue_policy.h"

namespace stoker::efficiency {
namespace {

// splitmix64: a fixed generator so results do not depend on the standard library's
// distributions.
struct Rng {
  uint64_t s;
  uint64_t Next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
};

class NoActions final : public ReclaimActions {
 public:
  Status Warn(const JobInfo&, const std::string&) override { return Status::Ok(); }
  Status Requeue(const JobInfo&, const std::string&) override { return Status::Ok(); }
  Status Cancel(const JobInfo&, const std::string&) override { return Status::Ok(); }
};

Duration Ms(sim::SimMs ms) { return std::chrono::milliseconds(ms); }

TierStats Stats(const sim::JobsSim& simulator, const std::vector<bool>& preemptible, bool want) {
  TierStats t;
  std::vector<double> qd, jct;
  const auto& jobs = simulator.jobs();
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (preemptible[i] != want || jobs[i].state != sim::JobState::kDone) continue;
    ++t.jobs;
    qd.push_back(static_cast<double>(jobs[i].first_start_ms - jobs[i].spec.submit_ms) / 1000.0);
    jct.push_back(static_cast<double>(jobs[i].finish_ms - jobs[i].spec.submit_ms) / 1000.0);
    t.preemptions += jobs[i].preemptions;
    t.lost_gpu_hours += static_cast<double>(jobs[i].lost_gpu_ms) / 3.6e6;
  }
  t.queue_delay_s = sim::SummarisePercentiles(std::move(qd));
  t.jct_s = sim::SummarisePercentiles(std::move(jct));
  return t;
}

}  // namespace

std::vector<bool> DrawPreemptible(const std::vector<sim::SimJobSpec>& jobs,
                                  const PreemptibleModel& m) {
  Rng rng{m.seed};
  std::vector<bool> out;
  out.reserve(jobs.size());
  for (const auto& j : jobs) {
    const double u =
        rng.Uniform();  // drawn for every job, so one job's shape does not shift the rest
    out.push_back(j.gpus == 1 && j.duration_ms <= m.max_duration_ms && u < m.share);
  }
  return out;
}

std::optional<sim::CoLocation> MakeCoLocation(const OversubscriptionPolicy& p) {
  if (p.max_ratio_milli <= 1000) return std::nullopt;
  return sim::CoLocation{static_cast<int32_t>(p.max_ratio_milli),
                         std::chrono::duration_cast<std::chrono::milliseconds>(p.grace).count()};
}

std::vector<IdleProfile> DrawIdleness(const std::vector<sim::SimJobSpec>& jobs,
                                      const IdlenessModel& m) {
  Rng rng{m.seed};
  std::vector<IdleProfile> out;
  out.reserve(jobs.size());
  for (const auto& j : jobs) {
    IdleProfile p;
    const double u = rng.Uniform();
    const double f =
        m.min_idle_fraction + (m.max_idle_fraction - m.min_idle_fraction) * rng.Uniform();
    if (u < m.idle_share) {
      p.idle_ms = static_cast<sim::SimMs>(std::llround(static_cast<double>(j.duration_ms) * f));
    }
    p.busy_ms = j.duration_ms - p.idle_ms;
    out.push_back(p);
  }
  return out;
}

ReclaimDecision DecideReclaim(const IdleProfile& p, int gpus, const IdleReclaimPolicy& policy,
                              Duration sample_every, Duration check_every) {
  ReclaimDecision d;
  d.run_ms = p.busy_ms + p.idle_ms;
  if (p.idle_ms <= 0 || Ms(p.idle_ms) < policy.act_after) return d;  // engine cannot act in time
  StaticJobDirectory dir;
  JobInfo info;
  info.id = "j";
  info.start = WallTime{};
  for (int g = 0; g < gpus; ++g) info.gpus.push_back("g" + std::to_string(g));
  dir.Upsert(info);
  NoActions actions;
  IdleReclaimPolicy pol = policy;
  pol.dry_run = false;
  IdleReclaimer r(pol, dir, actions);
  const WallTime start{};
  const WallTime end = start + Ms(d.run_ms);
  // The busy phase only matters through its last samples (an active sample resets idleness),
  // so start feeding one sample interval before it ends.
  WallTime t = start + std::max(Duration{0}, Ms(p.busy_ms) - sample_every);
  t = start + (t - start) / sample_every * sample_every;
  WallTime next_check = start + ((t - start) / check_every + 1) * check_every;
  for (; t < end; t += sample_every) {
    while (next_check <= t) {
      for (const auto& rec : r.Evaluate(next_check)) {
        if (rec.action == ReclaimAction::kWarn) ++d.warnings;
        if (rec.action == ReclaimAction::kRequeue || rec.action == ReclaimAction::kCancel) {
          d.acted = true;
          d.run_ms =
              std::chrono::duration_cast<std::chrono::milliseconds>(next_check - start).count();
          return d;
        }
      }
      next_check += check_every;
    }
    const int64_t a = t - start < Ms(p.busy_ms) ? 60'000 : 0;
    for (const auto& g : info.gpus) r.Observe("j", g, t, a);
  }
  return d;
}

Result<VariantResult> RunReclaimVariant(const std::vector<sim::SimJobSpec>& jobs,
                                        const std::vector<IdleProfile>& profiles,
                                        const std::vector<bool>& preemptible,
                                        const sim::JobsSimOptions& sim_options,
                                        const EfficiencySimOptions& o, std::string_view name) {
  if (name != "static" && name != "reclaim" && name != "reclaim+oversub") {
    return InvalidArgument("variant: unknown '" + std::string(name) +
                           "' (static, reclaim, reclaim+oversub)");
  }
  VariantResult v;
  v.name = std::string(name);
  const bool reclaim = v.name != "static";
  const bool oversub = v.name == "reclaim+oversub";
  std::vector<sim::SimJobSpec> specs = jobs;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (reclaim) {
      const ReclaimDecision d =
          DecideReclaim(profiles[i], specs[i].gpus, o.policy, o.sample_every, o.check_every);
      if (d.acted) {
        ++v.jobs_reclaimed;
        v.gpu_hours_reclaimed +=
            static_cast<double>(specs[i].duration_ms - d.run_ms) * specs[i].gpus / 3.6e6;
        specs[i].duration_ms = d.run_ms;
      }
    }
    if (oversub) {
      // What co-location needs: the tier, how busy the job keeps its GPUs, and its idle tail
      // (what is left of it after reclaim).
      specs[i].preemptible = preemptible[i];
      specs[i].gpu_util = static_cast<double>(o.idleness.busy_activity_milli) / 100'000.0;
      specs[i].idle_tail_ms = std::max<sim::SimMs>(0, specs[i].duration_ms - profiles[i].busy_ms);
    }
  }
  sim::JobsSimOptions run_options = sim_options;
  if (oversub) {
    run_options.colocation = MakeCoLocation(o.oversub);
    if (run_options.colocation) run_options.colocation->shared_speed = o.shared_speed;
  }
  STOKER_ASSIGN_OR_RETURN(auto policy, queue::CreateQueuePolicy(o.queue_policy));
  STOKER_ASSIGN_OR_RETURN(auto simulator,
                          sim::JobsSim::Create(std::move(specs), std::move(policy), run_options));
  STOKER_ASSIGN_OR_RETURN(v.report, simulator->Run());
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (simulator->jobs()[i].state != sim::JobState::kDone) continue;  // infeasible: never ran
    v.busy_gpu_hours += static_cast<double>(profiles[i].busy_ms) * jobs[i].gpus / 3.6e6;
  }
  const double capacity_h =
      static_cast<double>(sim_options.cluster.total_gpus()) * v.report.makespan_s / 3600.0;
  v.used_gpu_utilization_pct = capacity_h > 0 ? 100.0 * v.busy_gpu_hours / capacity_h : 0;
  v.guaranteed = Stats(*simulator, preemptible, false);
  v.preemptible = Stats(*simulator, preemptible, true);
  return v;
}

Result<std::vector<VariantResult>> CompareReclaim(const std::vector<sim::SimJobSpec>& jobs,
                                                  const sim::JobsSimOptions& sim_options,
                                                  const EfficiencySimOptions& o) {
  STOKER_RETURN_IF_ERROR(ValidateOversubscription(o.oversub));
  const std::vector<IdleProfile> profiles = DrawIdleness(jobs, o.idleness);
  const std::vector<bool> preemptible = DrawPreemptible(jobs, o.preemptible);
  std::vector<VariantResult> out;
  for (const char* name : kReclaimVariants) {
    STOKER_ASSIGN_OR_RETURN(VariantResult v,
                            RunReclaimVariant(jobs, profiles, preemptible, sim_options, o, name));
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace stoker::efficiency
