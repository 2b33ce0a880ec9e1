// The scheduling pass against its reference (reference_pass.h: the pass before the preemption
// planner was rewritten) on random clusters and queues: every decision must be the same, action
// by action, reason by reason. The scenarios are what makes the planner work hard: many
// preemptible jobs of several priorities on full GPUs, oversubscription beyond capacity, jobs
// already being stopped, MIG instances beside plain GPUs, drained and lost nodes, and several
// passes in a row with the same pass object (the policies keep their indexes between passes,
// as in the server).

#include "reference_pass.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <sstream>

#include "scheduler/pass/pass.h"
#include "scheduler/registry.h"
#include "scheduler/rng.h"

namespace stoker::pass {
namespace {

// The scheduler's seeded generator: the same sequence everywhere.
class Rand {
 public:
  explicit Rand(uint64_t seed) : rng_(seed) {}
  int Below(int n) { return static_cast<int>(rng_.Uniform(static_cast<uint64_t>(n))); }
  bool Chance(int percent) { return Below(100) < percent; }

 private:
  scheduler::Rng rng_;
};

struct GpuUse {
  int32_t guaranteed = 0;
  int32_t total = 0;
  std::vector<bool> mig_used;
};

// A random queued job: CPU only, a share, a MIG instance, whole GPUs (some elastic), with
// priorities, model constraints and the preemptible flag.
JobView RandomJob(Rand& r, int64_t id, int64_t now) {
  JobView j;
  j.id = id;
  j.phase = JobPhase::kQueued;
  j.cpu_milli = 500 * (1 + r.Below(8));
  j.memory_mib = 1024 * (1 + r.Below(16));
  j.preemptible = r.Chance(45);
  j.priority = r.Below(3);
  j.submit_ms = now - r.Below(1000);
  switch (r.Below(10)) {
    case 0:
      break;
    case 1:
    case 2:
      j.gpu_milli = 100 * (1 + r.Below(9));
      break;
    case 3:
      j.mig = "2g.20gb";
      break;
    case 4:
      j.gpus = 4;
      j.min_gpus = 2;
      break;
    default:
      j.gpus = 1 << r.Below(4);
  }
  if (j.gpus == 1 && r.Chance(10)) j.consolidate_milli = 500;
  if (r.Chance(8)) j.gpu_models = {r.Chance(50) ? "h100" : "a100"};
  if (r.Chance(3)) j.gpu_models = {"V100"};
  return j;
}

class World {
 public:
  World(uint64_t seed, int32_t ratio) : rand_(seed), ratio_(ratio) {
    const int nodes = 3 + rand_.Below(30);
    for (int n = 0; n < nodes; ++n) {
      NodeView v;
      v.name = "node" + std::to_string(n);
      v.cpu_milli = 16000 * (1 + rand_.Below(4));
      v.memory_mib = 65536 * (1 + rand_.Below(4));
      const int plain = rand_.Chance(15) ? 0 : 2 + rand_.Below(7);
      const int mig = rand_.Chance(20) ? 1 + rand_.Below(2) : 0;
      const std::string model = rand_.Chance(50) ? "NVIDIA H100 80GB" : "NVIDIA A100-SXM4-80GB";
      for (int i = 0; i < plain + mig; ++i) {
        GpuView g{static_cast<uint32_t>(i), model, 81920, i >= plain, {}};
        if (g.mig_enabled) {
          for (int k = 0; k < 3; ++k) {
            g.mig.push_back(
                MigInstance{v.name + "-" + std::to_string(i) + "-mig" + std::to_string(k), 2});
          }
        }
        v.gpus.push_back(g);
      }
      v.drained = rand_.Chance(5);
      v.lost = !v.drained && rand_.Chance(5);
      nodes_.push_back(v);
    }
    // Active work: guaranteed first (within one GPU each), then preemptible up to the ratio.
    for (int pass = 0; pass < 2; ++pass) {
      for (const NodeView& n : nodes_) {
        const int tries = static_cast<int>(n.gpus.size()) * 2;
        for (int t = 0; t < tries; ++t) {
          JobView j = RandomJob(rand_, next_id_++, now_);
          j.preemptible = pass == 1;
          if (PlaceActive(j, n)) active_.emplace(j.id, j);
        }
      }
    }
    for (int i = 0; i < 10 + rand_.Below(60); ++i) AddQueued();
  }

  PassInput Input() const {
    PassInput in;
    in.nodes = nodes_;
    for (const auto& [id, j] : active_) in.active.push_back(j);
    for (const auto& [id, j] : queued_) in.queued.push_back(j);
    return in;
  }

  // Applies a decision, then moves time on: assigned jobs start, stopping jobs end and requeue,
  // some jobs finish, some arrive.
  void Apply(const Decision& d) {
    now_ += 1000;
    for (const Action& a : d.actions) {
      if (a.kind == Action::Kind::kAssign) {
        auto it = queued_.find(a.job);
        if (it == queued_.end()) continue;
        JobView j = it->second;
        queued_.erase(it);
        j.phase = JobPhase::kAssigned;
        j.placement = a.assignment.placement;
        j.start_ms = now_ + rand_.Below(100);
        active_.emplace(j.id, j);
      } else {
        auto it = active_.find(a.job);
        if (it == active_.end()) continue;
        if (a.running) {
          it->second.phase = JobPhase::kCancelling;
          it->second.preempted_by = a.for_job;
        } else {
          Requeue(it);
        }
      }
    }
    for (auto it = active_.begin(); it != active_.end();) {
      JobView& j = it->second;
      if (j.phase == JobPhase::kCancelling && rand_.Chance(50)) {
        it = j.preempted_by != 0 ? Requeue(it) : active_.erase(it);
      } else if (j.phase == JobPhase::kRunning && rand_.Chance(10)) {
        it = active_.erase(it);
      } else {
        if (j.phase == JobPhase::kAssigned) j.phase = JobPhase::kRunning;
        ++it;
      }
    }
    for (int i = rand_.Below(8); i > 0; --i) AddQueued();
  }

 private:
  void AddQueued() {
    JobView j = RandomJob(rand_, next_id_++, now_);
    queued_.emplace(j.id, j);
  }

  std::map<int64_t, JobView>::iterator Requeue(std::map<int64_t, JobView>::iterator it) {
    JobView j = it->second;
    j.phase = JobPhase::kQueued;
    j.placement.reset();
    j.preempted_by = 0;
    j.start_ms = 0;
    queued_.emplace(j.id, j);
    return active_.erase(it);
  }

  // Puts `j` on `n` as it could have been placed before (CPU and memory within the node,
  // guaranteed work within one GPU, everything within the ratio), as running, assigned or (some
  // preemptible ones) already being stopped.
  bool PlaceActive(JobView& j, const NodeView& n) {
    auto& use = use_[n.name];
    use.resize(n.gpus.size());
    int64_t& cpu = cpu_[n.name];
    int64_t& mem = mem_[n.name];
    if (cpu + j.cpu_milli > n.cpu_milli || mem + j.memory_mib > n.memory_mib) return false;
    JobPlacement p;
    p.node = n.name;
    const int32_t cap = j.preemptible ? ratio_ : 1000;
    auto room = [&](size_t g, int32_t milli) {
      if (n.gpus[g].mig_enabled) return false;
      const GpuUse& u = use[g];
      return (j.preemptible || u.guaranteed + milli <= 1000) && u.total + milli <= cap;
    };
    if (!j.mig.empty()) {
      for (size_t g = 0; g < n.gpus.size() && p.mig_uuid.empty(); ++g) {
        if (!n.gpus[g].mig_enabled) continue;
        use[g].mig_used.resize(n.gpus[g].mig.size());
        for (size_t k = 0; k < n.gpus[g].mig.size(); ++k) {
          if (use[g].mig_used[k]) continue;
          use[g].mig_used[k] = true;
          p.mig_uuid = n.gpus[g].mig[k].uuid;
          p.mig_slices = 2;
          p.shares.emplace_back(static_cast<uint8_t>(g), 0);
          break;
        }
      }
      if (p.mig_uuid.empty()) return false;
    } else if (j.gpus > 0 || j.gpu_milli > 0) {
      const int count = j.gpus > 0 ? j.gpus : 1;
      const int32_t milli = j.gpus == 1 && j.consolidate_milli > 0 ? j.consolidate_milli
                            : j.gpus > 0                           ? 1000
                                                                   : j.gpu_milli;
      std::vector<size_t> picked;
      for (size_t g = 0; g < n.gpus.size() && static_cast<int>(picked.size()) < count; ++g) {
        if (room(g, milli)) picked.push_back(g);
      }
      if (static_cast<int>(picked.size()) < count) return false;
      for (size_t g : picked) {
        p.shares.emplace_back(static_cast<uint8_t>(g), milli);
        use[g].total += milli;
        if (!j.preemptible) use[g].guaranteed += milli;
      }
    }
    cpu += j.cpu_milli;
    mem += j.memory_mib;
    j.placement = p;
    j.start_ms = now_ - rand_.Below(100000);
    j.phase = rand_.Chance(85) ? JobPhase::kRunning : JobPhase::kAssigned;
    if (j.preemptible && j.phase == JobPhase::kRunning && rand_.Chance(8)) {
      j.phase = JobPhase::kCancelling;
      j.preempted_by = 1;
    }
    return true;
  }

  Rand rand_;
  int32_t ratio_;
  int64_t now_ = 10'000'000;
  int64_t next_id_ = 100;
  std::vector<NodeView> nodes_;
  std::map<int64_t, JobView> active_;
  std::map<int64_t, JobView> queued_;
  std::map<std::string, std::vector<GpuUse>> use_;
  std::map<std::string, int64_t> cpu_, mem_;
};

// Everything a decision says, as text (not the time it took).
std::string Describe(const Decision& d) {
  std::ostringstream o;
  for (const Action& a : d.actions) {
    if (a.kind == Action::Kind::kStop) {
      o << "stop " << a.job << " for " << a.for_job << (a.running ? " running" : "") << "\n";
      continue;
    }
    const Grant& x = a.assignment;
    o << "assign " << a.job << " " << x.placement.node << " mig=" << x.placement.mig_uuid << "/"
      << int{x.placement.mig_slices} << " cvd=" << x.cuda_visible_devices
      << " milli=" << x.gpu_milli << (x.oversubscribed ? " over" : "") << " shares:";
    for (const auto& [pos, milli] : x.placement.shares) o << " " << int{pos} << ":" << milli;
    for (const auto& [k, v] : x.env) o << " " << k << "=" << v;
    o << "\n";
  }
  for (const auto& [id, why] : d.reasons) o << "wait " << id << ": " << why << "\n";
  for (const std::string& w : d.warnings) o << "warning " << w << "\n";
  const PassStats& s = d.stats;
  o << "stats " << s.queued << " " << s.placed << " " << s.blocked << " " << s.infeasible << " "
    << s.preempting << " " << s.oversubscribed << " " << s.preempted << "\n";
  return o.str();
}

struct Setting {
  std::string policy;
  int32_t ratio;
  std::string queue;
  bool backfill;
};

class ReferencePass : public ::testing::TestWithParam<Setting> {};

TEST_P(ReferencePass, SameDecisionsAsBeforeThePlannerRewrite) {
  const Setting& s = GetParam();
  int preempted = 0;
  int oversubscribed = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    World world(seed * 7919 + static_cast<uint64_t>(s.ratio), s.ratio);
    auto make = [&] {
      return scheduler::CreatePlacementPolicy(s.policy, scheduler::PolicyConfig{}).value();
    };
    SchedulingPass pass(make());
    auto ref_policy = make();
    std::unique_ptr<scheduler::PlacementPolicy> ref_be;
    auto queue = queue::CreateQueuePolicy(s.queue).value();
    const PassOptions options{s.policy, s.backfill, s.ratio};
    for (int round = 0; round < 8; ++round) {
      const PassInput in = world.Input();
      const Decision want = reference::RunReferencePass(*ref_policy, ref_be, in, *queue, options);
      const Decision got = pass.Run(in, *queue, options);
      ASSERT_EQ(Describe(got), Describe(want)) << "seed " << seed << ", pass " << round;
      preempted += want.stats.preempted;
      oversubscribed += want.stats.oversubscribed;
      world.Apply(got);
    }
  }
  // The scenarios must reach the planner and the admission, or the comparison proves little.
  EXPECT_GT(preempted, s.backfill ? 20 : 5);
  if (s.ratio > 1000) {
    EXPECT_GT(oversubscribed, s.backfill ? 5 : 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Settings, ReferencePass,
                         ::testing::Values(Setting{"stoker", 1000, "fifo", true},
                                           Setting{"stoker", 1500, "fifo", true},
                                           Setting{"bestfit", 1300, "fifo", true},
                                           Setting{"weighted", 1500, "fifo", false},
                                           Setting{"random", 1500, "priority", true},
                                           Setting{"fgd", 1200, "sjf", true}),
                         [](const ::testing::TestParamInfo<Setting>& info) {
                           return info.param.policy + "_" + std::to_string(info.param.ratio) + "_" +
                                  info.param.queue + (info.param.backfill ? "" : "_strict");
                         });

}  // namespace
}  // namespace stoker::pass
