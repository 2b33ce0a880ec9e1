#pragma once
// What the extender knows of each node: the GPUs its agent measures, who holds them, and
// whether they can take work. Built from the agents' GPU samples (the same samples the server
// keeps from heartbeats), so placement sees what GPUs really hold: memory used by processes no
// pod owns ("ghost" memory: a stray process, a daemon, a job outside Kubernetes) counts, a lost
// or faulted GPU is out, and MIG instances are seen as laid out.
//
// Memory arithmetic for one GPU (bytes):
//   claimed   = what the pods holding it are entitled to: the whole memory for a whole-GPU claim,
//               gpu_milli/1000 of it for a share (the MPS pinned-memory limit)
//   unowned   = memory of processes that belong to no pod holding this GPU
//   free      = total - max(used, claimed + unowned)
// so a pod that has its share but has not started yet still counts, and a stray process
// counts whether or not any pod is there.

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/clock.h"
#include "core/gpu.h"
#include "efficiency/zones.h"

namespace stoker::k8s {

struct MigView {
  std::string uuid;
  std::string profile;  // "1g.10gb"
  uint64_t memory_total = 0;
  uint64_t memory_used = 0;
  bool claimed = false;
};

// One GPU of a node as the extender sees it (pass::GpuView is the scheduling pass's view).
struct ExtenderGpu {
  uint32_t index = 0;
  std::string uuid;
  std::string model;
  bool usable = true;
  std::string why_unusable;  // "lost", "row remapping failed", ...
  uint64_t memory_total = 0;
  uint64_t memory_used = 0;
  uint64_t memory_unowned = 0;
  uint64_t memory_claimed = 0;
  int32_t claimed_milli = 0;  // shares held (a whole claim: 1000)
  bool whole_claimed = false;
  bool mig_enabled = false;
  std::vector<MigView> mig;
  efficiency::Zone zone = efficiency::Zone::kUnknown;

  // Memory a new claim could get (see the header comment).
  uint64_t FreeMemory() const;
  // The same with every pod's claim gone (what preemption could free): total - unowned, and
  // never more than total - used by non-pod processes.
  uint64_t FreeMemoryWithoutPods() const;
};

// What a placement attempt reads of one GPU, kept apart from ExtenderGpu so that a filter over
// thousands of nodes reads one small block per node.
struct GpuCaps {
  int32_t milli = 0;                 // unclaimed share (0: usable for no share or whole GPU)
  int32_t milli_without_pods = 0;    // the same with every pod's claim gone
  uint64_t memory = 0;               // ExtenderGpu::FreeMemory() (0 where not usable)
  uint64_t memory_without_pods = 0;  // ExtenderGpu::FreeMemoryWithoutPods()
  uint64_t memory_total = 0;
  efficiency::Zone zone = efficiency::Zone::kUnknown;
};

// One node as the extender sees it.
struct ExtenderNode {
  std::string name;
  std::vector<ExtenderGpu> gpus;
  std::vector<GpuCaps> caps;  // one per GPU, from `gpus` (ClusterView::Update)
  bool any_mig = false;       // some GPU has MIG instances
  WallTime sampled_at{};      // the newest sample's time
  bool drained = false;       // the node is drained in Stoker
  bool lost = false;          // the server has not heard from the node within its timeout
  uint64_t version = 0;       // changes with every update of this node
};

// Builds a node's GPUs from its agent's samples. `zones` (may be null) gives each GPU's zone.
std::vector<ExtenderGpu> GpusFromSamples(const std::vector<GpuSample>& samples,
                                         const efficiency::ZoneTracker* zones);

// The cluster as the extender sees it: nodes by name. Not thread-safe, const methods included
// (the owner locks).
class ClusterView {
 public:
  const ExtenderNode* Find(const std::string& name) const;
  // The node of each name (nullptr where unknown). kube-scheduler sends the same list call after
  // call, so the answer is kept until the list or the set of nodes changes.
  const std::vector<const ExtenderNode*>& Resolve(const std::vector<std::string>& names) const;
  // Changes whenever Resolve computes a new answer (callers cache what they derive from it).
  uint64_t resolve_generation() const { return resolve_generation_; }
  // Replaces a node's GPUs from its latest samples taken at `at`.
  void Update(const std::string& node, std::vector<ExtenderGpu> gpus, WallTime at);
  void SetState(const std::string& node, bool drained, bool lost);
  void Remove(const std::string& node);
  const std::unordered_map<std::string, ExtenderNode>& nodes() const { return nodes_; }
  uint64_t version() const { return version_; }
  // Changes when a node is added or removed.
  uint64_t membership() const { return membership_; }

 private:
  std::unordered_map<std::string, ExtenderNode> nodes_;
  uint64_t version_ = 0;
  uint64_t membership_ = 0;  // changes when a node is added or removed
  mutable std::vector<std::string> resolved_names_;
  mutable std::vector<const ExtenderNode*> resolved_;
  mutable uint64_t resolved_membership_ = UINT64_MAX;
  mutable uint64_t resolve_generation_ = 0;
};

}  // namespace stoker::k8s
