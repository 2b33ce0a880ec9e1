#include "k8s/cluster_view.h"

#include <algorithm>
#include <set>

#include "efficiency/activity.h"

namespace stoker::k8s {

uint64_t ExtenderGpu::FreeMemory() const {
  const uint64_t taken = std::max(memory_used, memory_claimed + memory_unowned);
  return taken >= memory_total ? 0 : memory_total - taken;
}

uint64_t ExtenderGpu::FreeMemoryWithoutPods() const {
  return memory_unowned >= memory_total ? 0 : memory_total - memory_unowned;
}

std::vector<ExtenderGpu> GpusFromSamples(const std::vector<GpuSample>& samples,
                                         const efficiency::ZoneTracker* zones) {
  std::vector<ExtenderGpu> out;
  out.reserve(samples.size());
  for (const GpuSample& s : samples) {
    ExtenderGpu g;
    g.index = s.id.index;
    g.uuid = s.id.uuid;
    g.model = s.id.name;
    if (s.health != GpuHealth::kOk) {
      g.usable = false;
      g.why_unusable = std::string("GPU ") + GpuHealthName(s.health);
    } else if (s.remapping_failed.has_value() && s.remapping_failed.value()) {
      g.usable = false;
      g.why_unusable = "row remapping failed (the GPU needs service)";
    } else if (s.remapping_pending.has_value() && s.remapping_pending.value()) {
      g.usable = false;
      g.why_unusable = "row remapping pending (the GPU needs a reset)";
    } else if (!s.memory_total_bytes.has_value() || s.memory_total_bytes.value() == 0) {
      g.usable = false;
      g.why_unusable = "memory size not measured";
    }
    if (s.memory_total_bytes.has_value()) g.memory_total = s.memory_total_bytes.value();
    uint64_t process_sum = 0;
    for (const GpuProcess& p : s.processes) {
      if (p.used_memory_bytes.has_value()) process_sum += p.used_memory_bytes.value();
    }
    g.memory_used = s.memory_used_bytes.has_value() ? s.memory_used_bytes.value() : process_sum;
    g.mig_enabled = s.mig_enabled.has_value() && s.mig_enabled.value();
    for (const MigInstance& m : s.mig_instances) {
      MigView mv;
      mv.uuid = m.uuid;
      mv.profile = m.profile;
      if (m.memory_total_bytes.has_value()) mv.memory_total = m.memory_total_bytes.value();
      if (m.memory_used_bytes.has_value()) mv.memory_used = m.memory_used_bytes.value();
      g.mig.push_back(std::move(mv));
    }
    std::set<std::string> holders;  // pods holding this GPU (or one of its instances)
    for (const GpuClaim& c : s.claims) {
      holders.insert(c.job.id);
      if (!c.mig_uuid.empty()) {
        for (MigView& mv : g.mig) {
          if (mv.uuid == c.mig_uuid) mv.claimed = true;
        }
        continue;
      }
      if (c.whole) {
        g.whole_claimed = true;
        g.claimed_milli += 1000;
        g.memory_claimed += g.memory_total;
      } else {
        g.claimed_milli += c.gpu_milli;
        g.memory_claimed += g.memory_total / 1000 * static_cast<uint64_t>(c.gpu_milli);
      }
    }
    for (const GpuProcess& p : s.processes) {
      const bool owned = p.job.kind == JobRef::Kind::kKubernetes && holders.count(p.job.id) != 0;
      if (owned || !p.used_memory_bytes.has_value()) continue;
      g.memory_unowned += p.used_memory_bytes.value();
      // A MIG instance with a stray process on it is not free either.
      if (p.gpu_instance_id != UINT32_MAX) {
        for (size_t k = 0; k < s.mig_instances.size() && k < g.mig.size(); ++k) {
          if (s.mig_instances[k].gpu_instance_id == p.gpu_instance_id) {
            g.mig[k].memory_used = std::max(g.mig[k].memory_used, p.used_memory_bytes.value());
          }
        }
      }
    }
    if (zones != nullptr) g.zone = zones->Gpu(efficiency::GpuKey(s)).zone;
    out.push_back(std::move(g));
  }
  return out;
}

const ExtenderNode* ClusterView::Find(const std::string& name) const {
  auto it = nodes_.find(name);
  return it == nodes_.end() ? nullptr : &it->second;
}

const std::vector<const ExtenderNode*>& ClusterView::Resolve(
    const std::vector<std::string>& names) const {
  if (resolved_membership_ == membership_ && names == resolved_names_) return resolved_;
  resolved_.clear();
  resolved_.reserve(names.size());
  for (const std::string& name : names) resolved_.push_back(Find(name));
  resolved_names_ = names;
  resolved_membership_ = membership_;
  ++resolve_generation_;
  return resolved_;
}

void ClusterView::Update(const std::string& node, std::vector<ExtenderGpu> gpus, WallTime at) {
  auto [it, added] = nodes_.try_emplace(node);
  if (added) ++membership_;
  ExtenderNode& n = it->second;
  n.name = node;
  n.gpus = std::move(gpus);
  n.caps.clear();
  n.any_mig = false;
  for (const ExtenderGpu& g : n.gpus) {
    GpuCaps c;
    c.memory_total = g.memory_total;
    c.zone = g.zone;
    if (g.usable && !g.mig_enabled) {
      c.milli = g.whole_claimed ? 0 : std::max(0, 1000 - g.claimed_milli);
      c.milli_without_pods = 1000;
      c.memory = g.FreeMemory();
      c.memory_without_pods = g.FreeMemoryWithoutPods();
    }
    n.caps.push_back(c);
    n.any_mig |= !g.mig.empty();
  }
  n.sampled_at = at;
  n.version = ++version_;
}

void ClusterView::SetState(const std::string& node, bool drained, bool lost) {
  auto it = nodes_.find(node);
  if (it == nodes_.end() || (it->second.drained == drained && it->second.lost == lost)) return;
  it->second.drained = drained;
  it->second.lost = lost;
  it->second.version = ++version_;
}

void ClusterView::Remove(const std::string& node) {
  if (nodes_.erase(node) != 0) {
    ++version_;
    ++membership_;
  }
}

}  // namespace stoker::k8s
