#include "slurm/controller.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <set>
#include <thread>
#include <tuple>

#include "core/prometheus_text.h"
#include "scheduler/registry.h"
#include "scheduler/stoker_policy.h"

namespace stoker::slurm {
namespace {

bool HasMarker(const SlurmJob& j, const std::string& marker) {
  return !marker.empty() && (j.comment.find(marker) != std::string::npos ||
                             j.admin_comment.find(marker) != std::string::npos);
}

// The model name of a node's GPUs: its gres type ("gpu" when untyped), "+shard" where the node
// has shards, so a shard job can be kept to such nodes with a model constraint (the pass's
// constraint is "the model name contains one of these").
std::string ModelName(const SlurmNode& n) {
  return (n.gpu_type.empty() ? std::string("gpu") : n.gpu_type) + (n.shards > 0 ? "+shard" : "");
}

bool Modelled(const SlurmNode& n) { return n.gpus > 0 && n.gpus <= scheduler::kMaxGpusPerNode; }

// What a job asks of one node: whole GPUs, or shards of one GPU.
struct Ask {
  int32_t gpus = 0;
  int32_t shards = 0;
  int64_t cpus = 1;
};
Ask AskOf(const SlurmJob& j) {
  return {j.GpusWanted(), j.shards_per_node,
          std::max<int64_t>(1, j.cpus / std::max<int64_t>(1, static_cast<int64_t>(std::max<size_t>(
                                                                 1, j.nodes.size()))))};
}

// Could the job run on `n` if the node were empty?
bool CouldEverRun(const SlurmNode& n, const SlurmJob& j, const Ask& a) {
  if (!n.Usable() || !Modelled(n) || a.cpus > n.cpus) return false;
  if (!j.gpu_type.empty() && j.gpu_type != n.gpu_type) return false;
  if (a.gpus > 0) return a.gpus <= n.gpus;
  return a.shards <= n.ShardsPerGpu();
}

// Writes `text` to `path` whole (a temporary file beside it, then renamed), readable by the
// Slurm user. The temporary file is created afresh (a stale one, or a link planted in its place,
// is removed first, and O_EXCL refuses to follow one).
Status WriteFileReplacing(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  if (::unlink(tmp.c_str()) != 0 && errno != ENOENT) {
    return Internal("cannot remove " + tmp + ": " + std::strerror(errno));
  }
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return Internal("cannot create " + tmp + ": " + std::strerror(errno));
  size_t done = 0;
  int write_errno = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      write_errno = errno;
      break;
    }
    done += static_cast<size_t>(n);
  }
  const int close_errno = ::close(fd) != 0 ? errno : 0;
  if (write_errno != 0 || close_errno != 0) {
    ::unlink(tmp.c_str());
    return Internal("cannot write " + tmp + ": " +
                    std::strerror(write_errno != 0 ? write_errno : close_errno));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return Internal("cannot rename " + tmp + " to " + path + ": " + ec.message());
  return Status::Ok();
}

}  // namespace

std::string RenderControllerMetrics(const ControllerMetrics& m) {
  prom::TextWriter w;
  auto d = [](int64_t v) { return static_cast<double>(v); };
  w.Family("stoker_slurm_read_errors_total", "Failed reads of Slurm, by kind.",
           prom::Type::kCounter);
  w.Sample("stoker_slurm_read_errors_total", {{"kind", "unreachable"}},
           d(m.read_errors_unreachable));
  w.Sample("stoker_slurm_read_errors_total", {{"kind", "malformed"}}, d(m.read_errors_malformed));
  w.Sample("stoker_slurm_read_errors_total", {{"kind", "other"}}, d(m.read_errors_other));
  w.Counter("stoker_slurm_cycles_total", "Adapter cycles run.", d(m.cycles));
  w.Counter("stoker_slurm_weight_updates_total", "Node weights set through scontrol.",
            d(m.weight_updates));
  w.Counter("stoker_slurm_jobs_steered_total", "Held GPU jobs released onto Stoker's node.",
            d(m.jobs_steered));
  w.Counter("stoker_slurm_jobs_released_unsteered_total",
            "Held GPU jobs released without a node (Stoker could not place them).",
            d(m.jobs_released_unsteered));
  w.Family("stoker_slurm_action_errors_total", "Failed Slurm actions, by kind.",
           prom::Type::kCounter);
  w.Sample("stoker_slurm_action_errors_total", {{"kind", "not_found"}},
           d(m.action_errors_not_found));
  w.Sample("stoker_slurm_action_errors_total", {{"kind", "other"}}, d(m.action_errors_other));
  w.Counter("stoker_slurm_nodes_skipped_total", "Node readings the model could not hold.",
            d(m.nodes_skipped));
  w.Gauge("stoker_slurm_jobs_waiting", "Held marked GPU jobs the last cycle left held.",
          d(m.jobs_waiting));
  w.Counter("stoker_slurm_kept_off_shared_gpus_total",
            "Held jobs moved to another node than the pass picked, or kept held, to keep "
            "whole-GPU and shard jobs on separate GPUs (Slurm picks the GPUs on the node); each "
            "job counted once per hold.",
            d(m.kept_off_shared_gpus));
  w.Counter("stoker_slurm_submit_plan_errors_total",
            "Submit plans for the job_submit script that could not be written.",
            d(m.submit_plan_errors));
  w.Counter("stoker_slurm_exclusions_updated_total",
            "Pending jobs placed at submission whose excluded nodes followed the submit plan.",
            d(m.exclusions_updated));
  w.Gauge("stoker_slurm_cycle_seconds", "Duration of the last cycle (read, decide, act).",
          m.last_cycle_seconds);
  return w.Take();
}

std::vector<int32_t> NodeUse::PredictWhole(int32_t n) const {
  std::vector<int32_t> out;
  for (size_t g = 0; g < whole.size() && static_cast<int32_t>(out.size()) < n; ++g) {
    if (!whole[g]) out.push_back(static_cast<int32_t>(g));
  }
  if (static_cast<int32_t>(out.size()) < n) out.clear();
  return out;
}

int32_t NodeUse::PredictShards(int32_t n) const {
  for (size_t g = 0; g < whole.size(); ++g) {
    if (!whole[g] && shards_per_gpu - shards[g] >= n) return static_cast<int32_t>(g);
  }
  return -1;
}

int32_t NodeUse::CleanWholeCapacity() const {
  int32_t n = 0;
  for (size_t g = 0; g < whole.size(); ++g) {
    if (whole[g]) continue;
    if (shards[g] > 0) break;
    ++n;
  }
  return n;
}

void NodeUse::TakeWhole(const std::vector<int32_t>& gpus) {
  for (int32_t g : gpus) {
    if (g >= 0 && g < static_cast<int32_t>(whole.size())) whole[g] = true;
  }
}

void NodeUse::TakeShards(int32_t gpu, int32_t n) {
  if (gpu >= 0 && gpu < static_cast<int32_t>(shards.size())) shards[gpu] += n;
}

std::map<std::string, NodeUse> NodeUses(const SlurmSnapshot& snap) {
  std::map<std::string, NodeUse> uses;
  for (const SlurmNode& n : snap.nodes) {
    if (n.gpus <= 0) continue;
    NodeUse& u = uses[n.name];
    u.shards_per_gpu = n.ShardsPerGpu();
    u.whole.assign(n.gpus, false);
    u.shards.assign(n.gpus, 0);
  }
  for (const SlurmJob& j : snap.jobs) {
    if (!j.Holding()) continue;
    for (size_t k = 0; k < j.nodes.size(); ++k) {
      auto it = uses.find(j.nodes[k]);
      if (it == uses.end()) continue;
      NodeUse& u = it->second;
      if (k < j.gpu_indices.size()) u.TakeWhole(j.gpu_indices[k]);
      if (k < j.shard_counts.size() && j.shard_counts[k] > 0 && k < j.shard_gpus.size() &&
          !j.shard_gpus[k].empty()) {
        const auto& on = j.shard_gpus[k];
        const int32_t each = j.shard_counts[k] / static_cast<int32_t>(on.size());
        int32_t rest = j.shard_counts[k] % static_cast<int32_t>(on.size());
        for (int32_t g : on) u.TakeShards(g, each + (rest-- > 0 ? 1 : 0));
      }
    }
  }
  // GPUs sinfo counts as used that no visible job explains (PrivateData hides other users'
  // jobs): the indices sinfo names, else the lowest free ones.
  for (const SlurmNode& n : snap.nodes) {
    auto it = uses.find(n.name);
    if (it == uses.end()) continue;
    NodeUse& u = it->second;
    int32_t count = static_cast<int32_t>(std::count(u.whole.begin(), u.whole.end(), true));
    if (count >= n.gpus_used) continue;
    u.TakeWhole(n.gpu_used_indices);
    count = static_cast<int32_t>(std::count(u.whole.begin(), u.whole.end(), true));
    if (count < n.gpus_used) u.TakeWhole(u.PredictWhole(n.gpus_used - count));
  }
  // Jobs released onto one node that have not started yet: what Slurm will give them there.
  for (const SlurmJob& j : snap.jobs) {
    if (!j.Pending() || j.Held() || j.required_nodes.size() != 1) continue;
    auto it = uses.find(j.required_nodes[0]);
    if (it == uses.end()) continue;
    const Ask a = AskOf(j);
    if (a.gpus > 0) {
      it->second.TakeWhole(it->second.PredictWhole(a.gpus));
    } else if (a.shards > 0) {
      it->second.TakeShards(it->second.PredictShards(a.shards), a.shards);
    }
  }
  return uses;
}

ClusterModel BuildClusterModel(const std::vector<SlurmNode>& nodes,
                               const std::map<std::string, NodeUse>& uses) {
  ClusterModel m;
  for (const SlurmNode& n : nodes) {
    if (!n.Usable() || n.gpus == 0) continue;
    if (!Modelled(n)) {
      spdlog::warn("slurm: node {} has {} GPUs, more than the model's {}; not steered", n.name,
                   n.gpus, scheduler::kMaxGpusPerNode);
      ++m.skipped;
      continue;
    }
    auto model = m.cluster.models().Intern(ModelName(n));
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
    scheduler::Placement p;
    p.node = *id;
    p.cpu_milli = std::min(n.alloc_cpus, n.cpus) * 1000;
    p.memory_mib = std::min(n.alloc_memory_mib, n.real_memory_mib);
    if (auto u = uses.find(n.name); u != uses.end()) {
      for (int32_t g = 0; g < n.gpus; ++g) {
        const int32_t milli = u->second.whole[g]
                                  ? scheduler::kMilliPerGpu
                                  : ShardMilli(u->second.shards[g], u->second.shards_per_gpu);
        if (milli > 0) {
          p.gpus[p.num_gpus++] = {static_cast<uint8_t>(g), static_cast<int16_t>(milli), 0};
        }
      }
    }
    if (Status s = m.cluster.Allocate(p); !s.ok()) {
      spdlog::warn("slurm: node {} use not modelled: {}", n.name, s.ToString());
    }
  }
  return m;
}

Result<DecisionPolicies> DecisionPolicies::Create(const ControllerOptions& options) {
  DecisionPolicies p;
  STOKER_ASSIGN_OR_RETURN(
      auto placement, scheduler::CreatePlacementPolicy(options.policy, scheduler::PolicyConfig{}));
  p.pass = std::make_unique<pass::SchedulingPass>(std::move(placement));
  STOKER_ASSIGN_OR_RETURN(
      p.scorer, scheduler::CreatePlacementPolicy(options.policy, scheduler::PolicyConfig{}));
  STOKER_ASSIGN_OR_RETURN(p.queue, queue::CreateQueuePolicy(options.queue));
  return p;
}

Decision Decide(const SlurmSnapshot& snap, DecisionPolicies& policies,
                const ControllerOptions& options) {
  Decision d;
  std::map<std::string, NodeUse> uses = NodeUses(snap);
  std::map<std::string, const SlurmNode*> node_by_name;
  for (const SlurmNode& n : snap.nodes) node_by_name[n.name] = &n;

  // The pass's view: every GPU node the model can hold (drained and down ones host nothing new),
  // and per node one holder of what Slurm has in use there.
  pass::PassInput in;
  int64_t holder = 0;
  for (const SlurmNode& n : snap.nodes) {
    if (!Modelled(n)) continue;
    pass::NodeView v;
    v.name = n.name;
    v.cpu_milli = n.cpus * 1000;
    v.memory_mib = n.real_memory_mib;
    v.drained = !n.Usable();
    for (int32_t g = 0; g < n.gpus; ++g) {
      v.gpus.push_back(pass::GpuView{static_cast<uint32_t>(g), ModelName(n), 0, false, {}});
    }
    in.nodes.push_back(std::move(v));
    const NodeUse& u = uses.at(n.name);
    pass::JobView h;
    h.id = --holder;  // negative: never a Slurm job id
    h.phase = pass::JobPhase::kRunning;
    h.cpu_milli = std::min(n.alloc_cpus, n.cpus) * 1000;
    h.placement = pass::JobPlacement{n.name, {}, 0, {}};
    for (int32_t g = 0; g < n.gpus; ++g) {
      const int32_t milli =
          u.whole[g] ? scheduler::kMilliPerGpu : ShardMilli(u.shards[g], u.shards_per_gpu);
      if (milli > 0) h.placement->shares.emplace_back(static_cast<uint8_t>(g), milli);
    }
    if (h.cpu_milli > 0 || !h.placement->shares.empty()) in.active.push_back(std::move(h));
  }
  // The smallest shard count per GPU among usable nodes: a shard job's share of one GPU.
  int32_t shards_per_gpu = 0;
  for (const SlurmNode& n : snap.nodes) {
    if (n.Usable() && Modelled(n) && n.ShardsPerGpu() > 0) {
      shards_per_gpu =
          shards_per_gpu == 0 ? n.ShardsPerGpu() : std::min(shards_per_gpu, n.ShardsPerGpu());
    }
  }

  // The queue: held GPU jobs carrying the marker. Those Stoker can never place are released to
  // Slurm as they are.
  std::map<int64_t, const SlurmJob*> queued;
  std::map<std::pair<int32_t, int32_t>, int64_t> shape_counts;  // (gpus, gpu milli) pending
  for (const SlurmJob& j : snap.jobs) {
    if (!j.Pending()) continue;
    const Ask a = AskOf(j);
    if (a.gpus > 0) {
      ++shape_counts[{std::min(a.gpus, scheduler::kMaxGpusPerNode), scheduler::kMilliPerGpu}];
    } else if (a.shards > 0 && shards_per_gpu > 0) {
      ++shape_counts[{1, ShardMilli(a.shards, shards_per_gpu)}];
    }
    if (!options.steer_held_jobs || !j.Held() || !HasMarker(j, options.steer_marker)) continue;
    if (a.gpus == 0 && a.shards == 0) {
      d.steer.push_back({j.id, {}, "asks for no GPU: left to Slurm"});
      continue;
    }
    if (j.gpus_per_job > scheduler::kMaxGpusPerNode || a.gpus > scheduler::kMaxGpusPerNode ||
        j.nodes.size() > 1) {
      d.steer.push_back({j.id, {}, "multi-node GPU job: left to Slurm"});
      continue;
    }
    if (a.gpus > 0 && a.shards > 0) {
      d.steer.push_back({j.id, {}, "asks for whole GPUs and shards: left to Slurm"});
      continue;
    }
    if (std::none_of(snap.nodes.begin(), snap.nodes.end(),
                     [&](const SlurmNode& n) { return CouldEverRun(n, j, a); })) {
      d.steer.push_back({j.id, {}, "no node can ever host it"});
      continue;
    }
    pass::JobView v;
    v.id = j.id;
    v.cpu_milli = a.cpus * 1000;
    v.submit_ms = j.submit_time * 1000;
    v.job_class = j.partition;
    if (a.gpus > 0) {
      v.gpus = a.gpus;
      if (!j.gpu_type.empty()) v.gpu_models = {j.gpu_type};
    } else {
      v.gpu_milli = ShardMilli(a.shards, shards_per_gpu);
      v.gpu_models = {j.gpu_type + "+shard"};
    }
    queued[j.id] = &j;
    in.queued.push_back(std::move(v));
  }

  pass::PassOptions po;
  po.placement_policy = options.policy;
  po.backfill = options.backfill;
  const pass::Decision pd = policies.pass->Run(in, *policies.queue, po);
  d.pass = pd.stats;
  for (const std::string& w : pd.warnings) spdlog::warn("slurm: scheduling pass: {}", w);
  for (const auto& [id, why] : pd.reasons) {
    if (queued.count(id)) d.waiting[static_cast<uint32_t>(id)] = why;
  }

  // Slurm chooses the GPUs on the node; release a job only where that choice keeps whole GPUs
  // and shard jobs apart. Where it would not, the best-packed node where it would.
  auto clean = [&](const NodeUse& u, const Ask& a, std::vector<int32_t>* whole, int32_t* shard) {
    if (a.gpus > 0) {
      *whole = u.PredictWhole(a.gpus);
      if (whole->empty()) return false;
      return std::all_of(whole->begin(), whole->end(), [&](int32_t g) { return u.shards[g] == 0; });
    }
    *shard = u.PredictShards(a.shards);
    return *shard >= 0;
  };
  for (const pass::Action& act : pd.actions) {
    if (act.kind != pass::Action::Kind::kAssign) continue;
    auto q = queued.find(act.job);
    if (q == queued.end()) continue;
    const SlurmJob& j = *q->second;
    const Ask a = AskOf(j);
    const std::string& picked = act.assignment.placement.node;
    std::string node = picked;
    std::vector<int32_t> whole;
    int32_t shard = -1;
    std::string why = "pass, policy " + options.policy;
    auto candidates = [&](auto&& visit) {
      for (const SlurmNode& n : snap.nodes) {
        if (!CouldEverRun(n, j, a) || n.cpus - n.alloc_cpus < a.cpus) continue;
        std::vector<int32_t> w;
        int32_t sg = -1;
        if (clean(uses.at(n.name), a, &w, &sg)) visit(n.name, uses.at(n.name), sg);
      }
    };
    if (a.shards > 0 && options.keep_shards_apart) {
      // Slurm puts a shard job on the lowest GPU of the node that has room, and a later
      // whole-GPU job on the lowest GPUs not held whole, shards or not: shards on a low GPU of
      // a free node keep whole-GPU jobs off the node. Of the nodes with room, the one where the
      // new shards cost whole-GPU jobs the least clean room; then the pass's node; then the
      // tightest GPU.
      std::tuple<int32_t, bool, int32_t> best{INT32_MAX, true, INT32_MAX};
      candidates([&](const std::string& name, const NodeUse& u, int32_t sg) {
        NodeUse after = u;
        after.TakeShards(sg, a.shards);
        const std::tuple<int32_t, bool, int32_t> key{
            u.CleanWholeCapacity() - after.CleanWholeCapacity(), name != picked,
            u.shards_per_gpu - u.shards[sg] - a.shards};
        if (key < best) best = key, node = name;
      });
      if (node != picked && std::get<0>(best) != INT32_MAX) {
        d.kept_off_shared_gpus.insert(j.id);
        why = "shards where they keep whole-GPU jobs' room (the pass picked " + picked + ")";
      }
    }
    if (!options.keep_shards_apart) {
      (void)clean(uses.at(node), a, &whole, &shard);  // Slurm's pick, shared or not
    } else if (!clean(uses.at(node), a, &whole, &shard)) {
      // A whole-GPU job Slurm would put on GPUs with shard jobs: the best-packed node where it
      // would not.
      d.kept_off_shared_gpus.insert(j.id);
      std::string best;
      int64_t best_free = INT64_MAX;
      candidates([&](const std::string& name, const NodeUse& u, int32_t) {
        const int64_t free = std::count(u.whole.begin(), u.whole.end(), false) - a.gpus;
        if (free < best_free) best_free = free, best = name;
      });
      if (best.empty()) {
        d.waiting[j.id] = "Slurm would give it GPUs in use by shard jobs on " + node +
                          ", and no node has clean room";
        continue;
      }
      why = "Slurm would share GPUs with shard jobs on " + node + "; best-packed clean node";
      node = best;
      (void)clean(uses.at(node), a, &whole, &shard);
    }
    // The pass matches GPU models by substring (a job asking for a10 may be given an a100
    // node); Slurm would never start the job there.
    if (auto n = node_by_name.find(node);
        n == node_by_name.end() || !CouldEverRun(*n->second, j, a)) {
      d.waiting[j.id] = "the pass picked " + node + ", where Slurm cannot run it (GPU type " +
                        (j.gpu_type.empty() ? std::string("any") : j.gpu_type) + ")";
      continue;
    }
    NodeUse& u = uses.at(node);
    if (a.gpus > 0) {
      u.TakeWhole(whole);
    } else {
      u.TakeShards(shard, a.shards);
    }
    d.waiting.erase(j.id);
    d.steer.push_back({j.id, {node}, why});
  }
  // Not a structured binding: the lambda below captures the id, and clang (before 16) refuses
  // to capture a binding.
  for (const auto& queued_job : queued) {
    const int64_t id = queued_job.first;
    const bool steered = std::any_of(d.steer.begin(), d.steer.end(),
                                     [&](const Decision::Steer& s) { return s.job == id; });
    if (!steered && !d.waiting.count(static_cast<uint32_t>(id))) {
      d.waiting[static_cast<uint32_t>(id)] = "waiting for resources";
    }
  }

  d.plan = PlanSubmissions(snap, uses, options);
  if (!options.submit_plan.empty()) {
    for (const SlurmJob& j : snap.jobs) {
      if (!j.Pending() || j.Held() || !j.required_nodes.empty() || j.nodes.size() > 1 ||
          !HasMarker(j, options.steer_marker)) {
        continue;
      }
      const Ask a = AskOf(j);
      if ((a.gpus > 0) == (a.shards > 0)) continue;
      const auto& shapes = a.gpus > 0 ? d.plan.whole : d.plan.shards;
      auto it = shapes.find(a.gpus > 0 ? a.gpus : a.shards);
      if (it == shapes.end() || it->second.safe.empty()) continue;
      // Allowed: the safe nodes, and the once nodes the script already gave the job (a job
      // just placed is not narrowed).
      std::set<std::string> allowed(it->second.safe.begin(), it->second.safe.end());
      const std::set<std::string> excluded(j.excluded_nodes.begin(), j.excluded_nodes.end());
      for (const std::string& n : it->second.once) {
        if (!excluded.count(n)) allowed.insert(n);
      }
      std::vector<std::string> want;
      for (const std::string& n : d.plan.nodes) {
        if (!allowed.count(n)) want.push_back(n);
      }
      std::vector<std::string> now = j.excluded_nodes;
      std::sort(now.begin(), now.end());
      std::sort(want.begin(), want.end());
      if (now != want) d.exclude[j.id] = std::move(want);
    }
  }

  // Weights: the policy's score for the most common pending GPU shape (1 GPU when none), over
  // the model with this cycle's steers applied.
  ClusterModel model = BuildClusterModel(snap.nodes, uses);
  if (options.manage_weights && model.cluster.num_nodes() > 0) {
    std::pair<int32_t, int32_t> shape{1, scheduler::kMilliPerGpu};
    int64_t best = 0;
    for (const auto& [s, c] : shape_counts) {
      if (c > best) best = c, shape = s;
    }
    scheduler::Request r = scheduler::Request::WholeGpus(shape.first, 1000, 0);
    if (shape.second < scheduler::kMilliPerGpu) {
      r = scheduler::Request::GpuShare(shape.second, 1000, 0);
    }
    std::vector<std::pair<int64_t, int32_t>> scored;  // (score, node); higher score = better
    std::vector<int32_t> unfit;
    scheduler::PlacementPolicy& policy = *policies.scorer;
    const bool stoker_score = policy.Name() == "stoker";
    for (int32_t i = 0; i < model.cluster.num_nodes(); ++i) {
      int64_t score = 0, bound = 0;
      if (!model.cluster.Fits(i, r)) {
        unfit.push_back(i);
      } else if (stoker_score &&
                 scheduler::StokerScoreAndBound(policy, r, model.cluster, i, &score, &bound)) {
        scored.emplace_back(score, i);
      } else {
        // Other policies: pack (fewest free GPUs that still fit first).
        scored.emplace_back(-static_cast<int64_t>(model.cluster.node(i).full_free_gpus), i);
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

SubmitPlan PlanSubmissions(const SlurmSnapshot& snap, const std::map<std::string, NodeUse>& uses,
                           const ControllerOptions& options) {
  SubmitPlan plan;
  if (!options.keep_shards_apart) return plan;
  int32_t max_gpus = 0, max_shards = 0;
  for (const SlurmNode& n : snap.nodes) {
    if (n.gpus > 0) plan.nodes.push_back(n.name);
    if (!n.Usable() || !Modelled(n)) continue;
    max_gpus = std::max(max_gpus, n.gpus);
    max_shards = std::max(max_shards, n.ShardsPerGpu());
  }
  auto in_use = [](const NodeUse& u) {
    return std::any_of(u.shards.begin(), u.shards.end(), [](int32_t s) { return s > 0; });
  };
  // Whole GPUs: nodes without shard jobs are safe (Slurm's pick there is clean whatever it
  // is); nodes with shard jobs only where the job fits now on GPUs without shards, for one job.
  for (int32_t g = 1; g <= max_gpus; ++g) {
    SubmitPlan::Allowed& a = plan.whole[g];
    for (const SlurmNode& n : snap.nodes) {
      if (!n.Usable() || !Modelled(n) || n.gpus < g) continue;
      const NodeUse& u = uses.at(n.name);
      if (!in_use(u)) {
        a.safe.push_back(n.name);
        continue;
      }
      const std::vector<int32_t> pick = u.PredictWhole(g);
      if (!pick.empty() && n.cpus > n.alloc_cpus &&
          std::all_of(pick.begin(), pick.end(), [&](int32_t i) { return u.shards[i] == 0; })) {
        a.once.push_back(n.name);
      }
    }
  }
  // Shards: where they fit now and cost whole-GPU jobs the least clean room (as Decide() places
  // them); where none fits now, the nodes that already run shard jobs (they wait there); where
  // none does either, anywhere.
  for (int32_t k = 1; k <= max_shards; ++k) {
    SubmitPlan::Allowed& a = plan.shards[k];
    int32_t best = INT32_MAX;
    std::vector<std::string> with_shards, any;
    for (const SlurmNode& n : snap.nodes) {
      if (!n.Usable() || !Modelled(n) || n.ShardsPerGpu() < k) continue;
      const NodeUse& u = uses.at(n.name);
      any.push_back(n.name);
      if (in_use(u)) with_shards.push_back(n.name);
      const int32_t gpu = u.PredictShards(k);
      if (gpu < 0 || n.cpus <= n.alloc_cpus) continue;
      NodeUse after = u;
      after.TakeShards(gpu, k);
      const int32_t cost = u.CleanWholeCapacity() - after.CleanWholeCapacity();
      if (cost < best) best = cost, a.safe.clear();
      if (cost == best) a.safe.push_back(n.name);
    }
    if (a.safe.empty()) a.safe = with_shards.empty() ? any : with_shards;
  }
  return plan;
}

std::string RenderSubmitPlan(const SubmitPlan& plan, const ControllerOptions& options,
                             uint64_t generation, int64_t written_unix) {
  auto list = [](const std::vector<std::string>& v) {
    std::string out;
    for (const std::string& n : v) out += (out.empty() ? "" : ",") + n;
    return out.empty() ? std::string("-") : out;
  };
  std::string out = "stoker-submit-plan 1\n";
  out += "generation " + std::to_string(generation) + "\n";
  out += "written " + std::to_string(written_unix) + "\n";
  out += "valid_for " + std::to_string(options.submit_plan_valid_s) + "\n";
  if (!options.steer_marker.empty()) out += "marker " + options.steer_marker + "\n";
  out += "nodes " + list(plan.nodes) + "\n";
  for (const auto& [g, a] : plan.whole) {
    out += "gpu " + std::to_string(g) + " " + list(a.safe) + " " + list(a.once) + "\n";
  }
  for (const auto& [k, a] : plan.shards) {
    out += "shard " + std::to_string(k) + " " + list(a.safe) + " " + list(a.once) + "\n";
  }
  return out;
}

Result<std::unique_ptr<SlurmController>> SlurmController::Create(SlurmClient* client,
                                                                 ControllerOptions options) {
  STOKER_ASSIGN_OR_RETURN(DecisionPolicies policies, DecisionPolicies::Create(options));
  return std::unique_ptr<SlurmController>(
      new SlurmController(client, std::move(options), std::move(policies)));
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
  const auto t0 = std::chrono::steady_clock::now();
  ++metrics_.cycles;
  // Both reads at once: the cycle's read time is what a steered job waits on.
  Result<std::vector<SlurmJob>> jobs = Unavailable("not read");
  std::thread jobs_reader([&] { jobs = client_->Jobs(); });
  auto nodes = client_->Nodes();
  jobs_reader.join();
  if (!nodes.ok()) {
    CountReadError(nodes.status());
    return nodes.status();
  }
  if (!jobs.ok()) {
    CountReadError(jobs.status());
    return jobs.status();
  }
  last_.nodes = std::move(nodes).value();
  last_.jobs = std::move(jobs).value();
  Decision d = Decide(last_, policies_, options_);
  metrics_.jobs_waiting = static_cast<int64_t>(d.waiting.size());
  // A job left held is decided again every cycle: count it once per hold (a job released and
  // held again, e.g. requeued, counts anew).
  for (uint32_t id : d.kept_off_shared_gpus) {
    if (kept_off_counted_.insert(id).second) ++metrics_.kept_off_shared_gpus;
  }
  for (auto it = kept_off_counted_.begin(); it != kept_off_counted_.end();) {
    it = d.waiting.count(*it) ? std::next(it) : kept_off_counted_.erase(it);
  }
  for (const SlurmNode& n : last_.nodes) {
    if (n.gpus > scheduler::kMaxGpusPerNode) ++metrics_.nodes_skipped;
  }
  if (!options_.submit_plan.empty()) {
    const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
    const Status s = WriteFileReplacing(
        options_.submit_plan, RenderSubmitPlan(d.plan, options_, ++plan_generation_, now));
    if (!s.ok()) {
      ++metrics_.submit_plan_errors;
      spdlog::error("slurm: submit plan not written: {}", s.ToString());
    }
  }
  for (const auto& [node, s] : client_->SetNodeWeights(d.weights)) {
    if (s.ok()) {
      ++metrics_.weight_updates;
    } else {
      CountActionError(s);
      spdlog::warn("slurm: weight {} on node {} not set: {}", d.weights[node], node, s.ToString());
    }
  }
  if (!d.exclude.empty()) {
    const SlurmClient::SteerList exclude(d.exclude.begin(), d.exclude.end());
    const std::vector<Status> set = client_->SetExcludedNodesAll(exclude);
    for (size_t i = 0; i < set.size(); ++i) {
      if (set[i].ok()) {
        ++metrics_.exclusions_updated;
      } else if (set[i].code() == StatusCode::kFailedPrecondition) {
        spdlog::debug("slurm: job {} started before its excluded nodes were updated",
                      exclude[i].first);
      } else {
        CountActionError(set[i]);
        spdlog::warn("slurm: job {} excluded nodes not updated: {}", exclude[i].first,
                     set[i].ToString());
      }
    }
  }
  SlurmClient::SteerList steer;
  for (const Decision::Steer& st : d.steer) steer.emplace_back(st.job, st.nodes);
  const std::vector<Status> done = client_->SteerAndReleaseAll(steer);
  for (size_t i = 0; i < d.steer.size() && i < done.size(); ++i) {
    const Decision::Steer& st = d.steer[i];
    const Status& s = done[i];
    if (s.ok()) {
      ++(st.nodes.empty() ? metrics_.jobs_released_unsteered : metrics_.jobs_steered);
      spdlog::info("slurm: job {} released{}{} ({})", st.job, st.nodes.empty() ? "" : " onto ",
                   st.nodes.empty() ? "" : st.nodes[0], st.why);
    } else {
      CountActionError(s);
      spdlog::warn("slurm: job {} not steered: {}", st.job, s.ToString());
    }
  }
  metrics_.last_cycle_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return d;
}

}  // namespace stoker::slurm
