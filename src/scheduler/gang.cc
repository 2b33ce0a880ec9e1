#include "scheduler/gang.h"

#include <algorithm>
#include <optional>

namespace stoker::scheduler {
namespace {

// Everything still free on `node`: allocated, it keeps every later part of the gang off it.
Placement Everything(const ClusterState& cluster, int32_t node) {
  const NodeState& n = cluster.node(node);
  const bool mig = cluster.spec(node).mig_enabled;
  Placement p;
  p.node = node;
  p.cpu_milli = std::max<int64_t>(n.free_cpu_milli, 0);
  p.memory_mib = std::max<int64_t>(n.free_memory_mib, 0);
  for (int g = 0; g < n.num_gpus; ++g) {
    GpuShare share;
    share.gpu = static_cast<uint8_t>(g);
    if (mig) {
      share.mig_slices = n.gpu_free_slices[g];
      if (share.mig_slices == 0) continue;
    } else {
      share.milli = n.gpu_free_milli[g];
      if (share.milli == 0) continue;
    }
    p.gpus[p.num_gpus++] = share;
  }
  return p;
}

std::string PartText(const Request& r) {
  return std::to_string(r.num_gpu) + " GPU(s), " + std::to_string(r.cpu_milli) + "m CPU, " +
         std::to_string(r.memory_mib) + " MiB";
}

}  // namespace

std::vector<int32_t> SplitGang(int64_t total_gpus, int32_t per_node) {
  std::vector<int32_t> parts;
  if (total_gpus <= 0 || per_node <= 0) return parts;
  for (int64_t left = total_gpus; left > 0;) {
    const int32_t part = static_cast<int32_t>(std::min<int64_t>(left, per_node));
    parts.push_back(part);
    left -= part;
  }
  return parts;
}

int32_t LargestGangPart(const ClusterState& cluster, Request part) {
  part.gpu_milli = kMilliPerGpu;
  part.mig = MigProfile::kNone;
  for (int32_t g = kMaxGpusPerNode; g > 0; --g) {
    part.num_gpu = g;
    if (cluster.AnyNodeCouldEverFit(part)) return g;
  }
  return 0;
}

std::optional<std::string> GangNeverFits(const ClusterState& cluster,
                                         const std::vector<Request>& parts,
                                         const MachineOf& machine_of) {
  auto machine = [&](int32_t node) {
    return machine_of ? machine_of(node) : std::vector<int32_t>{node};
  };
  for (const Request& part : parts) {
    if (auto infeasible = CheckFeasible(part, cluster)) return infeasible->reason;
  }
  // Parts come largest first, so the machines that could host part p could host every later
  // part: as many of them are needed as there are parts at least as large.
  std::vector<bool> counted(static_cast<size_t>(cluster.num_nodes()), false);
  for (size_t p = 0; p < parts.size(); ++p) {
    if (p > 0 && parts[p].num_gpu == parts[p - 1].num_gpu &&
        parts[p].cpu_milli == parts[p - 1].cpu_milli &&
        parts[p].memory_mib == parts[p - 1].memory_mib) {
      continue;  // same shape as the part before: counted there
    }
    size_t need = p + 1;
    while (need < parts.size() && parts[need].num_gpu == parts[p].num_gpu) ++need;
    std::fill(counted.begin(), counted.end(), false);
    size_t machines = 0;
    for (int32_t n = 0; n < cluster.num_nodes() && machines < need; ++n) {
      if (counted[static_cast<size_t>(n)] || !cluster.CouldEverFit(n, parts[p])) continue;
      ++machines;
      for (int32_t m : machine(n)) {
        if (m >= 0 && m < cluster.num_nodes()) counted[static_cast<size_t>(m)] = true;
      }
    }
    if (machines < need) {
      return "a gang of " + std::to_string(parts.size()) + " parts needs " + std::to_string(need) +
             " machines that could each host a part of " + PartText(parts[p]) + "; only " +
             std::to_string(machines) + " could";
    }
  }
  return std::nullopt;
}

Result<GangPlacement> PlaceGang(PlacementPolicy& policy, ClusterState& cluster,
                                const std::vector<Request>& parts, const MachineOf& machine_of) {
  auto machine = [&](int32_t node) {
    return machine_of ? machine_of(node) : std::vector<int32_t>{node};
  };
  GangPlacement out;
  if (parts.empty()) {
    out.status = PlacementStatus::kInfeasible;
    out.reason = "a gang needs at least one part";
    return out;
  }
  std::vector<Placement> placed;
  std::vector<Placement> blocks;  // machines taken by a part, kept from the later parts
  auto release_blocks = [&]() -> Status {
    for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) {
      STOKER_RETURN_IF_ERROR(cluster.Release(*it));
    }
    blocks.clear();
    return Status::Ok();
  };
  auto rollback = [&]() -> Status {
    STOKER_RETURN_IF_ERROR(release_blocks());
    for (const Placement& p : placed) STOKER_RETURN_IF_ERROR(cluster.Release(p));
    placed.clear();
    return Status::Ok();
  };
  for (size_t k = 0; k < parts.size(); ++k) {
    PlacementResult r = policy.Place(parts[k], cluster);
    if (!r.placed()) {
      STOKER_RETURN_IF_ERROR(rollback());
      out.status = r.status;
      out.placed_parts = static_cast<int>(k);
      if (r.status == PlacementStatus::kInfeasible) {
        out.reason = r.reason;
        return out;
      }
      out.reason = std::to_string(k) + " of " + std::to_string(parts.size()) +
                   " parts of the gang fit now, each on a machine of its own";
      return out;
    }
    if (Status s = cluster.Allocate(r.placement); !s.ok()) {
      STOKER_RETURN_IF_ERROR(rollback());
      return Internal("gang: policy '" + std::string(policy.Name()) +
                      "' returned a placement that cannot be allocated: " + s.ToString());
    }
    placed.push_back(r.placement);
    if (k + 1 == parts.size()) break;
    // The later parts go elsewhere: keep them off this machine (only where one could still fit,
    // so a gang whose parts fill their nodes leaves the cluster untouched).
    for (int32_t m : machine(r.placement.node)) {
      if (m < 0 || m >= cluster.num_nodes()) continue;
      bool could = false;
      for (size_t l = k + 1; l < parts.size() && !could; ++l) could = cluster.Fits(m, parts[l]);
      if (!could) continue;
      Placement block = Everything(cluster, m);
      if (cluster.Allocate(block).ok()) blocks.push_back(block);
    }
  }
  STOKER_RETURN_IF_ERROR(release_blocks());
  out.status = PlacementStatus::kPlaced;
  out.placed_parts = static_cast<int>(parts.size());
  out.parts = std::move(placed);
  return out;
}

}  // namespace stoker::scheduler
