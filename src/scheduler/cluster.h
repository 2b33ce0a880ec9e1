#pragma once
// The cluster model: static node specs plus the free resources left on each node and each GPU.
// Allocate/Release are O(GPUs per node); cluster-wide aggregates are maintained incrementally.
// Every node carries a version that changes on each update, so policies can cache per-node
// scores and recompute only what changed.
//
// Thread-compatibility: const methods may run concurrently; mutations need external locking.

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "scheduler/resources.h"

namespace stoker::scheduler {

struct NodeSpec {
  std::string name;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int32_t num_gpus = 0;        // 0..kMaxGpusPerNode
  GpuModelId gpu_model = 0;    // meaningful when num_gpus > 0 (nodes are homogeneous)
  int64_t gpu_memory_mib = 0;  // per GPU; 0 = unknown (gpu_memory_mib requests then ignored)
  bool mig_enabled = false;    // GPUs are partitioned into kMigSlicesPerGpu slices
  friend bool operator==(const NodeSpec&, const NodeSpec&) = default;
};

// What one GPU contributes to a placement.
struct GpuShare {
  uint8_t gpu = 0;         // index inside the node
  int16_t milli = 0;       // milli-GPU taken (1000 for a whole GPU, 0 for MIG)
  uint8_t mig_slices = 0;  // MIG slices taken
  friend bool operator==(const GpuShare&, const GpuShare&) = default;
};

// A decision: which node, and how much of which GPUs. Self-contained, so Release() needs nothing
// else (the scheduler stores the Placement with the job).
struct Placement {
  int32_t node = -1;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  bool best_effort = false;
  uint8_t num_gpus = 0;  // entries used in `gpus`
  std::array<GpuShare, kMaxGpusPerNode> gpus{};

  int64_t TotalGpuMilli() const;
  friend bool operator==(const Placement&, const Placement&) = default;
};

// Free resources of one node. Public so policies can read them without a call per field.
struct NodeState {
  int64_t free_cpu_milli = 0;   // may go below 0 only through best-effort oversubscription
  int64_t free_memory_mib = 0;  // likewise
  int32_t free_gpu_milli = 0;   // sum over GPUs (MIG GPUs count 1000/7 per free slice)
  uint8_t num_gpus = 0;
  uint8_t full_free_gpus = 0;  // GPUs with nothing allocated
  GpuModelId gpu_model = 0;
  uint8_t pods = 0;  // placements on the node (saturating)
  // Placements by GPU-request class: [0] GPU shares (and MIG), [n] n whole GPUs (1..8).
  std::array<uint16_t, kMaxGpusPerNode + 1> class_pods{};
  std::array<int16_t, kMaxGpusPerNode> gpu_free_milli{};
  std::array<uint8_t, kMaxGpusPerNode> gpu_free_slices{};
  // Changes on every Allocate/Release touching the node. Drawn from one process-wide counter,
  // so equal versions mean equal node states even across copies of a ClusterState: policies
  // key their per-node score caches on it.
  uint64_t version = 0;
  // Measured use (ClusterState::SetMeasuredBusy): bit g set when GPU g's measured busy share is
  // known; gpu_busy_milli[g] is it (0..1000), gpu_busy_base_milli[g] the milli-GPU allocated on
  // the GPU when it was measured (what is allocated beyond that since counts as busy).
  uint8_t measured_gpus = 0;
  std::array<int16_t, kMaxGpusPerNode> gpu_busy_milli{};
  std::array<int16_t, kMaxGpusPerNode> gpu_busy_base_milli{};
  friend bool operator==(const NodeState&, const NodeState&) = default;
};

// How busy GPU `g` of node `n` is, in milli-GPU: its measured busy share plus what was allocated
// on it since (a new job is taken to use its whole share), at most one GPU; where it is not
// measured, its allocated share.
inline int32_t GpuUseMilli(const NodeState& n, int g) {
  const int32_t allocated = kMilliPerGpu - n.gpu_free_milli[g];
  if ((n.measured_gpus & (1u << g)) == 0) return allocated;
  const int32_t added = allocated - n.gpu_busy_base_milli[g];
  const int32_t use = n.gpu_busy_milli[g] + (added > 0 ? added : 0);
  return use < kMilliPerGpu ? use : kMilliPerGpu;
}

class ClusterState {
 public:
  ClusterState() = default;

  // The model table nodes and requests refer to. Intern models before adding nodes.
  GpuModelTable& models() { return models_; }
  const GpuModelTable& models() const { return models_; }

  // Adds an empty node; returns its index (node id). InvalidArgument for bad specs.
  Result<int32_t> AddNode(const NodeSpec& spec);
  // Room for `nodes` nodes in all, before adding them (a cluster built at once: no copying of
  // the nodes added so far as it grows).
  void Reserve(size_t nodes);

  // Best-effort requests may use CPU and memory up to cap_permille/1000 of a node's capacity
  // (1000 = off, the default; at most 1500 = 1.5:1). GPUs are never oversubscribed.
  Status SetBestEffortOversubscription(int32_t cap_permille);
  int32_t best_effort_cap_permille() const { return be_cap_permille_; }

  int32_t num_nodes() const { return static_cast<int32_t>(specs_.size()); }
  const NodeSpec& spec(int32_t node) const { return specs_[node]; }
  const NodeState& node(int32_t node) const { return nodes_[node]; }

  // Cluster aggregates, exact.
  int64_t total_cpu_milli() const { return total_cpu_milli_; }
  int64_t total_memory_mib() const { return total_memory_mib_; }
  int64_t total_gpu_milli() const { return total_gpu_milli_; }
  int32_t total_gpus() const { return total_gpus_; }
  int64_t allocated_cpu_milli() const { return allocated_cpu_milli_; }
  int64_t allocated_memory_mib() const { return allocated_memory_mib_; }
  int64_t allocated_gpu_milli() const { return allocated_gpu_milli_; }
  // Largest node (CPU, memory, GPUs): the normalisation used by dot-product/best-fit scores.
  int64_t max_node_cpu_milli() const { return max_cpu_milli_; }
  int64_t max_node_memory_mib() const { return max_memory_mib_; }
  int32_t max_node_gpus() const { return max_gpus_; }

  // Could `r` run on `node` right now (CPU, memory, GPU model, GPU memory, enough free GPUs)?
  bool Fits(int32_t node, const Request& r) const;
  // Could `r` run on `node` if the node were empty? (static capacity and constraints only)
  bool CouldEverFit(int32_t node, const Request& r) const;
  // Could `r` ever run anywhere? O(distinct node shapes), not O(nodes).
  bool AnyNodeCouldEverFit(const Request& r) const;

  // Change journal: the ids of nodes whose state changed, in order (one entry per successful
  // Allocate/Release). A policy that keeps a per-node index reads the entries after the position
  // it last saw, so a decision touches only the nodes that changed. history_id() names this
  // object's history: it is new for every ClusterState (copies and moves included) and after
  // AddNode/SetBestEffortOversubscription, so an index built against another cluster, or
  // against an older layout of this one, is detected and rebuilt. The journal keeps at least the
  // last kJournalKeep entries; journal_begin() is the oldest position still readable.
  static constexpr size_t kJournalKeep = size_t{1} << 19;
  uint64_t history_id() const { return history_.id; }
  uint64_t journal_begin() const { return journal_base_; }
  uint64_t journal_end() const { return journal_base_ + journal_.size(); }
  int32_t journal_at(uint64_t pos) const { return journal_[pos - journal_base_]; }

  // Records that GPU `gpu` of `node` (not MIG) was measured busy `busy_milli` (0..1000) of its
  // time, against what is allocated on it now (GpuUseMilli). Policies that place by utilization
  // read it; allocation and fit are unchanged.
  Status SetMeasuredBusy(int32_t node, int gpu, int32_t busy_milli);

  // Brings this cluster to `fresh`'s state. Where both have the same layout (the same node
  // specs in the same order, the same model table and best-effort cap), this keeps its history
  // and copies and journals only the nodes whose state differs from `fresh` (versions aside), so
  // a policy's index of this cluster catches up on those alone; otherwise it becomes a copy of
  // `fresh` with a new history. Returns how many nodes it copied.
  int32_t Adopt(const ClusterState& fresh);
  // Exchanges the contents of two clusters, their histories included (neither gets a new one).
  void Swap(ClusterState& other) noexcept;

  // Checks that the placement fits (node exists, CPU/memory/GPU free) and applies it.
  Status Allocate(const Placement& p);
  // Returns the placement's resources. FailedPrecondition if it would exceed capacity
  // (a double release or a placement that was never allocated).
  Status Release(const Placement& p);

 private:
  // A fresh id from the version counter on construction, copy and move.
  struct HistoryId {
    uint64_t id;
    HistoryId();
    HistoryId(const HistoryId&) : HistoryId() {}
    HistoryId& operator=(const HistoryId&);
  };
  void Journal(int32_t node);

  int64_t CpuLimit(int32_t node, bool best_effort) const;
  int64_t MemoryLimit(int32_t node, bool best_effort) const;

  GpuModelTable models_;
  std::vector<NodeSpec> specs_;
  std::vector<NodeState> nodes_;
  // Distinct static shapes, for AnyNodeCouldEverFit.
  struct Shape {
    int64_t cpu_milli, memory_mib, gpu_memory_mib;
    int32_t num_gpus;
    GpuModelId model;
    bool mig;
    friend bool operator==(const Shape&, const Shape&) = default;
  };
  std::vector<Shape> shapes_;
  int32_t be_cap_permille_ = 1000;
  int64_t total_cpu_milli_ = 0, total_memory_mib_ = 0, total_gpu_milli_ = 0;
  int32_t total_gpus_ = 0;
  int64_t allocated_cpu_milli_ = 0, allocated_memory_mib_ = 0, allocated_gpu_milli_ = 0;
  int64_t max_cpu_milli_ = 0, max_memory_mib_ = 0;
  int32_t max_gpus_ = 0;
  HistoryId history_;
  std::vector<int32_t> journal_;
  uint64_t journal_base_ = 0;
};

// GPU-request class of a placement or request: 0 = share/MIG, n = n whole GPUs, -1 = CPU-only.
int GpuClassOf(const Placement& p);
int GpuClassOf(const Request& r);

// Milli-GPU value of `slices` MIG slices (for aggregates): slices * 1000 / 7, rounded down.
inline int32_t MigSlicesToMilli(int slices) { return slices * kMilliPerGpu / kMigSlicesPerGpu; }

// Inline: a policy calls these for every (node, request shape) it scores or marks.
inline int64_t ClusterState::CpuLimit(int32_t node, bool best_effort) const {
  const int64_t cap = specs_[node].cpu_milli;
  return best_effort ? cap * be_cap_permille_ / 1000 : cap;
}

inline int64_t ClusterState::MemoryLimit(int32_t node, bool best_effort) const {
  const int64_t cap = specs_[node].memory_mib;
  return best_effort ? cap * be_cap_permille_ / 1000 : cap;
}

namespace detail {
// Whether a node of this static kind could ever take `r`'s GPUs (count, model, memory, MIG).
inline bool StaticGpuMatch(int32_t num_gpus, GpuModelId model, int64_t gpu_mem, bool mig,
                           const Request& r) {
  if (r.num_gpu == 0) return true;
  if (r.num_gpu > num_gpus) return false;
  if (r.allowed_models != 0 && (r.allowed_models & GpuModelTable::Bit(model)) == 0) return false;
  if (r.gpu_memory_mib > 0 && gpu_mem > 0 && r.gpu_memory_mib > gpu_mem) return false;
  return r.IsMig() == mig;
}
}  // namespace detail

inline bool ClusterState::Fits(int32_t node, const Request& r) const {
  const NodeState& n = nodes_[node];
  const int64_t cpu_used = specs_[node].cpu_milli - n.free_cpu_milli;
  if (cpu_used + r.cpu_milli > CpuLimit(node, r.best_effort)) return false;
  const int64_t mem_used = specs_[node].memory_mib - n.free_memory_mib;
  if (mem_used + r.memory_mib > MemoryLimit(node, r.best_effort)) return false;
  if (r.num_gpu == 0) return true;
  const NodeSpec& s = specs_[node];
  if (!detail::StaticGpuMatch(s.num_gpus, s.gpu_model, s.gpu_memory_mib, s.mig_enabled, r))
    return false;
  if (r.IsMig()) {
    const int need = MigSlices(r.mig);
    for (int g = 0; g < n.num_gpus; ++g) {
      if (n.gpu_free_slices[g] >= need) return true;
    }
    return false;
  }
  if (r.gpu_milli >= kMilliPerGpu) return n.full_free_gpus >= r.num_gpu;
  for (int g = 0; g < n.num_gpus; ++g) {
    if (n.gpu_free_milli[g] >= r.gpu_milli) return true;
  }
  return false;
}

}  // namespace stoker::scheduler
