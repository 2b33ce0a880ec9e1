#pragma once
// The scheduler extender's decisions as functions of the cluster view (cluster_view.h):
//
//   FitPod       whether a pod's GPU request fits one node now, on which GPUs / MIG instances,
//                and if not, why, and whether removing pods could ever change that
//   FilterNodes  FitPod over kube-scheduler's candidate nodes -> passed, FailedNodes (might fit
//                after preemption), FailedAndUnresolvableNodes (never, as things are: unknown to
//                Stoker, drained, lost, measurements stale, GPUs lost or faulted, memory held by
//                processes no pod owns, no such MIG instance)
//   Scorer       prioritize: Stoker's placement policy ("stoker") scores each fitting node on a
//                mirror of the view in the scheduler's cluster model (each GPU's free capacity =
//                the smaller of its unclaimed share and its measured free memory), blended with
//                the zones of the GPUs the pod would get (a hot GPU is a poor home for a share);
//                0..100, sent as 0..kMaxExtenderPriority
//
// The device plugin picks GPUs on its node with the same fit rules (PreferredGpus), so the
// node the extender admits is one where the plugin can place the pod.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/clock.h"
#include "k8s/cluster_view.h"
#include "k8s/extender_types.h"
#include "k8s/resources.h"
#include "scheduler/cluster.h"
#include "scheduler/policy.h"

namespace stoker::k8s {

struct ExtenderOptions {
  // A node whose newest sample is older than this is not placed on (its view may be wrong).
  Duration stale_after = std::chrono::seconds(30);
  // A whole GPU (without a memory annotation) is free when no more than this is in use on it.
  uint64_t whole_gpu_slack_bytes = uint64_t{1} << 30;
  // A MIG instance is free when no more than this is in use on it.
  uint64_t mig_slack_bytes = uint64_t{256} << 20;
  // The weight (percent) of the zone term in the 0..100 priority; the rest is the policy's.
  int zone_weight_pct = 20;
};

// Where one container would go on a node.
struct ContainerPlacement {
  std::string container;
  std::vector<uint32_t> gpus;  // positions in ExtenderNode::gpus (whole GPUs, or the share's GPU)
  int32_t gpu_milli = 0;       // share size (shares only)
  uint64_t memory_bytes = 0;   // memory per GPU this container is promised
  std::vector<std::string> mig_uuids;
};

struct NodeFit {
  bool fits = false;
  bool resolvable = false;                     // not fitting, but removing pods could make it fit
  std::string reason;                          // why not (empty when it fits)
  std::vector<ContainerPlacement> containers;  // the app containers' placement
};

// The memory a container needs per GPU on a GPU of that size (the annotation, or the default).
uint64_t MemoryNeed(const PodGpuRequest& pod, const ContainerGpuRequest& c,
                    uint64_t gpu_memory_total, const ExtenderOptions& options);

// `with_placement` false: only whether and why (the filter's question), without the placement.
NodeFit FitPod(const ExtenderNode& node, const PodGpuRequest& pod, const ExtenderOptions& options,
               WallTime now, bool with_placement = true);

// `view` may not know some names: those are unresolvable ("no Stoker agent reports it").
FilterOutcome FilterNodes(const ClusterView& view, const PodGpuRequest& pod,
                          const std::vector<std::string>& names, const ExtenderOptions& options,
                          WallTime now);

// The scheduler model's request for a pod (its largest container's shape: whole GPUs, a share
// or a MIG instance), for the placement policy.
scheduler::Request PolicyRequest(const PodGpuRequest& pod);

// Prioritize. Keeps a mirror of the view in the scheduler's cluster model, refreshed node by node
// as their versions change, and the placement policy that learns the pod shapes it sees. Not
// thread-safe (the owner locks).
class Scorer {
 public:
  explicit Scorer(ExtenderOptions options);
  ~Scorer();
  // 0..100 for each name (0 where the pod does not fit or the node is unknown).
  std::vector<int64_t> Score(const ClusterView& view, const PodGpuRequest& pod,
                             const std::vector<std::string>& names, WallTime now);

 private:
  void Sync(const ClusterView& view);

  ExtenderOptions options_;
  std::unique_ptr<scheduler::PlacementPolicy> policy_;
  scheduler::ClusterState cluster_;
  struct Mirrored {
    int32_t index = -1;
    uint64_t version = 0;
    scheduler::Placement taken;  // the capacity the view says is not free
  };
  // Keyed by the view's node (its address is stable while the node stays in the view; a node
  // added or removed rebuilds the mirror).
  std::unordered_map<const ExtenderNode*, Mirrored> mirror_;
  uint64_t view_version_ = 0;
  uint64_t membership_ = UINT64_MAX;
  uint64_t rebuilds_ = 0;
  // The mirror's index of each name of the last list (ClusterView::Resolve's), -1 where none.
  std::vector<int32_t> indices_;
  uint64_t indices_generation_ = UINT64_MAX, indices_rebuild_ = UINT64_MAX;
};

// The wire score of a 0..100 priority: 0..kMaxExtenderPriority, rounded to nearest.
int64_t WireScore(int64_t priority_0_100);

}  // namespace stoker::k8s
