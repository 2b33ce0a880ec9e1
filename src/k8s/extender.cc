#include "k8s/extender.h"

#include <fmt/core.h>

#include <algorithm>
#include <limits>
#include <map>

#include "scheduler/registry.h"
#include "scheduler/stoker_policy.h"

namespace stoker::k8s {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

std::string GiB(uint64_t bytes) {
  return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / double(1 << 30));
}

// What one GPU can still give during one placement attempt.
struct Cap {
  int32_t milli = 0;  // unclaimed share (1000: nothing claimed)
  uint64_t memory = 0;
};

// The working state of one placement attempt on a node (kept per thread and reused: a filter
// over 5,000 nodes should not allocate per node).
struct Work {
  std::vector<Cap> caps;
  std::vector<uint8_t> mig_taken;   // every MIG instance of the node, GPU by GPU
  std::vector<uint32_t> mig_first;  // per GPU: its first instance in mig_taken
  bool without_pods = false;
};

void Capacities(const ExtenderNode& n, bool without_pods, Work* w) {
  w->without_pods = without_pods;
  w->caps.resize(n.caps.size());
  for (size_t i = 0; i < n.caps.size(); ++i) {
    const GpuCaps& c = n.caps[i];
    w->caps[i] =
        without_pods ? Cap{c.milli_without_pods, c.memory_without_pods} : Cap{c.milli, c.memory};
  }
  w->mig_taken.clear();
  w->mig_first.clear();
  if (!n.any_mig) return;
  for (const ExtenderGpu& g : n.gpus) {
    w->mig_first.push_back(static_cast<uint32_t>(w->mig_taken.size()));
    for (const MigView& m : g.mig) w->mig_taken.push_back(!without_pods && m.claimed);
  }
}

// Why GPU `i` cannot take a container needing `milli` (1000 for whole) and `need` bytes.
std::string WhyNot(const ExtenderGpu& g, const Cap& c, int32_t milli, uint64_t need, bool whole) {
  const std::string at = "GPU " + std::to_string(g.index) + ": ";
  if (!g.usable) return at + g.why_unusable;
  if (g.mig_enabled) return at + "in MIG mode (ask for a stoker.io/mig-<profile> instance)";
  if (g.whole_claimed) return at + "held whole by a pod";
  if (whole && c.milli < 1000) {
    return at + std::to_string(1000 - c.milli) + " milli-GPU shared out to pods";
  }
  if (c.milli < milli) return at + std::to_string(c.milli) + " milli-GPU left unshared";
  if (c.memory < need) {
    std::string s = at + GiB(c.memory) + " free of " + GiB(g.memory_total);
    if (g.memory_unowned > 0)
      s += ", " + GiB(g.memory_unowned) + " of it held by processes no pod owns";
    return s;
  }
  return at + "taken by another container of the pod";
}

std::string WhyNoGpu(const ExtenderNode& n, const PodGpuRequest& pod, const ContainerGpuRequest& c,
                     const ExtenderOptions& options, const Work& w, bool whole,
                     const uint32_t* chosen, int nchosen) {
  std::string why;
  for (size_t i = 0; i < n.gpus.size(); ++i) {
    if (std::find(chosen, chosen + nchosen, i) != chosen + nchosen) continue;
    const uint64_t need = MemoryNeed(pod, c, n.caps[i].memory_total, options);
    why += (why.empty() ? "" : "; ") +
           WhyNot(n.gpus[i], w.caps[i], whole ? 1000 : c.gpu_milli, need, whole);
  }
  return why.empty() ? "no GPUs" : why;
}

// Places `containers` (in order) into `w`; fills *out when not null; on failure says why.
bool Place(const ExtenderNode& n, const PodGpuRequest& pod,
           const std::vector<const ContainerGpuRequest*>& containers,
           const ExtenderOptions& options, Work& w, std::vector<ContainerPlacement>* out,
           std::string* reason) {
  uint32_t chosen[kMaxDevicesPerContainer];
  uint32_t chosen_mig[kMaxDevicesPerContainer];
  for (const ContainerGpuRequest* c : containers) {
    int nchosen = 0;
    uint64_t memory = 0;
    if (c->whole_gpus > 0) {
      for (size_t i = 0; i < n.caps.size() && nchosen < c->whole_gpus; ++i) {
        const uint64_t need = MemoryNeed(pod, *c, n.caps[i].memory_total, options);
        if (w.caps[i].milli == 1000 && w.caps[i].memory >= need && need > 0) {
          chosen[nchosen++] = static_cast<uint32_t>(i);
          memory = need;
        }
      }
      if (nchosen < c->whole_gpus) {
        *reason = "container " + c->container + " needs " + std::to_string(c->whole_gpus) +
                  " whole GPU(s), " + std::to_string(nchosen) + " free (" +
                  WhyNoGpu(n, pod, *c, options, w, true, chosen, nchosen) + ")";
        return false;
      }
      for (int k = 0; k < nchosen; ++k) w.caps[chosen[k]] = Cap{};
    } else if (c->gpu_milli > 0) {
      int best = -1;
      for (size_t i = 0; i < n.caps.size(); ++i) {
        const Cap& cap = w.caps[i];
        if (cap.milli < c->gpu_milli) continue;
        const uint64_t need = MemoryNeed(pod, *c, n.caps[i].memory_total, options);
        if (cap.memory < need || need == 0) continue;
        // Best fit: the GPU with the least unshared capacity left, then the least free memory.
        if (best < 0 || cap.milli < w.caps[best].milli ||
            (cap.milli == w.caps[best].milli && cap.memory < w.caps[best].memory)) {
          best = static_cast<int>(i);
        }
      }
      if (best < 0) {
        *reason = "container " + c->container + " needs a share of " +
                  std::to_string(c->gpu_milli) + " milli-GPU" +
                  (pod.gpu_memory_bytes > 0 ? " with " + GiB(pod.gpu_memory_bytes) : "") +
                  " on one GPU (" + WhyNoGpu(n, pod, *c, options, w, false, chosen, 0) + ")";
        return false;
      }
      memory = MemoryNeed(pod, *c, n.caps[best].memory_total, options);
      chosen[nchosen++] = static_cast<uint32_t>(best);
      w.caps[best].milli -= c->gpu_milli;
      w.caps[best].memory -= memory;
    } else if (c->mig_count > 0) {
      for (size_t i = 0; i < n.gpus.size() && nchosen < c->mig_count; ++i) {
        const ExtenderGpu& g = n.gpus[i];
        if (!g.usable || !g.mig_enabled) continue;
        for (size_t k = 0; k < g.mig.size() && nchosen < c->mig_count; ++k) {
          const MigView& m = g.mig[k];
          uint8_t& taken = w.mig_taken[w.mig_first[i] + k];
          if (m.profile != c->mig_profile || taken) continue;
          if (m.memory_used > options.mig_slack_bytes) continue;
          taken = 1;
          chosen_mig[nchosen] = static_cast<uint32_t>(k);
          chosen[nchosen++] = static_cast<uint32_t>(i);
        }
      }
      if (nchosen < c->mig_count) {
        int exist = 0, held = 0, busy = 0;
        for (size_t i = 0; i < n.gpus.size(); ++i) {
          for (size_t k = 0; k < n.gpus[i].mig.size(); ++k) {
            const MigView& m = n.gpus[i].mig[k];
            if (m.profile != c->mig_profile || !n.gpus[i].usable) continue;
            ++exist;
            if (m.claimed && !w.without_pods) ++held;
            if (m.memory_used > options.mig_slack_bytes) ++busy;
          }
        }
        *reason = "container " + c->container + " needs " + std::to_string(c->mig_count) + " " +
                  c->mig_profile + " MIG instance(s): " + std::to_string(exist) +
                  " on usable GPUs, " + std::to_string(held) + " held by pods, " +
                  std::to_string(busy) + " with memory in use";
        return false;
      }
    }
    if (out == nullptr) continue;
    ContainerPlacement p;
    p.container = c->container;
    p.gpus.assign(chosen, chosen + nchosen);
    p.gpu_milli = c->gpu_milli;
    p.memory_bytes = memory;
    if (c->mig_count > 0) {
      for (int k = 0; k < nchosen; ++k) {
        p.mig_uuids.push_back(n.gpus[chosen[k]].mig[chosen_mig[k]].uuid);
      }
    }
    out->push_back(std::move(p));
  }
  return true;
}

// Whole GPUs first (largest first), then MIG, then shares (largest first): the scarce kinds
// choose before the flexible ones.
const std::vector<const ContainerGpuRequest*>& Ordered(
    const std::vector<ContainerGpuRequest>& list) {
  thread_local std::vector<const ContainerGpuRequest*> out;
  out.clear();
  for (const ContainerGpuRequest& c : list) out.push_back(&c);
  if (out.size() < 2) return out;
  std::stable_sort(out.begin(), out.end(), [](const auto* a, const auto* b) {
    auto rank = [](const ContainerGpuRequest* c) {
      return c->whole_gpus > 0 ? 0 : c->mig_count > 0 ? 1 : 2;
    };
    if (rank(a) != rank(b)) return rank(a) < rank(b);
    if (a->whole_gpus != b->whole_gpus) return a->whole_gpus > b->whole_gpus;
    return a->gpu_milli > b->gpu_milli;
  });
  return out;
}

// Every phase of the pod (each init container alone, then the app containers together).
bool PlaceAllPhases(const ExtenderNode& n, const PodGpuRequest& pod, const ExtenderOptions& options,
                    bool without_pods, std::vector<ContainerPlacement>* app, std::string* reason) {
  thread_local Work w;
  thread_local std::vector<const ContainerGpuRequest*> one(1);
  for (const ContainerGpuRequest& init : pod.init_containers) {
    Capacities(n, without_pods, &w);
    one[0] = &init;
    if (!Place(n, pod, one, options, w, nullptr, reason)) return false;
  }
  Capacities(n, without_pods, &w);
  return Place(n, pod, Ordered(pod.containers), options, w, app, reason);
}

int ZoneValue(efficiency::Zone z) {
  switch (z) {
    case efficiency::Zone::kHot:
      return 0;
    case efficiency::Zone::kGold:
      return 50;
    default:
      return 100;  // unknown, bronze, silver: room to spare
  }
}

int MigSlicesOf(const std::string& profile) {
  auto p = scheduler::ParseMigProfile(profile);
  return p.ok() ? scheduler::MigSlices(*p) : scheduler::kMigSlicesPerGpu;
}

}  // namespace

uint64_t MemoryNeed(const PodGpuRequest& pod, const ContainerGpuRequest& c,
                    uint64_t gpu_memory_total, const ExtenderOptions& options) {
  if (pod.gpu_memory_bytes > 0) return pod.gpu_memory_bytes;
  if (c.gpu_milli > 0) return gpu_memory_total / 1000 * static_cast<uint64_t>(c.gpu_milli);
  return gpu_memory_total > options.whole_gpu_slack_bytes
             ? gpu_memory_total - options.whole_gpu_slack_bytes
             : 0;
}

NodeFit FitPod(const ExtenderNode& node, const PodGpuRequest& pod, const ExtenderOptions& options,
               WallTime now, bool with_placement) {
  NodeFit fit;
  if (!pod.any()) {
    fit.fits = true;
    return fit;
  }
  if (node.drained) {
    fit.reason = "drained in Stoker";
    return fit;
  }
  if (node.lost) {
    fit.reason = "Stoker has lost contact with the node's agent";
    return fit;
  }
  const Duration age = now - node.sampled_at;
  if (age > options.stale_after) {
    fit.reason = "no GPU measurement for " +
                 std::to_string(std::chrono::duration_cast<std::chrono::seconds>(age).count()) +
                 " s (the agent's samples are stale)";
    return fit;
  }
  if (node.gpus.empty()) {
    fit.reason = "the node's agent measures no GPU";
    return fit;
  }
  if (PlaceAllPhases(node, pod, options, false, with_placement ? &fit.containers : nullptr,
                     &fit.reason)) {
    fit.fits = true;
    fit.reason.clear();
    return fit;
  }
  std::string never;
  fit.resolvable = PlaceAllPhases(node, pod, options, true, nullptr, &never);
  fit.containers.clear();
  return fit;
}

FilterOutcome FilterNodes(const ClusterView& view, const PodGpuRequest& pod,
                          const std::vector<std::string>& names, const ExtenderOptions& options,
                          WallTime now) {
  FilterOutcome out;
  out.passed.reserve(names.size());
  if (!pod.any()) {
    for (size_t i = 0; i < names.size(); ++i) out.passed.push_back(i);
    return out;
  }
  const std::vector<const ExtenderNode*>& nodes = view.Resolve(names);
  for (size_t i = 0; i < names.size(); ++i) {
    const ExtenderNode* n = nodes[i];
    if (n == nullptr) {
      out.unresolvable[names[i]] = "stoker: no Stoker agent reports this node";
      continue;
    }
    const NodeFit fit = FitPod(*n, pod, options, now, /*with_placement=*/false);
    if (fit.fits) {
      out.passed.push_back(i);
    } else if (fit.resolvable) {
      out.failed[names[i]] = "stoker: " + fit.reason;
    } else {
      out.unresolvable[names[i]] = "stoker: " + fit.reason;
    }
  }
  return out;
}

scheduler::Request PolicyRequest(const PodGpuRequest& pod) {
  int32_t whole = 0, milli = 0;
  std::string mig;
  for (const ContainerGpuRequest& c : pod.containers) {
    whole += c.whole_gpus;
    milli = std::max(milli, c.gpu_milli);
    if (c.mig_count > 0 && mig.empty()) mig = c.mig_profile;
  }
  if (whole > 0) {
    return scheduler::Request::WholeGpus(std::min(whole, scheduler::kMaxGpusPerNode), 0, 0);
  }
  if (!mig.empty()) {
    auto p = scheduler::ParseMigProfile(mig);
    if (p.ok()) return scheduler::Request::Mig(*p, 0, 0);
  }
  if (milli >= 1000) return scheduler::Request::WholeGpus(1, 0, 0);
  if (milli > 0) return scheduler::Request::GpuShare(milli, 0, 0);
  return scheduler::Request::CpuOnly(0, 0);
}

Scorer::Scorer(ExtenderOptions options)
    : options_(options), policy_(scheduler::MakeStokerPolicy(scheduler::PolicyConfig{})) {}

Scorer::~Scorer() = default;

namespace {

scheduler::NodeSpec SpecOf(const ExtenderNode& n, scheduler::GpuModelTable& models) {
  scheduler::NodeSpec s;
  s.name = n.name;
  // kube-scheduler owns CPU and memory fit; the mirror gives them room so only GPUs count.
  s.cpu_milli = int64_t{1} << 40;
  s.memory_mib = int64_t{1} << 40;
  s.num_gpus = static_cast<int32_t>(std::min<size_t>(n.gpus.size(), scheduler::kMaxGpusPerNode));
  if (s.num_gpus > 0) {
    const std::string model = n.gpus[0].model.empty() ? "unknown" : n.gpus[0].model;
    auto id = models.Intern(model.substr(0, 64));
    s.gpu_model = id.ok() ? *id : 0;
    s.gpu_memory_mib = static_cast<int64_t>(n.gpus[0].memory_total / kMiB);
    s.mig_enabled = n.gpus[0].mig_enabled;
  }
  return s;
}

// The capacity the view says is not free on each GPU of the node's mirror.
scheduler::Placement Taken(const ExtenderNode& n, const scheduler::NodeSpec& spec, int32_t index,
                           const ExtenderOptions& options) {
  scheduler::Placement p;
  p.node = index;
  const bool node_ok = !n.drained && !n.lost;
  for (int32_t i = 0; i < spec.num_gpus; ++i) {
    const ExtenderGpu& g = n.gpus[i];
    scheduler::GpuShare share;
    share.gpu = static_cast<uint8_t>(i);
    if (spec.mig_enabled) {
      int free_slices = 0;
      if (node_ok && g.usable && g.mig_enabled) {
        for (const MigView& m : g.mig) {
          if (!m.claimed && m.memory_used <= options.mig_slack_bytes) {
            free_slices += MigSlicesOf(m.profile);
          }
        }
      }
      share.mig_slices = static_cast<uint8_t>(scheduler::kMigSlicesPerGpu -
                                              std::min(free_slices, scheduler::kMigSlicesPerGpu));
      if (share.mig_slices == 0) continue;
    } else {
      int32_t free_milli = 0;
      if (node_ok && g.usable && !g.mig_enabled && !g.whole_claimed && g.memory_total > 0) {
        const int64_t by_memory = static_cast<int64_t>(g.FreeMemory() / (g.memory_total / 1000));
        free_milli = static_cast<int32_t>(std::min<int64_t>(std::max(0, 1000 - g.claimed_milli),
                                                            std::min<int64_t>(by_memory, 1000)));
      }
      share.milli = static_cast<int16_t>(1000 - free_milli);
      if (share.milli == 0) continue;
    }
    p.gpus[p.num_gpus++] = share;
  }
  return p;
}

}  // namespace

void Scorer::Sync(const ClusterView& view) {
  if (view.version() == view_version_ && !mirror_.empty()) return;
  view_version_ = view.version();
  bool rebuild = view.membership() != membership_;
  for (const auto& [name, n] : view.nodes()) {
    if (rebuild) break;
    auto it = mirror_.find(&n);
    if (it == mirror_.end()) {
      rebuild = true;
      break;
    }
    const scheduler::NodeSpec& spec = cluster_.spec(it->second.index);
    if (spec.num_gpus !=
            static_cast<int32_t>(std::min<size_t>(n.gpus.size(), scheduler::kMaxGpusPerNode)) ||
        (spec.num_gpus > 0 && spec.mig_enabled != n.gpus[0].mig_enabled)) {
      rebuild = true;
      break;
    }
  }
  if (rebuild) {
    ++rebuilds_;
    membership_ = view.membership();
    cluster_ = scheduler::ClusterState();
    mirror_.clear();
    std::vector<const ExtenderNode*> sorted;
    for (const auto& [name, n] : view.nodes()) sorted.push_back(&n);
    std::sort(sorted.begin(), sorted.end(),
              [](const ExtenderNode* a, const ExtenderNode* b) { return a->name < b->name; });
    for (const ExtenderNode* n : sorted) {
      auto index = cluster_.AddNode(SpecOf(*n, cluster_.models()));
      if (!index.ok()) continue;
      Mirrored m;
      m.index = *index;
      m.version = n->version;
      m.taken = Taken(*n, cluster_.spec(*index), *index, options_);
      if (!cluster_.Allocate(m.taken).ok()) m.taken = scheduler::Placement{*index};
      mirror_[n] = m;
    }
    return;
  }
  for (const auto& [name, n] : view.nodes()) {
    Mirrored& m = mirror_[&n];
    if (m.version == n.version) continue;
    m.version = n.version;
    (void)cluster_.Release(m.taken);
    m.taken = Taken(n, cluster_.spec(m.index), m.index, options_);
    if (!cluster_.Allocate(m.taken).ok()) m.taken = scheduler::Placement{m.index};
  }
}

std::vector<int64_t> Scorer::Score(const ClusterView& view, const PodGpuRequest& pod,
                                   const std::vector<std::string>& names, WallTime now) {
  std::vector<int64_t> out(names.size(), 0);
  if (!pod.any()) return out;
  Sync(view);
  const scheduler::Request r = PolicyRequest(pod);
  policy_->Observe(r);
  constexpr int64_t kUnscored = std::numeric_limits<int64_t>::min();
  std::vector<int64_t> raw(names.size(), kUnscored);
  std::vector<int> zone(names.size(), 100);
  std::vector<bool> fits(names.size(), false);
  const std::vector<const ExtenderNode*>& nodes = view.Resolve(names);
  if (indices_generation_ != view.resolve_generation() || indices_rebuild_ != rebuilds_) {
    indices_generation_ = view.resolve_generation();
    indices_rebuild_ = rebuilds_;
    indices_.assign(names.size(), -1);
    for (size_t i = 0; i < names.size(); ++i) {
      auto m = nodes[i] != nullptr ? mirror_.find(nodes[i]) : mirror_.end();
      if (m != mirror_.end()) indices_[i] = m->second.index;
    }
  }
  for (size_t i = 0; i < names.size(); ++i) {
    const ExtenderNode* n = nodes[i];
    if (n == nullptr) continue;
    const NodeFit fit = FitPod(*n, pod, options_, now);
    if (!fit.fits) continue;
    fits[i] = true;
    int sum = 0, count = 0;
    for (const ContainerPlacement& c : fit.containers) {
      for (uint32_t g : c.gpus) {
        sum += ZoneValue(n->caps[g].zone);
        ++count;
      }
    }
    zone[i] = count > 0 ? sum / count : 100;
    int64_t score = 0, bound = 0;
    if (indices_[i] >= 0 &&
        scheduler::StokerScoreAndBound(*policy_, r, cluster_, indices_[i], &score, &bound)) {
      raw[i] = score;
    } else {
      raw[i] = kUnscored + 1;  // fits by the view, but the model cannot score it: last
    }
  }
  // The policy's scores as ranks: the best distinct score 100, the worst 0.
  std::vector<int64_t> levels;
  for (size_t i = 0; i < names.size(); ++i) {
    if (fits[i]) levels.push_back(raw[i]);
  }
  std::sort(levels.begin(), levels.end(), std::greater<>());
  levels.erase(std::unique(levels.begin(), levels.end()), levels.end());
  const int w = std::clamp(options_.zone_weight_pct, 0, 100);
  for (size_t i = 0; i < names.size(); ++i) {
    if (!fits[i]) continue;
    const auto rank =
        std::lower_bound(levels.begin(), levels.end(), raw[i], std::greater<>()) - levels.begin();
    const int64_t placement =
        levels.size() <= 1 ? 100 : 100 - rank * 100 / static_cast<int64_t>(levels.size() - 1);
    out[i] = ((100 - w) * placement + int64_t{w} * zone[i]) / 100;
  }
  return out;
}

int64_t WireScore(int64_t priority) {
  const int64_t p = std::clamp<int64_t>(priority, 0, 100);
  return (p * kMaxExtenderPriority + 50) / 100;
}

}  // namespace stoker::k8s
