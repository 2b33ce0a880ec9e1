#pragma once
// Gangs: a job that runs as several parts at once, each part on a machine of its own, placed all
// or nothing. The one notion of a gang, used by the simulator and by the scheduling pass:
//  - a gang asked for as a total GPU count splits into parts of as many GPUs as the largest
//    node that could host it has (whole nodes first), then the remainder (SplitGang);
//  - a gang asked for as N parts of G GPUs is N parts of G;
//  - PlaceGang places the parts one after the other through a placement policy, in the order
//    given (largest first), each on a machine no earlier part took, and keeps them only if every
//    part found room.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "scheduler/cluster.h"
#include "scheduler/policy.h"
#include "scheduler/resources.h"

namespace stoker::scheduler {

// Part sizes for `total_gpus` GPUs on nodes of at most `per_node` GPUs: whole nodes first, then
// the remainder ({8, 8, 4} for 20 on 8-GPU nodes). Empty when either is <= 0.
std::vector<int32_t> SplitGang(int64_t total_gpus, int32_t per_node);

// The most whole GPUs a single node of `cluster` could ever give a part shaped like `part` (its
// CPU, memory, GPU model and GPU memory; its GPU count ignored); 0 when none could host one GPU.
int32_t LargestGangPart(const ClusterState& cluster, Request part);

struct GangPlacement {
  PlacementStatus status = PlacementStatus::kNoCapacityNow;
  // kPlaced: one placement per part, in the order of the parts, allocated on the cluster.
  std::vector<Placement> parts;
  std::string reason;    // empty when placed
  int placed_parts = 0;  // how many parts found room before one did not
};

// Which scheduler nodes are one machine with `node` (itself included). A machine may be
// modelled as several scheduler nodes (the pass splits a node with MIG and plain GPUs in two);
// a part takes the whole machine away from the later parts of its gang.
using MachineOf = std::function<std::vector<int32_t>(int32_t node)>;

// Places `parts` (largest first) on distinct machines through `policy`. kPlaced: every part is
// allocated on `cluster`, in the returned placements. Otherwise nothing stays allocated and the
// reason says why: kInfeasible when the policy finds a part could never fit anywhere, else how
// many parts found room. Internal when the policy returns a placement the cluster refuses (a
// bug). `machine_of` null: every node is a machine of its own.
Result<GangPlacement> PlaceGang(PlacementPolicy& policy, ClusterState& cluster,
                                const std::vector<Request>& parts,
                                const MachineOf& machine_of = nullptr);

// Why the gang `parts` (largest first) could never be placed on `cluster`, even empty: a part
// no node could host, or fewer machines that could host the parts than there are parts; nullopt
// when it could. O(nodes) per distinct part shape: for a gang that did not fit.
std::optional<std::string> GangNeverFits(const ClusterState& cluster,
                                         const std::vector<Request>& parts,
                                         const MachineOf& machine_of = nullptr);

}  // namespace stoker::scheduler
