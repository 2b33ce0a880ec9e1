#pragma once
// The scheduling pass: one decision over the whole queue, as a function of a cluster view, the
// jobs (active and queued) and the policies. The server builds the view under its lock, runs the
// pass without it and applies the decision (validating it against what changed meanwhile);
// other front ends (engine adapters, tests, benchmarks) call the same function.
//
// What a pass decides, in queue order (guaranteed work first, each tier in the queue policy's
// order):
//  - placements through the placement policy (scheduler/policy.h), elastic jobs shrinking to
//    their minimum GPU count rather than waiting; gangs all or nothing, each part on a node of
//    its own (scheduler/gang.h; never beyond capacity; a guaranteed gang preempts like a job);
//  - oversubscription admission: preemptible work that does not fit may share GPUs up to the
//    ratio (<= 1.5:1), chosen by the same policy on the best-effort view (gpu_commitments.h);
//  - the one preemption planner: a guaranteed job that does not fit stops preemptible jobs of no
//    higher priority (lowest priority, then latest started first), only on the node the policy
//    picks once they are gone, and only those it needs; GPUs beyond capacity count in full;
//  - the reason each job still waits.
//
// The dynamic simulator (sim/jobs_sim.h) runs the pass over a cluster it keeps between passes
// (PassInput::kept, KeptCluster): a walk of its own inside Run for whole-GPU gangs in the
// caller's queue order (strict, skipping what does not fit, or EASY backfill behind a
// reservation), placing through the same policy and scheduler::PlaceGang, on the caller's
// cluster in place of a view built per pass. The server never sets it.
//
// The pass owns the placement policies between passes (their incremental indexes make the next
// pass cheap) and the cluster it last placed on: each pass builds the cluster from its input and
// brings the kept one to it (scheduler::ClusterState::Adopt), so only the nodes that changed
// since the last pass are scored again, while every decision is the one a cluster built afresh
// gives (tests compare both). Deterministic: the same view gives the same decision.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "scheduler/cluster.h"
#include "scheduler/policy.h"
#include "scheduler/queue/job_queue.h"
#include "scheduler/queue/queue_policy.h"
#include "scheduler/resources.h"

namespace stoker::pass {

struct MigInstance {
  std::string uuid;
  uint32_t slices = 0;
};

// How busy a GPU has been, as its node measured it (the caller keeps a window of the agents'
// samples): the mean activity over the window, in milli of the GPU's time (0..1000), and how
// much of the window the readings cover.
struct GpuActivity {
  int32_t busy_milli = 0;
  int64_t covered_ms = 0;
};

struct GpuView {
  uint32_t index = 0;  // the node's GPU index (NVML)
  std::string model;
  int64_t memory_mib = 0;
  bool mig_enabled = false;
  std::vector<MigInstance> mig;
  // Measured activity; absent when the GPU reports none (its allocation stands in for it).
  std::optional<GpuActivity> activity;
};

struct NodeView {
  std::string name;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  std::vector<GpuView> gpus;
  bool drained = false;  // drained and lost nodes host nothing new (their jobs still count)
  bool lost = false;
};

enum class JobPhase { kQueued, kAssigned, kRunning, kCancelling };

// Where a job runs: a node and, per GPU (position in NodeView::gpus), the milli-GPU it holds.
struct JobPlacement {
  std::string node;
  std::vector<std::pair<uint8_t, int32_t>> shares;  // (position, milli)
  uint8_t mig_slices = 0;
  std::string mig_uuid;
};

struct JobView {
  int64_t id = 0;
  int64_t attempt = 0;  // the caller's run counter (not used by the pass; for validating)
  JobPhase phase = JobPhase::kQueued;
  // What it asks for (protocol JobSpec semantics): gpus > 0 whole GPUs (min_gpus > 0: elastic
  // down to that many), else gpu_milli > 0 a share of one, else mig a MIG profile of one. A gang
  // (IsGang): `nodes` parts of `gpus` whole GPUs each, or `total_gpus` split by the nodes'
  // sizes; CPU and memory per part.
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int64_t gpu_memory_mib = 0;
  int32_t gpus = 0;
  int32_t min_gpus = 0;
  int32_t nodes = 0;
  int32_t total_gpus = 0;
  int32_t gpu_milli = 0;
  std::string mig;  // profile name ("2g.20gb"), validated by the caller
  std::string job_class;
  std::vector<std::string> gpu_models;  // allowed when a model name contains one (any case)
  int32_t consolidate_milli = 0;        // a one-GPU job resized to this share of one
  bool preemptible = false;
  int32_t priority = 0;
  int64_t submit_ms = 0;
  int64_t start_ms = 0;
  int64_t preempted_by = 0;               // != 0: being stopped for that job
  std::optional<JobPlacement> placement;  // active jobs
  std::vector<JobPlacement> gang;         // active gangs: every part in rank order (no placement)
  // The work it has left, in GPU-ms at its full size: what a backfill walk (KeptCluster) reads
  // to tell whether it ends before a reservation. Unused otherwise.
  int64_t work_gpu_ms = 0;
};
inline bool IsGang(const JobView& j) { return j.nodes > 0 || j.total_gpus > 0; }

// What the walk over a kept cluster does with the first job that cannot start now.
enum class Blocked {
  kStop,      // strict order: it stops the walk (Decision::blocked names it)
  kSkip,      // the walk goes on past it
  kBackfill,  // a backfill walk behind the reservation for KeptCluster::head (EASY)
};

// A job running on a kept cluster when a backfill walk starts: when it is expected to end, and
// what it holds there.
struct RunningEnd {
  int64_t end_ms = 0;
  int64_t id = 0;
  const std::vector<scheduler::Placement>* placements = nullptr;
};

// A pass over a cluster the caller keeps between passes (the dynamic simulator, sim/jobs_sim.h):
// the pass places on `cluster` itself and what it places stays allocated there, so nothing is
// rebuilt per pass and the placement policy's incremental indexes stay valid. The jobs are read
// in place (the caller keeps them alive and up to date between passes). Every job is whole GPUs:
// a gang of JobView::gpus split over the nodes (scheduler::SplitGang, whole nodes first), elastic
// ones down to min_gpus, starting from as many GPUs as are free; each part asks for no CPU or
// memory (the simulated nodes never bind on them).
struct KeptCluster {
  scheduler::ClusterState* cluster = nullptr;  // homogeneous, gpus_per_node GPUs a node
  int32_t gpus_per_node = 0;
  std::span<const JobView> jobs;           // by id: jobs[id].id == id
  const queue::JobQueue* queue = nullptr;  // the walk's order (the caller's queue), or
  std::span<const int64_t> order;          // these ids, when queue is null
  Blocked blocked = Blocked::kStop;
  // kBackfill: the blocked head of the queue, the time now, and the jobs running (any order).
  // The reservation is the earliest end after which the head fits (running jobs released in
  // the order they end); a job may start now if it ends by then, or if the head still fits at
  // the reservation with its GPUs taken. Backfilled jobs start rigidly at their full size.
  int64_t head = -1;
  int64_t now_ms = 0;
  std::vector<RunningEnd> running;
};

struct PassInput {
  // When set, a pass over the caller's kept cluster (KeptCluster); nothing below is read.
  const KeptCluster* kept = nullptr;
  std::vector<NodeView> nodes;  // in the order the scheduler numbers them (ties go to the first)
  // Active placed jobs; their order is the order their holdings are accounted in (guaranteed
  // first regardless).
  std::vector<JobView> active;
  std::vector<JobView> queued;
  bool sample_fragmentation = false;
};

struct PassOptions {
  std::string placement_policy;  // scheduler registry name (the best-effort view's policy)
  bool backfill = true;          // false: the first blocked job stops the pass
  int32_t gpu_oversubscription_milli = 1000;
  // Oversubscription admits preemptible work beyond a measured GPU's capacity only where its
  // measurement covers this much time and leaves headroom for the new share (measured busy +
  // what was committed since + the share <= one GPU). A GPU that reports activity but not yet
  // over the whole window takes none beyond capacity; one that reports none is admitted by its
  // commitments alone (GpuCommitments).
  int64_t activity_window_ms = int64_t{5} * 60 * 1000;
};

// The cluster's fragmentation by FGD's measure (scheduler/fgd.h): the free GPU milli the typical
// request shapes of the current workload cannot use, summed over nodes.
struct Fragmentation {
  double fragmented_gpu_milli = 0;
  int64_t free_gpu_milli = 0;
  int64_t total_gpu_milli = 0;
  int typical_shapes = 0;  // 0: no jobs to learn shapes from (nothing counted as fragmented)
};

struct PassStats {
  int queued = 0;
  int placed = 0;
  int blocked = 0;         // no capacity now
  int infeasible = 0;      // no node could ever host it
  int preempting = 0;      // blocked guaranteed jobs that preemptible jobs are making room for
  int oversubscribed = 0;  // preemptible jobs placed on GPUs beyond their capacity
  int preempted = 0;       // preemptible jobs stopped or requeued for guaranteed work
  std::optional<Fragmentation> fragmentation;  // when the input asked for a sample
  double seconds = 0;
};

// What the pass grants a job on one node: where, which GPUs, the devices and environment it
// starts with. (The server turns it into the wire type protocol::Assignment.)
struct Grant {
  JobPlacement placement;
  std::vector<uint32_t> gpu_indices;  // the node's GPU indices, in share order
  int32_t gpu_milli = 0;              // of the last share (all shares of a job are equal)
  std::string cuda_visible_devices;
  std::map<std::string, std::string> env;
  bool oversubscribed = false;  // preemptible, sharing GPUs beyond their capacity
  // What the placement went by, where measured use could count: the utilization a policy that
  // scores by it saw on the chosen node (measured, or allocated where not measured), and for an
  // oversubscribed placement the measured headroom (or commitments alone) on its GPUs.
  std::string basis;
};

// One step of the decision, in the order the pass took them.
struct Action {
  // kInfeasible: no node can ever run `job` (a pass over a kept cluster only).
  enum class Kind { kAssign, kStop, kInfeasible };
  Kind kind = Kind::kAssign;
  int64_t job = 0;
  // The view of `job` the action was decided on: the input's (PassInput::active or queued; the
  // first for a job listed twice; KeptCluster::jobs), as given, never the pass's changed copy.
  // A caller checks against it that the job is still as the pass saw it; valid while the input
  // lives.
  const JobView* view = nullptr;
  Grant assignment;         // kAssign
  std::vector<Grant> gang;  // kAssign of a gang: every part in rank order (not assignment)
  // kStop: the preemptible job `job` makes room for `for_job`; `running`: its node stops it
  // (TERM, grace, KILL) and its exit requeues it; otherwise (assigned, not started) it goes
  // back to the queue at once.
  int64_t for_job = 0;
  bool running = false;
  // kAssign on a kept cluster: the parts as allocated there, and the GPUs the job got.
  std::vector<scheduler::Placement> placed;
  int32_t gpus = 0;
};

struct Decision {
  std::vector<Action> actions;
  // How many of the first actions were handed to the caller's ActionSink while the pass still
  // decided (0 without one): a caller applying the decision as it comes applies the rest.
  size_t handed = 0;
  std::map<int64_t, std::string> reasons;  // queued jobs still waiting -> why
  std::vector<std::string> warnings;       // what the caller should log (inconsistent input)
  PassStats stats;
  // A pass over a kept cluster: the job that stopped a strict walk (Blocked::kStop), the
  // reservation a backfill walk made (absent: the head never fits), and an error (the policy
  // placed what the cluster refused: a bug; the actions before it were taken).
  std::optional<int64_t> blocked;
  std::optional<int64_t> reserved_at_ms;
  Status status;
};

// Takes a pass's actions while it still decides the rest (SchedulingPass::Run): a caller that
// applies a large decision starts writing and telling of its first actions while the pass goes
// on. `take` is called on the pass's thread, each time `every` more actions have been taken,
// with those actions in order (each action once); the pass goes on when it returns. The
// actions it was handed stay in Decision::actions (counted by Decision::handed) as `take` left
// them: it may move from them. They are never changed by the pass afterwards. A pass over a
// kept cluster (PassInput::kept) hands nothing over.
struct ActionSink {
  size_t every = 0;  // 0: never called
  std::function<void(std::span<Action>)> take;
};

// What a job asks the placement library for, without its GPU-model constraint.
scheduler::Request RequestFor(const JobView& j);

class SchedulingPass {
 public:
  // `placement`: the policy that places (its state is kept across passes).
  explicit SchedulingPass(std::unique_ptr<scheduler::PlacementPolicy> placement)
      : placement_(std::move(placement)) {}
  void SetPlacementPolicy(std::unique_ptr<scheduler::PlacementPolicy> placement) {
    placement_ = std::move(placement);
    be_placement_.reset();  // made again, of the new policy, when next needed
  }
  // The placing policy (a caller that learns the workload feeds it through Observe).
  scheduler::PlacementPolicy& placement() { return *placement_; }

  // One pass. `queue` orders the queued jobs (a pass over a kept cluster walks the caller's
  // order instead).
  // `sink`: where the actions go as they are taken (none by default: all in the decision).
  Decision Run(const PassInput& in, const queue::QueuePolicy& queue, const PassOptions& options,
               const ActionSink& sink = {});
  // Takes back a decision its caller is done with: the next pass builds its actions into the
  // same storage (at 100,000 queued jobs tens of megabytes, fresh memory each pass otherwise).
  void Recycle(Decision&& done) {
    done.actions.clear();
    spare_actions_ = std::move(done.actions);
  }

  // Off: every pass places on the cluster built from its input (a new history, so the policy
  // scores every node again), as a comparison for the kept cluster. On by default.
  void KeepCluster(bool on) {
    keep_cluster_ = on;
    kept_ = scheduler::ClusterState();
  }

 private:
  Decision RunKept(const KeptCluster& kept);

  std::unique_ptr<scheduler::PlacementPolicy> placement_;
  // A second instance of the same policy for the best-effort view, so each keeps its
  // incremental index for the cluster it scores. Made when first needed.
  std::unique_ptr<scheduler::PlacementPolicy> be_placement_;
  bool keep_cluster_ = true;
  scheduler::ClusterState kept_;       // the cluster of the last pass (not a kept-cluster pass's)
  std::vector<Action> spare_actions_;  // empty; its storage is the next pass's (Recycle)
};

}  // namespace stoker::pass
