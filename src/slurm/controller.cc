#include "slurm/controller.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "core/prometheus_text.h"
#include "scheduler/registry.h"
#include "scheduler/stoker_policy.h"

namespace stoker::slurm {
namespace {

bool HasMarker(const SlurmJob& j, const std::string& marker) {
  return !marker.empty() && (j.comment.find(marker) != std::string::npos ||
                             j.admin_comment.find(marker) != std::string::npos);
}

scheduler::Request RequestFor(int32_t gpus, int64_t cpus) {
  return scheduler::Request::WholeGpus(gpus, std::max<int64_t>(cpus, 1) * 1000, 0);
}

}  // namespace

std::string RenderControllerMetrics(const ControllerMetrics& m) {
  prom::TextWriter w;
  auto by_kind = [&](const char* name, const char* help,
                     std::initializer_list<std::pair<const char*, int64_t>> kinds) {
    w.Family(name, help, prom::Type::kCounter);
    for (const auto& [kind, v] : kinds) w.Sample(name, {{"kind", kind}}, static_cast<double>(v));
  };
  auto counter = [&](const char* name, const char* help, int64_t v) {
    w.Counter(name, help, static_cast<double>(v));
  };
  by_kind("stoker_slurm_read_errors_total", "Failed reads of Slurm, by kind.",
          {{"unreachable", m.read_errors_unreachable},
           {"malformed", m.read_errors_malformed},
           {"other", m.read_errors_other}});
  counter("stoker_slurm_cycles_total", "Adapter cycles run.", m.cycles);
  counter("stoker_slurm_weight_updates_total", "Node weights set through scontrol.",
          m.weight_updates);
  counter("stoker_slurm_jobs_steered_total", "Held GPU jobs released onto Stoker's node.",
          m.jobs_steered);
  counter("stoker_slurm_jobs_released_unsteered_total",
          "Held GPU jobs released without a node (Stoker could not place them).",
          m.jobs_released_unsteered);
  by_kind("stoker_slurm_action_errors_total", "Failed Slurm actions, by kind.",
          {{"not_found", m.action_errors_not_found}, {"other", m.action_errors_other}});
  counter("stoker_slurm_nodes_skipped_total", "Node readings the model could not hold.",
          m.nodes_skipped);
  return w.Take();
}

ClusterModel BuildClusterModel(const std::vector<SlurmNode>& nodes) {
  ClusterModel m;
  for (const SlurmNode& n : nodes) {
    if (!n.Usable() || n.gpus == 0) continue;
    if (n.gpus > scheduler::kMaxGpusPerNode) {
      spdlog::warn("slurm: node {} has {} GPUs, more than the model's {}; not steered", n.name,
                   n.gpus, scheduler::kMaxGpusPerNode);
      ++m.skipped;
      continue;
    }
    auto model = m.cluster.models().Intern(n.gpu_type.empty() ? "gpu" : n.gpu_type);
    if (!model.ok()) {
      ++m.skipped;
      continue;
    }
    scheduler::NodeSpec spec;
    spec.name = n.name;
    spec.cpu_milli = n.cpus * 1000;
    spec.memory_mib = n.real_memory_mib;
    spec.num_gpus = n.gpus;
    spec.gpu_model = *model;
    auto id = m.cluster.AddNode(spec);
    if (!id.ok()) {
      spdlog::warn("slurm: node {} not modelled: {}", n.name, id.status().ToString());
      ++m.skipped;
      continue;
    }
    m.names.push_back(n.name);
    // What Slurm says is in use: the GPUs named by gres_used, else the lowest ones.
    std::vector<int32_t> used = n.gpu_used_indices;
    if (used.empty()) {
      for (int32_t g = 0; g < n.gpus_used; ++g) used.push_back(g);
    }
    scheduler::Placement p;
    p.node = *id;
    p.cpu_milli = std::min(n.alloc_cpus, n.cpus) * 1000;
    p.memory_mib = std::min(n.alloc_memory_mib, n.real_memory_mib);
    for (int32_t g : used) {
      if (g < 0 || g >= n.gpus || p.num_gpus >= scheduler::kMaxGpusPerNode) continue;
      p.gpus[p.num_gpus++] = {static_cast<uint8_t>(g), scheduler::kMilliPerGpu, 0};
    }
    if (Status s = m.cluster.Allocate(p); !s.ok()) {
      spdlog::warn("slurm: node {} use not modelled: {}", n.name, s.ToString());
    }
  }
  return m;
}

Decision Decide(const SlurmSnapshot& snap, scheduler::PlacementPolicy& policy,
                const ControllerOptions& options) {
  Decision d;
  ClusterModel model = BuildClusterModel(snap.nodes);
  std::map<std::string, int32_t> index;
  for (size_t i = 0; i < model.names.size(); ++i) index[model.names[i]] = static_cast<int32_t>(i);

  // Jobs already released onto one node but not started yet hold that node's GPUs in the
  // model, or the next cycle would send more work to the same free GPUs.
  for (const SlurmJob& j : snap.jobs) {
    if (!j.Pending() || j.Held() || j.required_nodes.size() != 1 || j.GpusWanted() == 0) continue;
    auto at = index.find(j.required_nodes[0]);
    if (at == index.end()) continue;
    const scheduler::Request r =
        RequestFor(std::min(j.GpusWanted(), scheduler::kMaxGpusPerNode), j.cpus);
    uint8_t gpus[scheduler::kMaxGpusPerNode];
    if (model.cluster.Fits(at->second, r) &&
        scheduler::PickFullyFreeGpus(model.cluster.node(at->second), r.num_gpu, gpus)) {
      (void)model.cluster.Allocate(scheduler::MakePlacement(r, at->second, gpus));
    }
  }

  // Steering: held marked GPU jobs, highest priority first, then oldest.
  std::vector<const SlurmJob*> held;
  std::map<int32_t, int64_t> shape_counts;
  for (const SlurmJob& j : snap.jobs) {
    if (!j.Pending() || j.GpusWanted() == 0) continue;
    ++shape_counts[std::min(j.GpusWanted(), scheduler::kMaxGpusPerNode)];
    if (options.steer_held_jobs && j.Held() && HasMarker(j, options.steer_marker)) {
      held.push_back(&j);
    }
  }
  std::sort(held.begin(), held.end(), [](const SlurmJob* a, const SlurmJob* b) {
    if (a->priority != b->priority) return a->priority > b->priority;
    if (a->submit_time != b->submit_time) return a->submit_time < b->submit_time;
    return a->id < b->id;
  });
  for (const SlurmJob* j : held) {
    const int32_t gpus = j->GpusWanted();
    const bool multi_node = j->gpus_per_job > scheduler::kMaxGpusPerNode;
    if (multi_node || gpus > scheduler::kMaxGpusPerNode) {
      d.steer.push_back({j->id, {}, "multi-node GPU job: left to Slurm"});
      continue;
    }
    const scheduler::Request r = RequestFor(gpus, j->cpus);
    policy.Observe(r);
    scheduler::PlacementResult pr = policy.Place(r, model.cluster);
    if (pr.placed()) {
      if (Status s = model.cluster.Allocate(pr.placement); !s.ok()) {
        spdlog::warn("slurm: job {}: placement not applied to the model: {}", j->id, s.ToString());
        continue;
      }
      d.steer.push_back(
          {j->id, {model.names[pr.placement.node]}, "policy " + std::string(policy.Name())});
    } else if (pr.status == scheduler::PlacementStatus::kInfeasible) {
      d.steer.push_back({j->id, {}, "no node can ever host it: " + pr.reason});
    }
    // kNoCapacityNow: stays held until the policy finds room.
  }

  // Weights: the policy's score for the most common pending GPU shape (1 GPU when none).
  if (options.manage_weights && model.cluster.num_nodes() > 0) {
    int32_t shape = 1;
    int64_t best = 0;
    for (const auto& [g, c] : shape_counts) {
      if (c > best) best = c, shape = g;
    }
    const scheduler::Request r = RequestFor(shape, 1);
    std::vector<std::pair<int64_t, int32_t>> scored;  // (score, node); higher score = better
    std::vector<int32_t> unfit;
    const bool stoker_score = policy.Name() == "stoker";
    for (int32_t i = 0; i < model.cluster.num_nodes(); ++i) {
      int64_t score = 0, bound = 0;
      if (!model.cluster.Fits(i, r)) {
        unfit.push_back(i);
      } else if (stoker_score &&
                 scheduler::StokerScoreAndBound(policy, r, model.cluster, i, &score, &bound)) {
        scored.push_back({score, i});
      } else {
        // Other policies: pack (fewest free GPUs that still fit first).
        scored.push_back({-static_cast<int64_t>(model.cluster.node(i).full_free_gpus), i});
      }
    }
    std::sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    std::map<std::string, int64_t> want;
    int64_t rank = 0;
    for (size_t k = 0; k < scored.size(); ++k) {
      if (k > 0 && scored[k].first != scored[k - 1].first) ++rank;
      want[model.names[scored[k].second]] = 1 + rank;
    }
    for (int32_t i : unfit) want[model.names[i]] = 2 + rank;
    for (const SlurmNode& n : snap.nodes) {
      auto it = want.find(n.name);
      if (it != want.end() && it->second != n.weight) d.weights[n.name] = it->second;
    }
  }
  return d;
}

Result<std::unique_ptr<SlurmController>> SlurmController::Create(SlurmClient* client,
                                                                 ControllerOptions options) {
  STOKER_ASSIGN_OR_RETURN(
      auto policy, scheduler::CreatePlacementPolicy(options.policy, scheduler::PolicyConfig{}));
  return std::unique_ptr<SlurmController>(
      new SlurmController(client, std::move(options), std::move(policy)));
}

void SlurmController::CountReadError(const Status& s) {
  if (s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kDeadlineExceeded) {
    ++metrics_.read_errors_unreachable;
  } else if (s.code() == StatusCode::kInvalidArgument) {
    ++metrics_.read_errors_malformed;
  } else {
    ++metrics_.read_errors_other;
  }
  spdlog::error("slurm: cannot read the cluster, no action this cycle: {}", s.ToString());
}

void SlurmController::CountActionError(const Status& s) {
  if (s.code() == StatusCode::kNotFound) {
    ++metrics_.action_errors_not_found;
  } else {
    ++metrics_.action_errors_other;
  }
}

Result<Decision> SlurmController::Cycle() {
  ++metrics_.cycles;
  auto nodes = client_->Nodes();
  if (!nodes.ok()) {
    CountReadError(nodes.status());
    return nodes.status();
  }
  auto jobs = client_->Jobs();
  if (!jobs.ok()) {
    CountReadError(jobs.status());
    return jobs.status();
  }
  last_.nodes = std::move(nodes).value();
  last_.jobs = std::move(jobs).value();
  Decision d = Decide(last_, *policy_, options_);
  for (const auto& [node, weight] : d.weights) {
    Status s = client_->SetNodeWeight(node, weight);
    if (s.ok()) {
      ++metrics_.weight_updates;
    } else {
      CountActionError(s);
      spdlog::warn("slurm: weight {} on node {} not set: {}", weight, node, s.ToString());
    }
  }
  for (const Decision::Steer& st : d.steer) {
    Status s = client_->SteerAndRelease(st.job, st.nodes);
    if (s.ok()) {
      ++(st.nodes.empty() ? metrics_.jobs_released_unsteered : metrics_.jobs_steered);
      spdlog::info("slurm: job {} released{}{} ({})", st.job, st.nodes.empty() ? "" : " onto ",
                   st.nodes.empty() ? "" : st.nodes[0], st.why);
    } else {
      CountActionError(s);
      spdlog::warn("slurm: job {} not steered: {}", st.job, s.ToString());
    }
  }
  return d;
}

}  // namespace stoker::slurm
