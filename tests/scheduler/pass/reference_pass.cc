// The scheduling pass as it was before its preemption planner was rewritten (commit 9daeecc,
// src/scheduler/pass/pass.cc, SchedulingPass::Run): the reference the randomized equivalence
// test (reference_pass_test.cc) holds the current pass to. Kept verbatim but for the member
// names (`placement_` and `be_placement_` are parameters here) and the fragmentation sample,
// which the test does not ask for. Do not change it to follow the pass: a change of decisions
// must show as a difference.

#include "reference_pass.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <set>
#include <unordered_map>

#include "scheduler/fgd.h"
#include "scheduler/pass/gpu_commitments.h"
#include "scheduler/queue/job_queue.h"
#include "scheduler/registry.h"

namespace stoker::pass::reference {
namespace {

bool ContainsNoCase(std::string_view hay, std::string_view needle) {
  auto it = std::search(hay.begin(), hay.end(), needle.begin(), needle.end(),
                        [](char a, char b) { return std::tolower(a) == std::tolower(b); });
  return it != hay.end();
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

Decision RunReferencePass(scheduler::PlacementPolicy& placement,
                          std::unique_ptr<scheduler::PlacementPolicy>& be_placement,
                          const PassInput& in, const queue::QueuePolicy& queue_policy,
                          const PassOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  Decision decision;
  PassStats& stats = decision.stats;
  stats.queued = static_cast<int>(in.queued.size());
  if (in.queued.empty() && !in.sample_fragmentation) return decision;

  // The jobs as the pass changes them (a victim stopping, a job placed), by id.
  std::unordered_map<int64_t, JobView> jobs;
  jobs.reserve(in.active.size() + in.queued.size());
  for (const JobView& j : in.active) jobs.emplace(j.id, j);
  for (const JobView& j : in.queued) jobs.emplace(j.id, j);

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
  std::unordered_map<std::string, std::vector<int32_t>> node_vnodes;
  for (const NodeView& n : in.nodes) {
    if (n.lost || n.drained) continue;
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
      node_vnodes[n.name].push_back(*idx);
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
    for (int32_t other : node_vnodes[name]) {
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
    if (j.placement) active_ids.push_back(j.id);
  }
  std::stable_partition(active_ids.begin(), active_ids.end(),
                        [&](int64_t id) { return !jobs.at(id).preemptible; });
  for (int64_t id : active_ids) {
    const JobView& j = jobs.at(id);
    const JobPlacement& a = *j.placement;
    auto ni = node_vnodes.find(a.node);
    if (ni == node_vnodes.end()) continue;
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
  }
  // (The fragmentation sample is not part of the reference: inputs here never ask for one.)
  // A model name nobody has: requests naming only unknown models can never be placed.
  auto no_model = cluster.models().Intern("(no such model)");

  queue::JobQueue q(queue_policy);
  for (const JobView& j : in.queued) {
    q.Push(queue::JobView{.id = static_cast<queue::JobId>(j.id),
                          .submit_ms = j.submit_ms,
                          .gpus = std::max(j.gpus, 1),
                          .min_gpus = j.min_gpus,
                          .priority = j.priority});
  }
  // Guaranteed (non-preemptible) jobs first, each tier in the queue policy's order: the GPUs a
  // preemption frees go to the guaranteed job that asked for them, not back to a best-effort
  // job that sorts earlier.
  std::vector<int64_t> order;
  order.reserve(in.queued.size());
  for (const auto& entry : q) order.push_back(static_cast<int64_t>(entry.key.id));
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
  std::set<std::string> failed_shapes;  // capacity only shrinks during a pass
  auto& reasons = decision.reasons;
  // Stops preemptible `victim` to make room for `j`: a running one is stopped by its node and
  // its exit requeues it; an assigned one that has not started goes back to the queue now.
  auto stop_victim = [&](JobView& victim, const JobView& j) {
    ++stats.preempted;
    Action act;
    act.kind = Action::Kind::kStop;
    act.job = victim.id;
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
      victim.start_ms = 0;
    }
    decision.actions.push_back(std::move(act));
  };
  // With oversubscription, releasing a victim in a trial frees only what it held within
  // capacity, so a trial placement may look roomier than the GPUs are. Guaranteed work gets a
  // GPU only where guaranteed + its share + the preemptible shares that stay fit in one GPU:
  // returns the further preemptible jobs (youngest first) that must go for placement `p`, given
  // the jobs already `gone`; nullopt if jobs `j` may not preempt are in the way.
  auto overflow_victims = [&](const JobView& j, const scheduler::Placement& p,
                              std::set<int64_t> gone) -> std::optional<std::vector<int64_t>> {
    std::vector<int64_t> more;
    if (cluster.spec(p.node).mig_enabled) return more;
    for (int i = 0; i < p.num_gpus; ++i) {
      const auto& holders = commits.Holders(p.node, p.gpus[i].gpu);
      int64_t load = p.gpus[i].milli;
      std::vector<const GpuCommitments::Holder*> movable;
      for (const auto& h : holders) {
        if (gone.count(h.job)) continue;
        load += h.milli;
        const JobView& hj = jobs.at(h.job);
        if (h.preemptible && hj.preempted_by == 0 && hj.phase != JobPhase::kCancelling &&
            hj.priority <= j.priority) {
          movable.push_back(&h);
        }
      }
      std::sort(movable.begin(), movable.end(), [&](const auto* x, const auto* y) {
        const int64_t sx = jobs.at(x->job).start_ms, sy = jobs.at(y->job).start_ms;
        return sx != sy ? sx > sy : x->job > y->job;
      });
      for (const auto* h : movable) {
        if (load <= scheduler::kMilliPerGpu) break;
        if (gone.count(h->job)) continue;
        load -= h->milli;
        gone.insert(h->job);
        more.push_back(h->job);
      }
      if (load > scheduler::kMilliPerGpu) return std::nullopt;
    }
    return more;
  };
  // For a guaranteed job that does not fit now: on a copy of the cluster, release what jobs
  // already being preempted hold, then victims one by one until the placement policy finds
  // room; the victims on the node it picks are stopped (the rest stay). Returns whether the job
  // will fit once they are gone.
  auto try_preempt = [&](const JobView& j, const scheduler::Request& r) -> bool {
    if (victims.empty() && !preempting_any) return false;
    scheduler::ClusterState trial = cluster;
    std::set<int64_t> gone;
    auto release = [&](int64_t id) {
      gone.insert(id);
      for (const scheduler::Placement& p : held[id]) (void)trial.Release(p);
    };
    for (const auto& [id, h] : held) {
      if (jobs.at(id).preempted_by != 0) release(id);
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
        JobView& victim = jobs.at(id);
        if (!victim.placement || victim.placement->node != node) continue;
        ++stopped;
        stop_victim(victim, j);
      }
      for (int64_t id : more) {
        JobView& victim = jobs.at(id);
        if (victim.preempted_by != 0 || victim.phase == JobPhase::kQueued) continue;
        ++stopped;
        stop_victim(victim, j);
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
    if (scheduler::PlacementResult pr = placement.Place(r, trial); pr.placed()) {
      if (auto more = overflow_victims(j, pr.placement, gone)) {
        stop_for(pr.placement, {}, *more);
        return true;
      }
    }
    std::vector<int64_t> released;
    for (int64_t v : victims) {
      const JobView& vj = jobs.at(v);
      if (vj.preempted_by != 0 || vj.priority > j.priority) continue;
      release(v);
      released.push_back(v);
      scheduler::PlacementResult pr = placement.Place(r, trial);
      if (!pr.placed()) continue;
      // Victims released on other nodes stay; only those on the chosen node are gone.
      const std::string& node = vnodes[pr.placement.node].node->name;
      std::set<int64_t> gone_there;
      for (int64_t id : gone) {
        const JobView& g = jobs.at(id);
        if (g.preempted_by != 0 || (g.placement && g.placement->node == node)) {
          gone_there.insert(id);
        }
      }
      auto more = overflow_victims(j, pr.placement, gone_there);
      if (!more) continue;
      // The victims on that node, then those beyond capacity on the chosen GPUs. Keep back the
      // ones the job does not need after all (the policy's choice may leave room for some),
      // oldest first, as they lose the most work: one stays if its CPU and memory still fit
      // beside the job and the chosen GPUs stay within one GPU with it.
      std::vector<int64_t> candidates;
      for (int64_t id : released) {
        if (gone_there.count(id)) candidates.push_back(id);
      }
      for (int64_t id : *more) {
        gone_there.insert(id);
        candidates.push_back(id);
      }
      std::sort(candidates.begin(), candidates.end(), [&](int64_t x, int64_t y) {
        const int64_t sx = jobs.at(x).start_ms, sy = jobs.at(y).start_ms;
        return sx != sy ? sx < sy : x < y;
      });
      if (trial.Allocate(pr.placement).ok()) {
        for (int64_t c : candidates) {
          gone_there.erase(c);
          auto extra = overflow_victims(j, pr.placement, gone_there);
          bool fits = extra && extra->empty();
          std::vector<scheduler::Placement> back;
          for (scheduler::Placement part : held[c]) {
            if (!fits) break;
            // GPU use is checked on the commitments above, except for MIG slices (never
            // oversubscribed, so the trial counts them exactly).
            if (!cluster.spec(part.node).mig_enabled) {
              part.num_gpus = 0;
              part.gpus = {};
            }
            fits = trial.Allocate(part).ok();
            if (fits) back.push_back(part);
          }
          if (!fits) {
            for (const scheduler::Placement& part : back) (void)trial.Release(part);
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
  for (int64_t queued_id : order) {
    JobView& j = jobs.at(queued_id);
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
    const std::string shape =
        std::to_string(r.cpu_milli) + "/" + std::to_string(r.memory_mib) + "/" +
        std::to_string(r.num_gpu) + "/" + std::to_string(r.gpu_milli) + "/" +
        std::to_string(r.gpu_memory_mib) + "/" + std::to_string(r.allowed_models) + "/" +
        std::to_string(static_cast<int>(r.mig)) + "/" + r.job_class + (j.preemptible ? "/p" : "/g");
    if (failed_shapes.count(shape)) {
      ++stats.blocked;
      reasons[j.id] = "waiting for resources";
      if (!options.backfill) break;
      continue;
    }
    scheduler::PlacementResult pr = placement.Place(r, cluster);
    // Elastic jobs: fewer GPUs (down to min_gpus) rather than waiting.
    for (int32_t g = j.gpus - 1;
         !pr.placed() && pr.status == scheduler::PlacementStatus::kNoCapacityNow &&
         j.min_gpus > 0 && g >= j.min_gpus;
         --g) {
      scheduler::Request smaller = r;
      smaller.num_gpu = g;
      pr = placement.Place(smaller, cluster);
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
      if (be_view && !be_placement) {
        auto pol =
            scheduler::CreatePlacementPolicy(options.placement_policy, scheduler::PolicyConfig{});
        if (pol.ok()) be_placement = std::move(*pol);
      }
      if (be_view && be_placement) {
        if (scheduler::PlacementResult bp = be_placement->Place(r, *be_view); bp.placed()) {
          pr = bp;
          oversubscribed = true;
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
      failed_shapes.insert(shape);
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
    if (Status s = commit(j, p, n.name, nullptr); !s.ok()) {
      decision.warnings.push_back("job " + std::to_string(j.id) +
                                  ": placement rejected by the cluster: " + s.ToString());
      continue;
    }
    if (oversubscribed) ++stats.oversubscribed;
    a.oversubscribed = oversubscribed;
    j.phase = JobPhase::kAssigned;
    j.placement = a.placement;
    reasons.erase(j.id);
    Action act;
    act.kind = Action::Kind::kAssign;
    act.job = j.id;
    act.assignment = std::move(a);
    decision.actions.push_back(std::move(act));
    ++stats.placed;
  }
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return decision;
}

}  // namespace stoker::pass::reference
