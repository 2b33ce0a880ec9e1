#pragma once
// GPU oversubscription for preemptible work, as the scheduling pass applies it.
//
// The scheduler library counts at most one whole GPU per GPU, which is right for guaranteed
// work. With oversubscription on (ratio R, 1000 < R <= 1500 milli), preemptible jobs may bring a
// GPU's total commitments up to R, and guaranteed work still needs real room: a guaranteed job
// lands on a GPU only where guaranteed + its share + the remaining preemptible shares fit in
// one GPU, so preemptible jobs in the way are preempted.
//
// The two rules, one GPU at a time (the server's pass and the simulator's co-location both
// decide by them): AdmitsPreemptible and ShareVictims below.
//
// GpuCommitments keeps the true sums per GPU during one pass. The library sees two views of
// them, so every policy works unchanged:
//  - the real view (ClampToFree): each job accounts what still fits on its GPUs, so a GPU
//    committed at T shows min(T, 1000) used, and guaranteed placements are always real fits;
//  - the best-effort view (BuildBestEffortView): a GPU shows clamp(T - (R - 1000), 0, 1000)
//    used, so a preemptible share m fits exactly where T + m <= R.

#include <cstdint>
#include <optional>
#include <vector>

#include "core/status.h"
#include "scheduler/cluster.h"

namespace stoker::pass {

// The oversubscription admission: a preemptible share of `milli` may join a GPU whose
// commitments (guaranteed and preemptible shares) total `total` while all of them stay within
// the ratio. (The best-effort view below is this rule in the placement library's terms: a share
// fits there exactly where this admits it; BestEffortUsedOn.)
inline bool AdmitsPreemptible(int64_t total, int64_t milli, int32_t ratio_milli) {
  return milli > 0 && total + milli <= ratio_milli;
}

// One share on a GPU, as the preemption rule sees it.
struct ShareHolder {
  int64_t job = 0;
  int64_t milli = 0;
  bool movable = false;  // preemptible and allowed to make room for the job at hand
  int64_t started_ms = 0;
};

// The preemption rule for one GPU: guaranteed work gets a share of `milli` only where it, the
// holders that stay and nothing else fit in one GPU. Movable holders go youngest first (latest
// started; the larger job id first among equals), only as many as needed. Returns the jobs to
// stop, or nullopt when stopping every movable holder would still not make room.
std::optional<std::vector<int64_t>> ShareVictims(std::vector<ShareHolder> holders, int64_t milli);

class GpuCommitments {
 public:
  struct Holder {
    int64_t job = 0;
    int32_t milli = 0;
    bool preemptible = false;
  };

  // Nodes are the scheduler node ids of the pass's ClusterState.
  explicit GpuCommitments(int32_t num_nodes)
      : holders_(static_cast<size_t>(num_nodes) * scheduler::kMaxGpusPerNode) {}

  // Records every non-MIG GPU share of `p` (MIG slices are hardware partitions: never shared).
  void Add(int64_t job, bool preemptible, const scheduler::Placement& p, bool mig);
  int64_t Total(int32_t node, int gpu) const;
  // A measured GPU: best-effort work sees it at least `busy_milli` used (its measured busy share;
  // 1000 - headroom), plus every milli committed on it from now on (BestEffortUsedOn).
  void SetMeasuredFloor(int32_t node, int gpu, int32_t busy_milli);
  // What GPU (node, gpu) committed at `total` shows as used to best-effort work at `ratio_milli`:
  // BestEffortUsed, and where it was measured at least its measured use.
  int32_t BestEffortUsedOn(int32_t node, int gpu, int64_t total, int32_t ratio_milli) const;
  // Whether the GPU was measured, and its floor (busy milli at SetMeasuredFloor).
  std::optional<int32_t> MeasuredFloor(int32_t node, int gpu) const;
  bool AnyMeasured() const { return !floors_.empty(); }
  const std::vector<Holder>& Holders(int32_t node, int gpu) const {
    return holders_[Slot(node, gpu)];
  }

 private:
  static size_t Slot(int32_t node, int gpu) {
    return static_cast<size_t>(node) * scheduler::kMaxGpusPerNode + static_cast<size_t>(gpu);
  }
  std::vector<std::vector<Holder>> holders_;
  struct Floor {
    int16_t busy_milli = -1;  // -1: not measured
    int64_t base_total = 0;   // Total when it was measured
  };
  std::vector<Floor> floors_;  // empty until a GPU is measured
};

// The part of `p` that fits in `cluster` now: each GPU share cut to that GPU's free milli
// (shares that would be empty are dropped); CPU, memory and MIG slices unchanged.
scheduler::Placement ClampToFree(const scheduler::Placement& p,
                                 const scheduler::ClusterState& cluster);

// GPU milli a GPU committed at `total` shows as used to best-effort work at `ratio_milli`.
inline int32_t BestEffortUsed(int64_t total, int32_t ratio_milli) {
  const int64_t used = total - (ratio_milli - scheduler::kMilliPerGpu);
  return static_cast<int32_t>(used < 0                         ? 0
                              : used > scheduler::kMilliPerGpu ? scheduler::kMilliPerGpu
                                                               : used);
}

// The cluster as preemptible work sees it at `ratio_milli`: same nodes, models, CPU and memory
// use, MIG slices as in `cluster`; non-MIG GPUs at BestEffortUsed of their commitments.
Result<scheduler::ClusterState> BuildBestEffortView(const scheduler::ClusterState& cluster,
                                                    const GpuCommitments& commitments,
                                                    int32_t ratio_milli);

// The change a placement `p` (full shares, before it is added to `commitments`) makes to the
// best-effort view: per GPU the growth of BestEffortUsed; CPU and memory as in `p`.
scheduler::Placement BestEffortDelta(const scheduler::Placement& p,
                                     const GpuCommitments& commitments, int32_t ratio_milli);

}  // namespace stoker::pass
