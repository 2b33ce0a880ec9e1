#include "scheduler/pass/pass.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <deque>
#include <functional>
#include <limits>
#include <set>
#include <string_view>
#include <unordered_map>

#include "core/huge_pages.h"
#include "scheduler/fgd.h"
#include "scheduler/gang.h"
#include "scheduler/pass/gang.h"
#include "scheduler/pass/gpu_commitments.h"
#include "scheduler/queue/job_queue.h"
#include "scheduler/registry.h"

namespace stoker::pass {
namespace {

bool ContainsNoCase(std::string_view hay, std::string_view needle) {
  auto it = std::search(hay.begin(), hay.end(), needle.begin(), needle.end(),
                        [](char a, char b) { return std::tolower(a) == std::tolower(b); });
  return it != hay.end();
}

// Whether any part of active job `j` runs on `node`.
bool OnNode(const JobView& j, const std::string& node) {
  if (j.placement && j.placement->node == node) return true;
  for (const JobPlacement& p : j.gang) {
    if (p.node == node) return true;
  }
  return false;
}

std::string JoinIndices(const std::vector<uint32_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(v[i]);
  }
  return s;
}

}  // namespace

scheduler::Request RequestFor(const JobView& j) {
  scheduler::Request r;
  r.cpu_milli = j.cpu_milli;
  r.memory_mib = j.memory_mib;
  r.gpu_memory_mib = j.gpu_memory_mib;
  r.job_class = j.job_class;
  if (j.gpus == 1 && j.consolidate_milli > 0) {
    r.num_gpu = 1;
    r.gpu_milli = j.consolidate_milli;
  } else if (j.gpus > 0) {
    r.num_gpu = j.gpus;
    r.gpu_milli = scheduler::kMilliPerGpu;
  } else if (j.gpu_milli > 0) {
    r.num_gpu = 1;
    r.gpu_milli = j.gpu_milli;
  } else if (!j.mig.empty()) {
    r.num_gpu = 1;
    auto mig = scheduler::ParseMigProfile(j.mig);
    r.mig = mig.ok() ? *mig : scheduler::MigProfile::kNone;
  }
  return r;
}

namespace {

// The jobs as the pass sees them, by id (the first of an id wins, active jobs before queued
// ones): the input's own views, read in place, and a copy of each view the pass changes (a
// victim being stopped), made when it first changes it; the input stays as the caller gave it.
// Copying every view up front cost a 100,000-job pass 100,000 copies and a third of its fresh
// memory.
class JobTable {
 public:
  explicit JobTable(const PassInput& in) {
    views_.reserve(in.active.size() + in.queued.size());
    index_.reserve(in.active.size() + in.queued.size());
    for (const auto* list : {&in.active, &in.queued}) {
      for (const JobView& j : *list) {
        if (index_.emplace(j.id, views_.size()).second) views_.push_back(&j);
      }
    }
    own_.assign(views_.size(), nullptr);
  }
  const JobView& at(int64_t id) const {
    const size_t i = index_.at(id);
    return own_[i] != nullptr ? *own_[i] : *views_[i];
  }
  // The input's view of job `id` (its first, for a job listed twice), changed or not: what an
  // action names (Action::view).
  const JobView* input(int64_t id) const { return views_[index_.at(id)]; }
  // The view of job `id` to change. A reference taken from at() before the first change still
  // refers to the input's view.
  JobView& mut(int64_t id) {
    const size_t i = index_.at(id);
    if (own_[i] == nullptr) own_[i] = &copies_.emplace_back(*views_[i]);
    return *own_[i];
  }

 private:
  std::vector<const JobView*> views_;  // the input's view
  std::vector<JobView*> own_;          // its copy, once changed
  std::deque<JobView> copies_;         // stable addresses
  std::unordered_map<int64_t, size_t> index_;
};

Fragmentation Measure(const scheduler::ClusterState& cluster, const std::vector<int64_t>& active,
                      const std::vector<JobView>& queued, const JobTable& jobs) {
  // The workload's typical shapes, FGD's way, from the jobs running and waiting now: the
  // shapes that cover 95 % of them. GPU-model constraints are left out of the measure.
  std::vector<scheduler::Request> seen;
  seen.reserve(active.size() + queued.size());
  AdviseHugePagesFor(seen);
  auto add = [&](const JobView& j) {
    scheduler::Request r = RequestFor(j);
    if (r.IsMig()) {  // a MIG instance as its share of a GPU (the measure counts milli-GPU)
      r.gpu_milli = scheduler::MigSlicesToMilli(scheduler::MigSlices(r.mig));
      r.mig = scheduler::MigProfile::kNone;
    }
    if (!IsGang(j)) {
      seen.push_back(r);
    } else if (!j.gang.empty()) {  // a placed gang: each part as it holds its GPUs
      for (const JobPlacement& part : j.gang) {
        r.num_gpu = static_cast<int32_t>(part.shares.size());
        r.gpu_milli = r.num_gpu > 0 ? scheduler::kMilliPerGpu : 0;
        seen.push_back(r);
      }
    } else {  // a queued gang: each part it asks for now
      std::string why;
      for (const scheduler::Request& part : GangRequests(j, r, cluster, &why)) {
        seen.push_back(part);
      }
    }
  };
  for (int64_t id : active) add(jobs.at(id));
  for (const JobView& j : queued) add(j);
  Fragmentation f;
  f.total_gpu_milli = cluster.total_gpu_milli();
  f.free_gpu_milli = cluster.total_gpu_milli() - cluster.allocated_gpu_milli();
  f.typical_shapes = 0;
  if (!seen.empty()) {
    const scheduler::TypicalShapes typical = scheduler::ComputeTypicalShapes(seen);
    f.typical_shapes = static_cast<int>(typical.shapes.size());
    f.fragmented_gpu_milli = scheduler::ClusterFrag(cluster, scheduler::FragModel(typical));
  }
  return f;
}

}  // namespace

namespace {

// Whether a whole-GPU gang of `gpus` could be placed on `state` right now: full nodes for every
// complete node's worth, plus one more node for the remainder. On a homogeneous cluster with
// whole-GPU requests this is exactly when any placement policy finds a placement, so what-if
// checks on a copy of the cluster need no policy (whose per-node caches belong to the live one).
bool GangFits(const scheduler::ClusterState& state, int gpus, int per_node) {
  const int full = gpus / per_node;
  const int rem = gpus % per_node;
  int full_free = 0;
  bool rem_elsewhere = false;
  for (int32_t n = 0; n < state.num_nodes(); ++n) {
    const int free = state.node(n).full_free_gpus;
    if (free == per_node) {
      ++full_free;
    } else if (rem > 0 && free >= rem) {
      rem_elsewhere = true;
    }
  }
  if (full_free < full) return false;
  if (rem == 0) return true;
  return rem_elsewhere || full_free > full;
}

int64_t CeilDiv(int64_t a, int64_t b) { return a <= 0 ? 0 : (a + b - 1) / b; }

}  // namespace

Decision SchedulingPass::RunKept(const KeptCluster& k) {
  Decision decision;
  scheduler::ClusterState& cluster = *k.cluster;
  const int32_t per_node = k.gpus_per_node;
  auto free_gpus = [&] {
    return int64_t{cluster.total_gpus()} - cluster.allocated_gpu_milli() / scheduler::kMilliPerGpu;
  };
  // Places `j` at `g` GPUs as a gang; `*placed` empty when there is no room now.
  auto place = [&](const JobView& j, int32_t g, bool* infeasible,
                   std::vector<scheduler::Placement>* placed) -> Status {
    std::vector<scheduler::Request> parts;
    for (int32_t part : scheduler::SplitGang(g, per_node)) {
      parts.push_back(scheduler::Request::WholeGpus(part, 0, 0));
    }
    auto gp = scheduler::PlaceGang(*placement_, cluster, parts);
    if (!gp.ok()) return gp.status().WithContext("job " + std::to_string(j.id));
    if (gp->status == scheduler::PlacementStatus::kInfeasible) *infeasible = true;
    if (gp->status == scheduler::PlacementStatus::kPlaced) *placed = std::move(gp->parts);
    return Status::Ok();
  };
  auto assign = [&](const JobView& j, std::vector<scheduler::Placement> placed, int32_t g) {
    Action act;
    act.kind = Action::Kind::kAssign;
    act.job = j.id;
    act.view = &j;
    act.placed = std::move(placed);
    act.gpus = g;
    decision.actions.push_back(std::move(act));
    ++decision.stats.placed;
  };
  auto infeasible_job = [&](const JobView& j) {
    Action act;
    act.kind = Action::Kind::kInfeasible;
    act.job = j.id;
    act.view = &j;
    decision.actions.push_back(std::move(act));
    ++decision.stats.infeasible;
  };
  // Walks the queue (or the given order) with `step(id)`; false from it stops the walk.
  auto walk = [&](auto&& step) {
    if (k.queue) {
      for (const auto& entry : *k.queue) {
        if (!step(static_cast<int64_t>(entry.key.id))) return;
      }
    } else {
      for (int64_t id : k.order) {
        if (!step(id)) return;
      }
    }
  };

  if (k.blocked != Blocked::kBackfill) {
    // Nothing is released during the walk, so once a gang of g GPUs failed to place, any gang
    // of at least g GPUs fails too: those are skipped without asking the placement policy.
    int32_t failed_from = std::numeric_limits<int32_t>::max();
    walk([&](int64_t id) {
      const JobView& j = k.jobs[static_cast<size_t>(id)];
      const int64_t free = free_gpus();
      if (free <= 0) return false;
      bool infeasible = false;
      bool started = false;
      if (j.min_gpus <= free && j.min_gpus < failed_from) {
        // Elastic jobs take as many GPUs as are free, down to their minimum.
        for (int32_t g = static_cast<int32_t>(std::min<int64_t>(j.gpus, free));
             g >= j.min_gpus && !started && !infeasible; --g) {
          std::vector<scheduler::Placement> placed;
          decision.status = place(j, g, &infeasible, &placed);
          if (!decision.status.ok()) return false;
          if (infeasible) break;
          if (!placed.empty()) {
            assign(j, std::move(placed), g);
            started = true;
          }
        }
        if (!started && !infeasible) failed_from = j.min_gpus;
      }
      if (infeasible) {
        infeasible_job(j);
        return true;
      }
      if (started || k.blocked == Blocked::kSkip) return true;
      ++decision.stats.blocked;
      decision.blocked = id;
      return false;
    });
    return decision;
  }

  // Backfill (EASY). The reservation: release running jobs in the order they will end until the
  // head fits.
  const int32_t head_gpus = k.jobs[static_cast<size_t>(k.head)].min_gpus;
  std::vector<RunningEnd> ends = k.running;
  std::sort(ends.begin(), ends.end(), [](const RunningEnd& a, const RunningEnd& b) {
    return a.end_ms != b.end_ms ? a.end_ms < b.end_ms : a.id < b.id;
  });
  scheduler::ClusterState shadow = cluster;
  for (size_t i = 0; i < ends.size();) {
    const int64_t t = ends[i].end_ms;
    for (; i < ends.size() && ends[i].end_ms == t; ++i) {
      for (const scheduler::Placement& p : *ends[i].placements) {
        decision.status = shadow.Release(p);
        if (!decision.status.ok()) return decision;
      }
    }
    if (GangFits(shadow, head_gpus, per_node)) {
      decision.reserved_at_ms = t;
      break;
    }
  }
  if (!decision.reserved_at_ms) return decision;  // cannot happen for a feasible head
  const int64_t reserve_at = *decision.reserved_at_ms;
  // A job may start now if it ends by the reservation, or if the head still fits at the
  // reservation with the job's GPUs taken (checked on the shadow cluster).
  int32_t reject_from = std::numeric_limits<int32_t>::max();  // smallest long job that delayed it
  walk([&](int64_t id) {
    if (id == k.head) return true;
    const int64_t free = free_gpus();
    if (free <= 0) return false;
    const JobView& c = k.jobs[static_cast<size_t>(id)];
    const int32_t g = c.gpus;  // backfill rigidly at the full size
    if (g > free) return true;
    const bool long_job = k.now_ms + CeilDiv(c.work_gpu_ms, g) > reserve_at;
    if (long_job && g >= reject_from) return true;
    bool infeasible = false;
    std::vector<scheduler::Placement> placed;
    decision.status = place(c, g, &infeasible, &placed);
    if (!decision.status.ok()) return false;
    if (infeasible) {
      infeasible_job(c);
      return true;
    }
    if (placed.empty()) return true;
    if (long_job) {
      for (const scheduler::Placement& p : placed) {
        decision.status = shadow.Allocate(p);
        if (!decision.status.ok()) return false;
      }
      if (!GangFits(shadow, head_gpus, per_node)) {
        for (const scheduler::Placement& p : placed) {
          decision.status = shadow.Release(p);
          if (!decision.status.ok()) return false;
        }
        for (const scheduler::Placement& p : placed) {
          decision.status = cluster.Release(p);
          if (!decision.status.ok()) return false;
        }
        reject_from = std::min(reject_from, g);
        return true;
      }
    }
    assign(c, std::move(placed), g);
    return true;
  });
  return decision;
}

Decision SchedulingPass::Run(const PassInput& in, const queue::QueuePolicy& queue_policy,
                             const PassOptions& options, const ActionSink& sink) {
  if (in.kept) return RunKept(*in.kept);
  const auto t0 = std::chrono::steady_clock::now();
  Decision decision;
  PassStats& stats = decision.stats;
  stats.queued = static_cast<int>(in.queued.size());
  if (in.queued.empty() && !in.sample_fragmentation) return decision;
  // At most one action per queued job, plus the preemptions (rare): no reallocation midway,
  // which would move every action taken so far.
  decision.actions = std::move(spare_actions_);  // empty (Recycle), with its storage
  decision.actions.reserve(in.queued.size());
  AdviseHugePagesFor(decision.actions);
  // Every action taken goes through here: into the decision, and to the sink each time it has
  // `every` new ones.
  auto take = [&](Action&& act) {
    decision.actions.push_back(std::move(act));
    if (sink.every > 0 && sink.take && decision.actions.size() - decision.handed >= sink.every) {
      sink.take(std::span<Action>(decision.actions).subspan(decision.handed));
      decision.handed = decision.actions.size();
    }
  };

  // The jobs as the pass changes them (a victim stopping, a job placed), by id.
  JobTable jobs(in);

  // The cluster as the scheduler library sees it: schedulable nodes, minus what active jobs
  // hold. The library models a node's GPUs as one homogeneous group (all MIG or none), so a node
  // with both kinds becomes two scheduler nodes, one per kind, sharing CPU and memory: every
  // allocation of CPU/memory is applied to both (see allocate_on).
  scheduler::ClusterState cluster;
  struct VNode {
    const NodeView* node;
    std::vector<uint8_t> positions;  // scheduler GPU i -> position in node->gpus
  };
  std::vector<VNode> vnodes;
  // A node's scheduler nodes (one per kind of GPU: at most two), by the node's name, which
  // in.nodes holds for the whole pass.
  struct Siblings {
    std::array<int32_t, 2> v{};
    int32_t n = 0;
    const int32_t* begin() const { return v.data(); }
    const int32_t* end() const { return v.data() + n; }
    int32_t front() const { return v[0]; }
  };
  std::unordered_map<std::string_view, Siblings> node_vnodes;
  node_vnodes.reserve(in.nodes.size());
  cluster.Reserve(in.nodes.size());  // one scheduler node each, or two with MIG and plain GPUs
  vnodes.reserve(in.nodes.size());
  for (const NodeView& n : in.nodes) {
    if (n.lost || n.drained) continue;
    // A name is one machine: a second node of the same name in the input is not placed on
    // (its scheduler nodes would be taken for the first one's siblings).
    auto [entry, fresh] = node_vnodes.try_emplace(n.name);
    if (!fresh) {
      decision.warnings.push_back("node " + n.name +
                                  " not schedulable: the name is listed twice in the pass's input");
      continue;
    }
    Siblings& siblings = entry->second;
    std::vector<uint8_t> plain, mig;
    for (size_t i = 0; i < n.gpus.size(); ++i) {
      (n.gpus[i].mig_enabled ? mig : plain).push_back(static_cast<uint8_t>(i));
    }
    std::vector<std::vector<uint8_t>> groups;
    if (!plain.empty() || mig.empty()) groups.push_back(plain);
    if (!mig.empty()) groups.push_back(mig);
    for (const auto& group : groups) {
      scheduler::NodeSpec spec;
      spec.name = groups.size() > 1 && &group == &groups.back() ? n.name + "#mig" : n.name;
      spec.cpu_milli = n.cpu_milli;
      spec.memory_mib = n.memory_mib;
      spec.num_gpus = static_cast<int32_t>(group.size());
      if (!group.empty()) {
        const GpuView& first = n.gpus[group[0]];
        auto model = cluster.models().Intern(first.model);
        if (!model.ok()) continue;
        spec.gpu_model = *model;
        spec.gpu_memory_mib = first.memory_mib;
        spec.mig_enabled = first.mig_enabled;
      }
      auto idx = cluster.AddNode(spec);
      if (!idx.ok()) {
        decision.warnings.push_back("node " + n.name +
                                    " not schedulable: " + idx.status().ToString());
        continue;
      }
      vnodes.push_back(VNode{&n, group});
      siblings.v[static_cast<size_t>(siblings.n++)] = *idx;  // groups: plain and MIG at most
    }
  }
  // What each GPU really carries, preemptible work beyond capacity included; the best-effort
  // view of it is built when a preemptible job first needs it.
  const int32_t ratio = options.gpu_oversubscription_milli;
  GpuCommitments commits(cluster.num_nodes());
  std::optional<scheduler::ClusterState> be_view;
  // What each active job holds in `cluster` (its placement and the CPU/memory on sibling
  // scheduler nodes), so preemption can try releasing it.
  std::unordered_map<int64_t, std::vector<scheduler::Placement>> held;
  // Applies `p` to `c`: its GPUs on p.node and its CPU/memory on the sibling scheduler nodes.
  auto allocate_on = [&](scheduler::ClusterState& c, const scheduler::Placement& p,
                         const std::string& name, std::vector<scheduler::Placement>* applied) {
    STOKER_RETURN_IF_ERROR(c.Allocate(p));
    if (applied) applied->push_back(p);
    auto siblings = node_vnodes.find(name);
    if (siblings == node_vnodes.end()) return Status::Ok();
    for (int32_t other : siblings->second) {
      if (other == p.node) continue;
      scheduler::Placement cpu_only;
      cpu_only.node = other;
      cpu_only.cpu_milli = p.cpu_milli;
      cpu_only.memory_mib = p.memory_mib;
      cpu_only.best_effort = p.best_effort;
      Status s = c.Allocate(cpu_only);
      if (!s.ok()) {
        decision.warnings.push_back("node " + name +
                                    ": CPU/memory over-committed: " + s.ToString());
      } else if (applied) {
        applied->push_back(cpu_only);
      }
    }
    return Status::Ok();
  };
  // Records job `j` holding `p` (full shares): in the commitments, in the best-effort view if
  // built, and in `cluster` as far as it fits there (a preemptible job beyond capacity holds
  // what fits; the rest is in the commitments only).
  auto reserve = [&](const JobView& j, const scheduler::Placement& p, const std::string& name) {
    if (be_view) {
      Status s = allocate_on(*be_view, BestEffortDelta(p, commits, ratio), name, nullptr);
      if (!s.ok()) {
        decision.warnings.push_back("job " + std::to_string(j.id) +
                                    ": best-effort view: " + s.ToString());
      }
    }
    commits.Add(j.id, j.preemptible, p, cluster.spec(p.node).mig_enabled);
  };
  auto commit = [&](const JobView& j, const scheduler::Placement& p, const std::string& name,
                    std::vector<scheduler::Placement>* applied) {
    reserve(j, p, name);
    const scheduler::Placement fits = ClampToFree(p, cluster);
    if (!(fits == p) && !j.preemptible) {
      decision.warnings.push_back("job " + std::to_string(j.id) +
                                  ": its GPUs are over-committed on " + name);
    }
    return allocate_on(cluster, fits, name, applied);
  };
  std::unordered_map<std::string, std::set<std::string>> used_mig;  // node -> MIG uuids
  // Guaranteed first, so they are accounted in full and preemptible work is what may exceed a
  // GPU.
  std::vector<int64_t> active_ids;
  active_ids.reserve(in.active.size());
  for (const JobView& j : in.active) {
    if (j.placement || !j.gang.empty()) active_ids.push_back(j.id);
  }
  std::stable_partition(active_ids.begin(), active_ids.end(),
                        [&](int64_t id) { return !jobs.at(id).preemptible; });
  // Accounts what active job `j` holds through `a` (its placement, or one part of a gang).
  auto account = [&](const JobView& j, const JobPlacement& a) {
    const int64_t id = j.id;
    auto ni = node_vnodes.find(a.node);
    if (ni == node_vnodes.end()) return;
    scheduler::Placement p;
    p.node = ni->second.front();
    p.cpu_milli = j.cpu_milli;
    p.memory_mib = j.memory_mib;
    for (const auto& [pos, milli] : a.shares) {
      for (int32_t v : ni->second) {
        const auto& positions = vnodes[v].positions;
        auto it = std::find(positions.begin(), positions.end(), pos);
        if (it == positions.end()) continue;
        p.node = v;
        p.gpus[p.num_gpus++] = scheduler::GpuShare{static_cast<uint8_t>(it - positions.begin()),
                                                   static_cast<int16_t>(milli), a.mig_slices};
      }
    }
    if (!a.mig_uuid.empty()) used_mig[a.node].insert(a.mig_uuid);
    Status s = commit(j, p, a.node, &held[id]);
    if (!s.ok()) {
      decision.warnings.push_back("job " + std::to_string(id) +
                                  ": cannot account its allocation: " + s.ToString());
    }
  };
  for (int64_t id : active_ids) {
    const JobView& j = jobs.at(id);
    if (j.placement) account(j, *j.placement);
    for (const JobPlacement& part : j.gang) account(j, part);
  }
  // Measured use: policies that place by utilization see it (ClusterState::SetMeasuredBusy), and
  // oversubscription admits beyond a measured GPU's capacity only with measured headroom over
  // the window; a GPU measured over less than the window takes nothing beyond its capacity.
  for (int32_t v = 0; v < static_cast<int32_t>(vnodes.size()); ++v) {
    if (cluster.spec(v).mig_enabled) continue;
    for (size_t i = 0; i < vnodes[v].positions.size(); ++i) {
      const std::optional<GpuActivity>& act = vnodes[v].node->gpus[vnodes[v].positions[i]].activity;
      if (!act) continue;
      const int32_t busy = std::clamp<int32_t>(act->busy_milli, 0, scheduler::kMilliPerGpu);
      if (Status s = cluster.SetMeasuredBusy(v, static_cast<int>(i), busy); !s.ok()) {
        decision.warnings.push_back("node " + vnodes[v].node->name + ": " + s.ToString());
      }
      const int64_t committed = commits.Total(v, static_cast<int>(i));
      commits.SetMeasuredFloor(
          v, static_cast<int>(i),
          act->covered_ms >= options.activity_window_ms
              ? busy
              : static_cast<int32_t>(std::min<int64_t>(committed, scheduler::kMilliPerGpu)));
    }
  }
  if (in.sample_fragmentation) {
    stats.fragmentation = Measure(cluster, active_ids, in.queued, jobs);
  }
  // A model name nobody has: requests naming only unknown models can never be placed.
  auto no_model = cluster.models().Intern("(no such model)");
  // The walk runs on the cluster kept from the previous pass, brought to the state just built:
  // where the nodes are the same, only those whose state changed are copied, so the placement
  // policy's index (kept per cluster history) catches up on them alone instead of scoring every
  // node again. `cluster` holds the kept one until Run returns, when it goes back to kept_.
  struct KeptSwap {
    scheduler::ClusterState& a;
    scheduler::ClusterState& b;
    ~KeptSwap() { a.Swap(b); }
  };
  std::optional<KeptSwap> kept_swap;
  if (keep_cluster_) {
    kept_.Adopt(cluster);
    cluster.Swap(kept_);
    kept_swap.emplace(KeptSwap{cluster, kept_});
  }

  // Guaranteed (non-preemptible) jobs first, each tier in the queue policy's order: the GPUs a
  // preemption frees go to the guaranteed job that asked for them, not back to a best-effort
  // job that sorts earlier. Only guaranteed jobs preempt, so no job placed in this pass is
  // stopped in it: a placement leaves the job's view as it came (JobTable copies only victims).
  std::vector<int64_t> order;
  order.reserve(in.queued.size());
  {
    std::vector<queue::JobView> queued;
    queued.reserve(in.queued.size());
    for (const JobView& j : in.queued) {
      queued.push_back(
          queue::JobView{.id = static_cast<queue::JobId>(j.id),
                         .submit_ms = j.submit_ms,
                         .gpus = static_cast<int32_t>(std::max<int64_t>(TotalGpus(j), 1)),
                         .min_gpus = j.min_gpus,
                         .priority = j.priority});
    }
    for (queue::JobId id : queue::KeyOrder(queue_policy, queued)) {
      order.push_back(static_cast<int64_t>(id));
    }
  }
  std::stable_partition(order.begin(), order.end(),
                        [&](int64_t id) { return !jobs.at(id).preemptible; });
  // Preemption victims: active preemptible jobs, lowest priority first, then latest started.
  std::vector<int64_t> victims;
  for (const auto& [id, h] : held) {
    const JobView& v = jobs.at(id);
    if (v.preemptible && v.phase != JobPhase::kCancelling) victims.push_back(id);
  }
  std::sort(victims.begin(), victims.end(), [&](int64_t a, int64_t b) {
    const JobView& x = jobs.at(a);
    const JobView& y = jobs.at(b);
    if (x.priority != y.priority) return x.priority < y.priority;
    if (x.start_ms != y.start_ms) return x.start_ms > y.start_ms;
    return a > b;
  });
  bool preempting_any = false;
  for (const auto& [id, h] : held) preempting_any |= jobs.at(id).preempted_by != 0;
  // Shapes of one-node requests that found no room: capacity only shrinks during a pass, so a
  // request of the same shape is not tried again.
  struct Shape {
    int64_t cpu_milli = 0;
    int64_t memory_mib = 0;
    int32_t num_gpu = 0;
    int32_t gpu_milli = 0;
    int64_t gpu_memory_mib = 0;
    scheduler::GpuModelMask allowed_models = 0;
    scheduler::MigProfile mig = scheduler::MigProfile::kNone;
    std::string job_class;
    bool preemptible = false;
    // NOLINTNEXTLINE(modernize-use-nullptr): false positive on a defaulted <=> (llvm issue 53961)
    auto operator<=>(const Shape&) const = default;
  };
  std::set<Shape> failed_shapes;
  auto& reasons = decision.reasons;
  // Stops preemptible `victim` to make room for `j`: a running one is stopped by its node and
  // its exit requeues it; an assigned one that has not started goes back to the queue now.
  auto stop_victim = [&](JobView& victim, const JobView& j) {
    ++stats.preempted;
    Action act;
    act.kind = Action::Kind::kStop;
    act.job = victim.id;
    act.view = jobs.input(victim.id);
    act.for_job = j.id;
    act.running = victim.phase == JobPhase::kRunning;
    if (act.running) {
      victim.phase = JobPhase::kCancelling;
      victim.preempted_by = j.id;
      preempting_any = true;
    } else {
      victim.phase = JobPhase::kQueued;
      victim.preempted_by = 0;
      victim.placement.reset();
      victim.gang.clear();
      victim.start_ms = 0;
    }
    take(std::move(act));
  };
  // Which jobs a trial has taken away: those already being stopped (every active job with
  // `preempted_by` set), plus `out`.
  auto preempted_before = [&](int64_t id) {
    return held.count(id) != 0 && jobs.at(id).preempted_by != 0;
  };
  // With oversubscription, releasing a victim in a trial frees only what it held within
  // capacity, so a trial placement may look roomier than the GPUs are. Guaranteed work gets a
  // GPU only where guaranteed + its share + the preemptible shares that stay fit in one GPU:
  // returns the further preemptible jobs (youngest first) that must go for placement `p`, given
  // the jobs already gone (preempted before, or in `out`); nullopt if jobs `j` may not preempt
  // are in the way.
  auto overflow_victims = [&](const JobView& j, const scheduler::Placement& p,
                              std::set<int64_t> out) -> std::optional<std::vector<int64_t>> {
    std::vector<int64_t> more;
    if (cluster.spec(p.node).mig_enabled) return more;
    auto gone = [&](int64_t id) { return out.count(id) != 0 || preempted_before(id); };
    std::vector<ShareHolder> holders;
    for (int i = 0; i < p.num_gpus; ++i) {
      holders.clear();
      for (const auto& h : commits.Holders(p.node, p.gpus[i].gpu)) {
        if (gone(h.job)) continue;
        const JobView& hj = jobs.at(h.job);
        holders.push_back(ShareHolder{h.job, h.milli,
                                      h.preemptible && hj.preempted_by == 0 &&
                                          hj.phase != JobPhase::kCancelling &&
                                          hj.priority <= j.priority,
                                      hj.start_ms});
      }
      auto stop = ShareVictims(std::move(holders), p.gpus[i].milli);
      if (!stop) return std::nullopt;
      for (int64_t id : *stop) {
        out.insert(id);
        more.push_back(id);
      }
    }
    return more;
  };
  // Stops the jobs `ids` for `j` (those not stopped or queued already), drops every stopped or
  // queued job from the victim order, and says in j's reason how many it waits for (`stopped`:
  // how many were stopped for it before).
  auto stop_and_wait = [&](const JobView& j, const auto& ids, int stopped) {
    for (int64_t id : ids) {
      const JobView& v = jobs.at(id);
      if (v.preempted_by != 0 || v.phase == JobPhase::kQueued) continue;
      ++stopped;
      stop_victim(jobs.mut(id), j);
    }
    victims.erase(std::remove_if(victims.begin(), victims.end(),
                                 [&](int64_t id) {
                                   return jobs.at(id).preempted_by != 0 ||
                                          jobs.at(id).phase == JobPhase::kQueued;
                                 }),
                  victims.end());
    if (stopped == 0) {
      reasons[j.id] = "waiting for preempted jobs to stop";
    } else {
      reasons[j.id] = "waiting for " + std::to_string(stopped) + " preempted job(s) to stop";
    }
  };
  // For a guaranteed job that does not fit now: in a trial, release what jobs already being
  // preempted hold, then victims one by one (in the victim order) until the placement policy
  // finds room; the victims on the node it picks are stopped (the rest stay). Returns whether
  // the job will fit once they are gone.
  //
  // The trial is the pass's own cluster, changed in place and restored before returning (a
  // copy would make the policy index a new cluster history every time: O(nodes) per blocked
  // job). The policy is asked only after a release that lets the job fit on a node it touched:
  // a release changes only its own nodes, so where nothing fitted before, the policy can find
  // room only there (and a policy asked where nothing fits finds nothing, changing no state).
  auto try_preempt = [&](const JobView& j, const scheduler::Request& r) -> bool {
    if (victims.empty() && !preempting_any) return false;
    std::vector<std::pair<bool, scheduler::Placement>> undo;  // (was a release, placement)
    auto trial_release = [&](const scheduler::Placement& p) {
      if (cluster.Release(p).ok()) undo.emplace_back(true, p);
    };
    auto trial_allocate = [&](const scheduler::Placement& p) {
      const bool ok = cluster.Allocate(p).ok();
      if (ok) undo.emplace_back(false, p);
      return ok;
    };
    struct Restore {
      std::function<void()> run;
      ~Restore() { run(); }
    } restore{[&] {
      for (auto it = undo.rbegin(); it != undo.rend(); ++it) {
        Status s = it->first ? cluster.Allocate(it->second) : cluster.Release(it->second);
        if (!s.ok()) {
          decision.warnings.push_back("job " + std::to_string(j.id) +
                                      ": preemption trial not restored: " + s.ToString());
        }
      }
    }};
    const std::vector<scheduler::Placement> none;
    auto held_by = [&](int64_t id) -> const std::vector<scheduler::Placement>& {
      auto it = held.find(id);
      return it == held.end() ? none : it->second;
    };
    for (const auto& [id, h] : held) {
      if (jobs.at(id).preempted_by != 0) {
        for (const scheduler::Placement& p : h) trial_release(p);
      }
    }
    // Stops `released` victims on the node of `p` and the overflow victims `more`. The GPUs the
    // job waits for are reserved in the commitments for the rest of the pass, so preemptible
    // work does not take them back beyond capacity meanwhile.
    auto stop_for = [&](const scheduler::Placement& p, const std::vector<int64_t>& released,
                        const std::vector<int64_t>& more) {
      const std::string& node = vnodes[p.node].node->name;
      reserve(j, p, node);
      int stopped = 0;
      for (int64_t id : released) {
        if (!OnNode(jobs.at(id), node)) continue;
        ++stopped;
        stop_victim(jobs.mut(id), j);
      }
      stop_and_wait(j, more, stopped);
    };
    // Whether the policy's last answer was "no room" (so a release can only make room where it
    // happens).
    bool no_room = true;
    if (scheduler::PlacementResult pr = placement_->Place(r, cluster); pr.placed()) {
      if (auto more = overflow_victims(j, pr.placement, {})) {
        stop_for(pr.placement, {}, *more);
        return true;
      }
      no_room = false;
    }
    // Victims released so far, by node name (a gang victim under every node of its parts).
    std::unordered_map<std::string_view, std::vector<int64_t>> released_on;
    for (int64_t v : victims) {
      const JobView& vj = jobs.at(v);
      if (vj.preempted_by != 0 || vj.priority > j.priority) continue;
      bool may_fit = false;
      for (const scheduler::Placement& p : held_by(v)) {
        trial_release(p);
        may_fit = may_fit || cluster.Fits(p.node, r);
      }
      if (vj.placement) released_on[vj.placement->node].push_back(v);
      for (const JobPlacement& part : vj.gang) released_on[part.node].push_back(v);
      if (no_room && !may_fit) continue;
      scheduler::PlacementResult pr = placement_->Place(r, cluster);
      no_room = !pr.placed();
      if (no_room) continue;
      // Victims released on other nodes stay; only those on the chosen node are gone.
      const std::string& node = vnodes[pr.placement.node].node->name;
      std::set<int64_t> gone_there;
      if (auto it = released_on.find(node); it != released_on.end()) {
        gone_there.insert(it->second.begin(), it->second.end());
      }
      auto more = overflow_victims(j, pr.placement, gone_there);
      if (!more) continue;
      // The victims on that node, then those beyond capacity on the chosen GPUs. Keep back the
      // ones the job does not need after all (the policy's choice may leave room for some),
      // oldest first, as they lose the most work: one stays if its CPU and memory still fit
      // beside the job and the chosen GPUs stay within one GPU with it.
      std::vector<int64_t> candidates(gone_there.begin(), gone_there.end());
      for (int64_t id : *more) {
        gone_there.insert(id);
        candidates.push_back(id);
      }
      std::sort(candidates.begin(), candidates.end(), [&](int64_t x, int64_t y) {
        const int64_t sx = jobs.at(x).start_ms, sy = jobs.at(y).start_ms;
        return sx != sy ? sx < sy : x < y;
      });
      if (trial_allocate(pr.placement)) {
        for (int64_t c : candidates) {
          gone_there.erase(c);
          auto extra = overflow_victims(j, pr.placement, gone_there);
          bool fits = extra && extra->empty();
          std::vector<scheduler::Placement> back;
          for (scheduler::Placement part : held_by(c)) {
            if (!fits) break;
            // GPU use is checked on the commitments above, except for MIG slices (never
            // oversubscribed, so the trial counts them exactly).
            if (!cluster.spec(part.node).mig_enabled) {
              part.num_gpus = 0;
              part.gpus = {};
            }
            fits = trial_allocate(part);
            if (fits) back.push_back(part);
          }
          if (!fits) {
            for (const scheduler::Placement& part : back) trial_release(part);
            gone_there.insert(c);
          }
        }
      }
      std::vector<int64_t> stop;
      for (int64_t c : candidates) {
        if (gone_there.count(c)) stop.push_back(c);
      }
      stop_for(pr.placement, stop, {});
      return true;
    }
    return false;
  };
  // What a placement `p` of `r` went by, said in its assignment (before it is committed): the
  // utilization of the chosen node as a policy that scores by it saw it, and for an
  // oversubscribed placement the measured headroom of its GPUs.
  auto basis_of = [&](const scheduler::Placement& p, const scheduler::Request& r,
                      bool oversubscribed) {
    std::string basis;
    const scheduler::NodeState& ns = cluster.node(p.node);
    const std::string& name = vnodes[p.node].node->name;
    if (placement_->UsesUtilization() && r.num_gpu > 0 && ns.num_gpus > 0) {
      int measured = 0;
      int64_t use = 0;
      for (int g = 0; g < ns.num_gpus; ++g) {
        measured += (ns.measured_gpus >> g) & 1;
        use += scheduler::GpuUseMilli(ns, g);
      }
      const int64_t pct = use * 100 / (int64_t{ns.num_gpus} * scheduler::kMilliPerGpu);
      basis = "u of " + name + " " + std::to_string(pct) + " %: " +
              (measured == 0 ? std::string("allocated share (its GPUs report no activity)")
               : measured == ns.num_gpus
                   ? "measured use"
                   : "measured use on " + std::to_string(measured) + " of " +
                         std::to_string(ns.num_gpus) + " GPUs, allocated share on the rest");
    }
    if (oversubscribed) {
      std::string gpus;
      for (int i = 0; i < p.num_gpus; ++i) {
        const int g = p.gpus[i].gpu;
        const auto floor = commits.MeasuredFloor(p.node, g);
        gpus += (gpus.empty() ? "" : ", ") + std::string("GPU ") +
                std::to_string(vnodes[p.node].node->gpus[vnodes[p.node].positions[g]].index) +
                (floor ? " measured " + std::to_string(*floor / 10) + " % busy" : " unmeasured");
      }
      basis +=
          (basis.empty() ? "" : "; ") + std::string("beyond capacity by ") +
          (gpus.find("unmeasured") == std::string::npos ? "measured headroom" : "commitments") +
          " (" + gpus + ")";
    }
    return basis;
  };
  // Gangs: every part placed, each on a machine of its own, or none (scheduler/gang.h). A gang is
  // never admitted beyond capacity; a guaranteed one that does not fit preempts as one job
  // (try_preempt_gang), else it waits and its reason says how many of its parts fit now. Gangs of
  // one shape that did not fit are not tried again this pass.
  std::map<std::string, std::string> failed_gangs;  // shape -> why it waits
  auto machine_of = [&](int32_t v) {
    const Siblings& siblings = node_vnodes.at(vnodes[v].node->name);
    return std::vector<int32_t>(siblings.begin(), siblings.end());
  };
  auto gang_part = [&](const scheduler::Placement& p) {
    const VNode& vn = vnodes[p.node];
    Grant a;
    a.placement.node = vn.node->name;
    for (int i = 0; i < p.num_gpus; ++i) {
      if (p.gpus[i].gpu >= vn.positions.size()) continue;
      const uint8_t pos = vn.positions[p.gpus[i].gpu];
      a.gpu_indices.push_back(vn.node->gpus[pos].index);
      a.placement.shares.emplace_back(pos, p.gpus[i].milli);
      a.gpu_milli = p.gpus[i].milli;
    }
    a.cuda_visible_devices = JoinIndices(a.gpu_indices);
    return a;
  };
  // A guaranteed gang that does not fit: as try_preempt does for a one-node job, in a trial
  // release what jobs already being preempted hold, then victims one by one (in the victim order)
  // until every part finds room; the victims on the machines the parts took, and those beyond
  // capacity on their GPUs, are stopped as whole jobs, and the parts' GPUs reserved. Victims
  // released on those machines are all stopped (the keep-back of try_preempt is for one node).
  // The gang is tried only after a release that lets one of its parts fit where it happened.
  // Returns whether the gang will fit once they are gone.
  auto try_preempt_gang = [&](const JobView& j, const std::vector<scheduler::Request>& parts) {
    if (victims.empty() && !preempting_any) return false;
    std::vector<scheduler::Placement> released;  // the trial's releases, undone in reverse
    std::vector<scheduler::Placement> taken;     // the parts, while placed in the trial
    struct Restore {
      std::function<void()> run;
      ~Restore() { run(); }
    } restore{[&] {
      for (const scheduler::Placement& p : taken) {
        if (Status s = cluster.Release(p); !s.ok()) {
          decision.warnings.push_back("job " + std::to_string(j.id) +
                                      ": gang preemption trial not restored: " + s.ToString());
        }
      }
      for (auto it = released.rbegin(); it != released.rend(); ++it) {
        if (Status s = cluster.Allocate(*it); !s.ok()) {
          decision.warnings.push_back("job " + std::to_string(j.id) +
                                      ": gang preemption trial not restored: " + s.ToString());
        }
      }
    }};
    auto trial_release = [&](const scheduler::Placement& p) {
      if (cluster.Release(p).ok()) released.push_back(p);
    };
    for (const auto& [id, h] : held) {
      if (jobs.at(id).preempted_by != 0) {
        for (const scheduler::Placement& p : h) trial_release(p);
      }
    }
    std::vector<int64_t> released_victims;
    // Places the gang in the trial; on success stops its victims and reserves its parts.
    auto attempt = [&]() {
      auto gp = scheduler::PlaceGang(*placement_, cluster, parts, machine_of);
      if (!gp.ok() || gp->status != scheduler::PlacementStatus::kPlaced) return false;
      taken = std::move(gp->parts);
      std::set<int64_t> out;
      for (const scheduler::Placement& p : taken) {
        const std::string& node = vnodes[p.node].node->name;
        for (int64_t v : released_victims) {
          if (OnNode(jobs.at(v), node)) out.insert(v);
        }
      }
      for (const scheduler::Placement& p : taken) {
        auto more = overflow_victims(j, p, out);
        if (!more) return false;  // work it may not preempt shares those GPUs
        out.insert(more->begin(), more->end());
      }
      for (const scheduler::Placement& p : taken) reserve(j, p, vnodes[p.node].node->name);
      stop_and_wait(j, out, 0);
      return true;
    };
    auto release_taken = [&] {
      for (const scheduler::Placement& p : taken) {
        if (Status s = cluster.Release(p); !s.ok()) {
          decision.warnings.push_back("job " + std::to_string(j.id) + ": " + s.ToString());
        }
      }
      taken.clear();
    };
    if (attempt()) return true;
    release_taken();
    // NOLINTNEXTLINE(performance-unnecessary-copy-initialization): attempt() shortens `victims`
    const std::vector<int64_t> order = victims;
    for (int64_t v : order) {
      const JobView& vj = jobs.at(v);
      if (vj.preempted_by != 0 || vj.priority > j.priority) continue;
      bool may_fit = false;
      auto it = held.find(v);
      if (it == held.end()) continue;
      for (const scheduler::Placement& p : it->second) {
        trial_release(p);
        for (const scheduler::Request& part : parts)
          may_fit = may_fit || cluster.Fits(p.node, part);
      }
      released_victims.push_back(v);
      if (!may_fit) continue;
      if (attempt()) return true;
      release_taken();
    }
    return false;
  };
  // Places gang `j` (its parts shaped like `r`) or says why it waits. Returns whether it waits
  // for capacity (which stops a strict-order pass).
  auto place_gang = [&](const JobView& j, const scheduler::Request& r, const std::string& shape) {
    if (auto f = failed_gangs.find(shape); f != failed_gangs.end()) {
      ++stats.blocked;
      reasons[j.id] = f->second;
      return true;
    }
    std::string why;
    const std::vector<scheduler::Request> parts = GangRequests(j, r, cluster, &why);
    if (parts.empty()) {
      ++stats.infeasible;
      reasons[j.id] = "no node can ever run this: " + why;
      return false;
    }
    auto gp = scheduler::PlaceGang(*placement_, cluster, parts, machine_of);
    if (!gp.ok()) {
      decision.warnings.push_back("job " + std::to_string(j.id) + ": " + gp.status().ToString());
      ++stats.blocked;
      reasons[j.id] = "waiting: " + gp.status().message();
      return true;
    }
    if (gp->status == scheduler::PlacementStatus::kInfeasible) {
      ++stats.infeasible;
      reasons[j.id] = "no node can ever run this: " + gp->reason;
      return false;
    }
    if (gp->status != scheduler::PlacementStatus::kPlaced) {
      if (auto never = scheduler::GangNeverFits(cluster, parts, machine_of)) {
        ++stats.infeasible;
        reasons[j.id] = "no node can ever run this: " + *never;
        return false;
      }
      ++stats.blocked;
      if (!j.preemptible && try_preempt_gang(j, parts)) {
        ++stats.preempting;
        return true;
      }
      reasons[j.id] = failed_gangs[shape] = "waiting for resources: " + gp->reason;
      return true;
    }
    // The parts were allocated as the gang was placed: account them as every placement is.
    for (auto it = gp->parts.rbegin(); it != gp->parts.rend(); ++it) {
      if (Status s = cluster.Release(*it); !s.ok()) {
        decision.warnings.push_back("job " + std::to_string(j.id) + ": " + s.ToString());
      }
    }
    Action act;
    act.kind = Action::Kind::kAssign;
    act.job = j.id;
    act.view = jobs.input(j.id);
    for (size_t k = 0; k < gp->parts.size(); ++k) {
      const scheduler::Placement& p = gp->parts[k];
      Grant a = gang_part(p);
      a.basis = basis_of(p, parts[k], false);
      if (Status s = commit(j, p, a.placement.node, nullptr); !s.ok()) {
        decision.warnings.push_back("job " + std::to_string(j.id) +
                                    ": gang part rejected by the cluster: " + s.ToString());
      }
      act.gang.push_back(std::move(a));
    }
    reasons.erase(j.id);
    take(std::move(act));
    ++stats.placed;
    return false;
  };
  for (int64_t queued_id : order) {
    const JobView& j = jobs.at(queued_id);
    scheduler::Request r = RequestFor(j);
    for (const std::string& want : j.gpu_models) {
      for (int m = 0; m < cluster.models().size(); ++m) {
        if (ContainsNoCase(cluster.models().Name(static_cast<scheduler::GpuModelId>(m)), want)) {
          r.allowed_models |= scheduler::GpuModelTable::Bit(static_cast<scheduler::GpuModelId>(m));
        }
      }
    }
    if (!j.gpu_models.empty() && r.allowed_models == 0 && no_model.ok()) {
      r.allowed_models = scheduler::GpuModelTable::Bit(*no_model);
    }
    if (IsGang(j)) {
      const std::string shape =
          std::to_string(r.cpu_milli) + "/" + std::to_string(r.memory_mib) + "/" +
          std::to_string(r.num_gpu) + "/" + std::to_string(r.gpu_milli) + "/" +
          std::to_string(r.gpu_memory_mib) + "/" + std::to_string(r.allowed_models) + "/" +
          std::to_string(static_cast<int>(r.mig)) + "/" + r.job_class +
          (j.preemptible ? "/p" : "/g") + "/gang" + std::to_string(j.nodes) + "x" +
          std::to_string(j.total_gpus);
      if (place_gang(j, r, shape) && !options.backfill) break;
      continue;
    }
    Shape shape{r.cpu_milli,      r.memory_mib, r.num_gpu,   r.gpu_milli,  r.gpu_memory_mib,
                r.allowed_models, r.mig,        r.job_class, j.preemptible};
    if (failed_shapes.count(shape)) {
      ++stats.blocked;
      reasons[j.id] = "waiting for resources";
      if (!options.backfill) break;
      continue;
    }
    scheduler::PlacementResult pr = placement_->Place(r, cluster);
    // Elastic jobs: fewer GPUs (down to min_gpus) rather than waiting.
    for (int32_t g = j.gpus - 1;
         !pr.placed() && pr.status == scheduler::PlacementStatus::kNoCapacityNow &&
         j.min_gpus > 0 && g >= j.min_gpus;
         --g) {
      scheduler::Request smaller = r;
      smaller.num_gpu = g;
      pr = placement_->Place(smaller, cluster);
    }
    // Oversubscription admission: preemptible work that does not fit may share GPUs beyond
    // their capacity, up to the ratio; the policy chooses on the best-effort view of the GPUs.
    bool oversubscribed = false;
    if (!pr.placed() && pr.status == scheduler::PlacementStatus::kNoCapacityNow && j.preemptible &&
        ratio > scheduler::kMilliPerGpu && r.num_gpu > 0 && !r.IsMig()) {
      if (!be_view) {
        auto v = BuildBestEffortView(cluster, commits, ratio);
        if (v.ok()) {
          be_view = std::move(*v);
        } else {
          decision.warnings.push_back("oversubscription: cannot build the best-effort view: " +
                                      v.status().ToString());
        }
      }
      if (be_view && !be_placement_) {
        auto pol =
            scheduler::CreatePlacementPolicy(options.placement_policy, scheduler::PolicyConfig{});
        if (pol.ok()) be_placement_ = std::move(*pol);
      }
      if (be_view && be_placement_) {
        if (scheduler::PlacementResult bp = be_placement_->Place(r, *be_view); bp.placed()) {
          pr = bp;
          oversubscribed = true;
        } else if (commits.AnyMeasured()) {
          pr.reason += std::string(pr.reason.empty() ? "" : "; ") +
                       "beyond capacity only with measured headroom over the window";
        }
      }
    }
    if (pr.status == scheduler::PlacementStatus::kInfeasible) {
      ++stats.infeasible;
      reasons[j.id] = "no node can ever run this: " + pr.reason;
      continue;
    }
    if (!pr.placed()) {
      ++stats.blocked;
      if (!j.preemptible && try_preempt(j, r)) {
        ++stats.preempting;
        if (!options.backfill) break;
        continue;
      }
      failed_shapes.insert(std::move(shape));
      reasons[j.id] = "waiting for resources" + (pr.reason.empty() ? "" : ": " + pr.reason);
      if (!options.backfill) break;
      continue;
    }
    const scheduler::Placement& p = pr.placement;
    const VNode& vn = vnodes[p.node];
    const NodeView& n = *vn.node;
    Grant a;
    a.placement.node = n.name;
    uint8_t first_pos = 0;
    for (int i = 0; i < p.num_gpus; ++i) {
      const auto& share = p.gpus[i];
      if (share.gpu >= vn.positions.size()) continue;
      const uint8_t pos = vn.positions[share.gpu];
      if (i == 0) first_pos = pos;
      a.gpu_indices.push_back(n.gpus[pos].index);
      a.placement.shares.emplace_back(pos, share.milli);
      a.gpu_milli = share.milli;
      a.placement.mig_slices = share.mig_slices;
    }
    if (r.IsMig()) {
      // The scheduler counts slices; the node has concrete instances. Take a free instance of
      // the requested size on the chosen GPU.
      const GpuView& g = n.gpus[first_pos];
      for (const MigInstance& m : g.mig) {
        if (m.slices == static_cast<uint32_t>(scheduler::MigSlices(r.mig)) &&
            !used_mig[n.name].count(m.uuid)) {
          a.placement.mig_uuid = m.uuid;
          break;
        }
      }
      if (a.placement.mig_uuid.empty()) {
        ++stats.blocked;
        reasons[j.id] = "no free MIG instance of profile " + j.mig + " on " + n.name;
        if (!options.backfill) break;
        continue;
      }
      used_mig[n.name].insert(a.placement.mig_uuid);
      a.cuda_visible_devices = a.placement.mig_uuid;
    } else if (!a.gpu_indices.empty()) {
      a.cuda_visible_devices = JoinIndices(a.gpu_indices);
    }
    if (r.IsGpuShare()) {
      // Enforced only under an MPS control daemon (see docs/security.md).
      a.env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = std::to_string((r.gpu_milli + 9) / 10);
      if (r.gpu_memory_mib > 0) {
        a.env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = "0=" + std::to_string(r.gpu_memory_mib) + "M";
      }
    }
    a.basis = basis_of(p, r, oversubscribed);
    if (Status s = commit(j, p, n.name, nullptr); !s.ok()) {
      decision.warnings.push_back("job " + std::to_string(j.id) +
                                  ": placement rejected by the cluster: " + s.ToString());
      continue;
    }
    if (oversubscribed) ++stats.oversubscribed;
    a.oversubscribed = oversubscribed;
    reasons.erase(j.id);
    Action act;
    act.kind = Action::Kind::kAssign;
    act.job = j.id;
    act.view = jobs.input(j.id);
    act.assignment = std::move(a);
    take(std::move(act));
    ++stats.placed;
  }
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return decision;
}

}  // namespace stoker::pass
