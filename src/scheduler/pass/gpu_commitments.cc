#include "scheduler/pass/gpu_commitments.h"

#include <algorithm>

namespace stoker::pass {

using scheduler::ClusterState;
using scheduler::kMilliPerGpu;
using scheduler::Placement;

std::optional<std::vector<int64_t>> ShareVictims(std::vector<ShareHolder> holders, int64_t milli) {
  int64_t load = milli;
  for (const ShareHolder& h : holders) load += h.milli;
  std::vector<int64_t> out;
  if (load <= kMilliPerGpu) return out;
  std::erase_if(holders, [](const ShareHolder& h) { return !h.movable; });
  std::sort(holders.begin(), holders.end(), [](const ShareHolder& x, const ShareHolder& y) {
    return x.started_ms != y.started_ms ? x.started_ms > y.started_ms : x.job > y.job;
  });
  for (const ShareHolder& h : holders) {
    if (load <= kMilliPerGpu) break;
    load -= h.milli;
    out.push_back(h.job);
  }
  if (load > kMilliPerGpu) return std::nullopt;
  return out;
}

void GpuCommitments::Add(int64_t job, bool preemptible, const Placement& p, bool mig) {
  if (mig || p.node < 0) return;
  for (int i = 0; i < p.num_gpus; ++i) {
    const auto& share = p.gpus[i];
    if (share.milli <= 0 || share.gpu >= scheduler::kMaxGpusPerNode) continue;
    holders_[Slot(p.node, share.gpu)].push_back(Holder{job, share.milli, preemptible});
  }
}

int64_t GpuCommitments::Total(int32_t node, int gpu) const {
  int64_t sum = 0;
  for (const Holder& h : holders_[Slot(node, gpu)]) sum += h.milli;
  return sum;
}

void GpuCommitments::SetMeasuredFloor(int32_t node, int gpu, int32_t busy_milli) {
  if (floors_.empty()) floors_.resize(holders_.size());
  Floor& f = floors_[Slot(node, gpu)];
  f.busy_milli = static_cast<int16_t>(std::clamp<int32_t>(busy_milli, 0, kMilliPerGpu));
  f.base_total = Total(node, gpu);
}

std::optional<int32_t> GpuCommitments::MeasuredFloor(int32_t node, int gpu) const {
  if (floors_.empty() || floors_[Slot(node, gpu)].busy_milli < 0) return std::nullopt;
  return floors_[Slot(node, gpu)].busy_milli;
}

int32_t GpuCommitments::BestEffortUsedOn(int32_t node, int gpu, int64_t total,
                                         int32_t ratio_milli) const {
  const int32_t used = BestEffortUsed(total, ratio_milli);
  if (floors_.empty()) return used;
  const Floor& f = floors_[Slot(node, gpu)];
  if (f.busy_milli < 0) return used;
  const int64_t measured = f.busy_milli + std::max<int64_t>(0, total - f.base_total);
  return std::max(used, static_cast<int32_t>(std::min<int64_t>(measured, kMilliPerGpu)));
}

Placement ClampToFree(const Placement& p, const ClusterState& cluster) {
  if (p.node < 0 || p.node >= cluster.num_nodes() || cluster.spec(p.node).mig_enabled) return p;
  const scheduler::NodeState& n = cluster.node(p.node);
  std::array<int32_t, scheduler::kMaxGpusPerNode> left{};
  for (int g = 0; g < n.num_gpus; ++g) left[g] = n.gpu_free_milli[g];
  Placement out = p;
  out.num_gpus = 0;
  out.gpus = {};
  for (int i = 0; i < p.num_gpus; ++i) {
    scheduler::GpuShare share = p.gpus[i];
    if (share.gpu >= n.num_gpus) {
      out.gpus[out.num_gpus++] = share;  // out of range: let Allocate name the error
      continue;
    }
    share.milli = static_cast<int16_t>(std::min<int32_t>(share.milli, left[share.gpu]));
    left[share.gpu] -= share.milli;
    if (share.milli > 0) out.gpus[out.num_gpus++] = share;
  }
  return out;
}

Result<ClusterState> BuildBestEffortView(const ClusterState& cluster,
                                         const GpuCommitments& commitments, int32_t ratio_milli) {
  ClusterState view;
  // Same model ids: intern in id order.
  for (int m = 0; m < cluster.models().size(); ++m) {
    STOKER_RETURN_IF_ERROR(view.models()
                               .Intern(cluster.models().Name(static_cast<scheduler::GpuModelId>(m)))
                               .status());
  }
  for (int32_t i = 0; i < cluster.num_nodes(); ++i) {
    const scheduler::NodeSpec& spec = cluster.spec(i);
    const scheduler::NodeState& n = cluster.node(i);
    STOKER_ASSIGN_OR_RETURN(int32_t id, view.AddNode(spec));
    Placement used;
    used.node = id;
    used.cpu_milli = spec.cpu_milli - n.free_cpu_milli;
    used.memory_mib = spec.memory_mib - n.free_memory_mib;
    for (int g = 0; g < n.num_gpus; ++g) {
      scheduler::GpuShare share;
      share.gpu = static_cast<uint8_t>(g);
      if (spec.mig_enabled) {
        share.mig_slices = static_cast<uint8_t>(scheduler::kMigSlicesPerGpu - n.gpu_free_slices[g]);
        if (share.mig_slices == 0) continue;
      } else {
        share.milli = static_cast<int16_t>(
            commitments.BestEffortUsedOn(i, g, commitments.Total(i, g), ratio_milli));
        if (share.milli == 0) continue;
      }
      used.gpus[used.num_gpus++] = share;
    }
    if (used.cpu_milli == 0 && used.memory_mib == 0 && used.num_gpus == 0) continue;
    STOKER_RETURN_IF_ERROR(view.Allocate(used));
  }
  return view;
}

Placement BestEffortDelta(const Placement& p, const GpuCommitments& commitments,
                          int32_t ratio_milli) {
  Placement d = p;
  d.num_gpus = 0;
  d.gpus = {};
  std::array<int64_t, scheduler::kMaxGpusPerNode> add{};
  for (int i = 0; i < p.num_gpus; ++i) {
    if (p.gpus[i].gpu < scheduler::kMaxGpusPerNode) add[p.gpus[i].gpu] += p.gpus[i].milli;
  }
  for (int i = 0; i < p.num_gpus; ++i) {
    scheduler::GpuShare share = p.gpus[i];
    if (share.gpu >= scheduler::kMaxGpusPerNode) continue;
    if (share.mig_slices > 0) {
      d.gpus[d.num_gpus++] = share;
      continue;
    }
    if (add[share.gpu] == 0) continue;  // a GPU named twice: counted at its first entry
    const int64_t total = commitments.Total(p.node, share.gpu);
    share.milli = static_cast<int16_t>(
        commitments.BestEffortUsedOn(p.node, share.gpu, total + add[share.gpu], ratio_milli) -
        commitments.BestEffortUsedOn(p.node, share.gpu, total, ratio_milli));
    add[share.gpu] = 0;
    if (share.milli > 0) d.gpus[d.num_gpus++] = share;
  }
  return d;
}

}  // namespace stoker::pass
