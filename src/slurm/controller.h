#pragma once
// The Slurm engine adapter's cycle: read Slurm (nodes, jobs), decide with Stoker's shared
// scheduling pass (scheduler/pass), act through Slurm's levers:
//   - a submit plan for Slurm's job_submit/lua plugin, so marked GPU jobs are placed as they
//     are submitted (never held) where it is clear where they may go, and the excluded nodes of
//     such jobs still pending kept in step with it;
//   - node weights that follow Stoker's placement score for the most common pending GPU shape
//     (lowest weight = the node Stoker would fill first), re-applied whenever Slurm's value
//     differs, so a `scontrol reconfigure` or a slurmctld restart (both revert to slurm.conf) is
//     repaired on the next cycle;
//   - held GPU jobs (whole GPUs or gres/shard) that carry the steer marker (a job_submit rule or
//     the user adds it) are given the node the pass picks (ReqNodeList) and released.
// Decide() is the one place decisions are made: the same pass, placement and queue policies as
// `stoker server`, over a view built from what Slurm reports. Slurm picks the GPUs inside the
// node itself; Decide() predicts that pick (Slurm 22.05: whole GPUs take the lowest indices not
// allocated whole, even where shards are in use; shards take the lowest GPU not allocated whole
// that has room) and keeps a job held rather than release it onto GPUs it would share with
// shard jobs; shard jobs go where their GPU costs whole-GPU jobs the least such room. Errors (Slurm
// unreachable, malformed answers, vanished jobs, unknown nodes) are logged, counted in metrics()
// and never abort the process.

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/status.h"
#include "scheduler/cluster.h"
#include "scheduler/pass/pass.h"
#include "scheduler/policy.h"
#include "scheduler/queue/queue_policy.h"
#include "slurm/client.h"

namespace stoker::slurm {

struct ControllerOptions {
  std::string policy = "stoker";  // placement policy (scheduler/registry.h name)
  std::string queue = "fifo";     // queue policy of the held jobs (scheduler/queue)
  bool backfill = true;           // false: the first held job that cannot start stops the pass
  bool manage_weights = true;
  bool steer_held_jobs = true;
  // Keep whole-GPU and shard jobs on separate GPUs (Slurm 22.05 does not: it gives a whole-GPU
  // job GPUs that shard jobs use). false: release onto the pass's node whatever Slurm then
  // shares.
  bool keep_shards_apart = true;
  // A held job is Stoker's to place only when its Comment or AdminComment contains this.
  std::string steer_marker = "stoker:steer";
  // Where each cycle writes the submit plan (RenderSubmitPlan) for Slurm's job_submit/lua
  // plugin (deploy/slurm/job_submit.lua), so marked GPU jobs are placed as they are submitted
  // instead of held; empty: no plan. The script ignores a plan older than submit_plan_valid_s.
  std::string submit_plan;
  int64_t submit_plan_valid_s = 10;
};

// What the job_submit/lua script needs to place a marked GPU job as it is submitted, so that it
// is never held: per shape, the nodes it may go to (the script excludes the others; Slurm picks
// among these by weight, which follows Stoker's score). Built from the use after this cycle's
// steers, with the rules Decide() keeps (whole-GPU and shard jobs on separate GPUs).
struct SubmitPlan {
  struct Allowed {
    // Nodes fine for any number of such jobs until the next plan (whole GPUs: no shard in use
    // there, so Slurm's pick is clean whatever it is).
    std::vector<std::string> safe;
    // Nodes fine for one job until the next plan (whole GPUs: shards in use there, and Slurm's
    // pick now is clean; the job changes what the next one would get).
    std::vector<std::string> once;
  };
  std::vector<std::string> nodes;     // every GPU node (the script excludes those not allowed)
  std::map<int32_t, Allowed> whole;   // GPUs per node -> nodes; both lists empty: hold the job
  std::map<int32_t, Allowed> shards;  // shards of one GPU -> nodes
};
// What one cycle decided (pure data; Apply() turns it into Slurm commands).
struct Decision {
  std::map<std::string, int64_t> weights;  // node -> weight wanted (only nodes that differ)
  struct Steer {
    uint32_t job = 0;
    std::vector<std::string> nodes;  // empty: release unsteered (Stoker cannot place it)
    std::string why;
  };
  std::vector<Steer> steer;
  std::map<uint32_t, std::string> waiting;  // held marked jobs that stay held -> why
  // Steers moved to another node than the pass picked, or withheld, to keep whole-GPU and
  // shard jobs on separate GPUs (a whole-GPU job Slurm would put on GPUs with shards; a shard
  // job whose GPU would keep whole-GPU jobs off more of a node than elsewhere): the jobs.
  std::set<uint32_t> kept_off_shared_gpus;
  pass::PassStats pass;  // the scheduling pass's counters
  SubmitPlan plan;       // for the job_submit script, after this cycle's steers
  // Pending (not held) marked jobs the script placed, whose excluded nodes no longer match the
  // plan's safe nodes for their shape (a node's shard jobs ended or began): the new list. Only
  // when a submit plan is written, and never to exclude every node.
  std::map<uint32_t, std::vector<std::string>> exclude;
};

struct ControllerMetrics {
  int64_t cycles = 0;
  int64_t read_errors_unreachable = 0;
  int64_t read_errors_malformed = 0;
  int64_t read_errors_other = 0;
  int64_t weight_updates = 0;
  int64_t jobs_steered = 0;
  int64_t jobs_released_unsteered = 0;
  int64_t action_errors_not_found = 0;  // a job vanished or a node is unknown
  int64_t action_errors_other = 0;
  int64_t nodes_skipped = 0;  // nodes the model cannot hold (over 8 GPUs)
  int64_t jobs_waiting = 0;   // held marked jobs left held by the last cycle (gauge)
  // Jobs moved or withheld to keep whole-GPU and shard jobs apart, each counted once per hold.
  int64_t kept_off_shared_gpus = 0;
  int64_t submit_plan_errors = 0;  // submit plans that could not be written
  int64_t exclusions_updated = 0;  // pending jobs' excluded nodes moved with the plan
  double last_cycle_seconds = 0;   // read + decide + act (gauge)
};
// Prometheus text exposition of the metrics (stoker_slurm_*).
std::string RenderControllerMetrics(const ControllerMetrics& m);

// A snapshot of Slurm as the cycle read it.
struct SlurmSnapshot {
  std::vector<SlurmNode> nodes;
  std::vector<SlurmJob> jobs;
};

// How Slurm uses each GPU of one node, from its jobs' gres_detail (and sinfo's count where the
// jobs do not explain it, e.g. jobs hidden by PrivateData).
struct NodeUse {
  int32_t shards_per_gpu = 0;
  std::vector<bool> whole;      // per GPU index: allocated as gres/gpu
  std::vector<int32_t> shards;  // per GPU index: shards in use
  // Slurm 22.05's pick on this node for `n` whole GPUs: the lowest indices not allocated whole
  // (shards in use do not keep it off a GPU); empty when fewer are left.
  std::vector<int32_t> PredictWhole(int32_t n) const;
  // Its pick for `n` shards: the lowest GPU not allocated whole with `n` shards free; -1: none.
  int32_t PredictShards(int32_t n) const;
  // Whole GPUs a job could get here without touching a GPU with shards: Slurm hands out the
  // lowest GPUs not held whole, so the count stops at the first of them that has shards.
  int32_t CleanWholeCapacity() const;
  void TakeWhole(const std::vector<int32_t>& gpus);
  void TakeShards(int32_t gpu, int32_t n);
};
// Every GPU node's use (released jobs that have not started yet hold what Slurm will give
// them). Nodes with no GPUs are left out.
std::map<std::string, NodeUse> NodeUses(const SlurmSnapshot& snap);

// The submit plan (struct SubmitPlan above) over `uses`.
// Empty (no shape) where keep_shards_apart is off: the script then leaves jobs to Slurm.
SubmitPlan PlanSubmissions(const SlurmSnapshot& snap, const std::map<std::string, NodeUse>& uses,
                           const ControllerOptions& options);
// The plan file the script reads (line based, so the script needs no parser):
//   stoker-submit-plan 1
//   generation G          (changes with every plan: "once" nodes are used once per generation)
//   written UNIX_SECONDS
//   valid_for SECONDS
//   marker TEXT           (absent: every GPU job)
//   nodes A,B,...         (every GPU node)
//   gpu N SAFE ONCE       (comma-separated node names, "-" for none)
//   shard K SAFE ONCE
std::string RenderSubmitPlan(const SubmitPlan& plan, const ControllerOptions& options,
                             uint64_t generation, int64_t written_unix);

// The cluster model of the usable GPU nodes, with their current use allocated (a GPU's shards
// as its share of the GPU). `names[i]` is the Slurm node of model node i.
struct ClusterModel {
  scheduler::ClusterState cluster;
  std::vector<std::string> names;
  int skipped = 0;
};
ClusterModel BuildClusterModel(const std::vector<SlurmNode>& nodes,
                               const std::map<std::string, NodeUse>& uses);

// The pieces of one decision that persist between cycles: the scheduling pass (with the
// placement policy it keeps), a second instance of the policy that scores nodes for weights,
// and the queue policy.
struct DecisionPolicies {
  static Result<DecisionPolicies> Create(const ControllerOptions& options);
  std::unique_ptr<pass::SchedulingPass> pass;
  std::unique_ptr<scheduler::PlacementPolicy> scorer;
  std::unique_ptr<queue::QueuePolicy> queue;
};

// The decision step: held marked GPU jobs through the scheduling pass onto the nodes it picks,
// weights from the policy's score.
Decision Decide(const SlurmSnapshot& snap, DecisionPolicies& policies,
                const ControllerOptions& options);

class SlurmController {
 public:
  // NotFound for an unknown policy name, InvalidArgument for an unknown queue policy.
  static Result<std::unique_ptr<SlurmController>> Create(SlurmClient* client,
                                                         ControllerOptions options);

  // One read-decide-act cycle. Returns the read error when Slurm could not be read (nothing is
  // done then); action errors are logged and counted, not returned.
  Result<Decision> Cycle();
  const ControllerMetrics& metrics() const { return metrics_; }
  // The snapshot of the last successful read.
  const SlurmSnapshot& last() const { return last_; }

 private:
  SlurmController(SlurmClient* client, ControllerOptions options, DecisionPolicies policies)
      : client_(client), options_(std::move(options)), policies_(std::move(policies)) {}
  void CountReadError(const Status& s);
  void CountActionError(const Status& s);

  SlurmClient* client_;
  ControllerOptions options_;
  DecisionPolicies policies_;
  ControllerMetrics metrics_;
  SlurmSnapshot last_;
  std::set<uint32_t> kept_off_counted_;  // held jobs already counted in kept_off_shared_gpus
  uint64_t plan_generation_ = 0;
};

}  // namespace stoker::slurm
