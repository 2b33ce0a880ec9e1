#pragma once
// The Slurm engine adapter's cycle: read Slurm (nodes, jobs), decide with a Stoker placement
// policy, act through Slurm's levers:
//   - node weights that follow Stoker's placement score for the most common GPU shape (lowest
//     weight = the node Stoker would fill first), re-applied whenever Slurm's value differs, so
//     a `scontrol reconfigure` or a slurmctld restart (both revert to slurm.conf) is repaired
//     on the next cycle;
//   - held GPU jobs that carry the steer marker (a job_submit rule or the user adds it) are
//     given the node Stoker's policy picks (ReqNodeList) and released.
// Decide() is the only place decisions are made, so the shared scheduling pass can replace its
// body later. Errors (Slurm unreachable, malformed answers, vanished jobs, unknown nodes) are
// logged, counted in metrics() and never abort the process.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "scheduler/cluster.h"
#include "scheduler/policy.h"
#include "slurm/client.h"

namespace stoker::slurm {

struct ControllerOptions {
  std::string policy = "stoker";  // scheduler/registry.h name
  bool manage_weights = true;
  bool steer_held_jobs = true;
  // A held job is Stoker's to place only when its Comment or AdminComment contains this.
  std::string steer_marker = "stoker:steer";
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
};
// Prometheus text exposition of the metrics (stoker_slurm_*).
std::string RenderControllerMetrics(const ControllerMetrics& m);

// A snapshot of Slurm as the cycle read it.
struct SlurmSnapshot {
  std::vector<SlurmNode> nodes;
  std::vector<SlurmJob> jobs;
};

// The cluster model of the usable GPU nodes, with their current use allocated. `names[i]` is
// the Slurm node of model node i.
struct ClusterModel {
  scheduler::ClusterState cluster;
  std::vector<std::string> names;
  int skipped = 0;
};
ClusterModel BuildClusterModel(const std::vector<SlurmNode>& nodes);

// The decision step: weights from the policy's score, held marked GPU jobs to the policy's node.
Decision Decide(const SlurmSnapshot& snap, scheduler::PlacementPolicy& policy,
                const ControllerOptions& options);

class SlurmController {
 public:
  // NotFound for an unknown policy name.
  static Result<std::unique_ptr<SlurmController>> Create(SlurmClient* client,
                                                         ControllerOptions options);

  // One read-decide-act cycle. Returns the read error when Slurm could not be read (nothing is
  // done then); action errors are logged and counted, not returned.
  Result<Decision> Cycle();
  const ControllerMetrics& metrics() const { return metrics_; }
  // The snapshot of the last successful read.
  const SlurmSnapshot& last() const { return last_; }

 private:
  SlurmController(SlurmClient* client, ControllerOptions options,
                  std::unique_ptr<scheduler::PlacementPolicy> policy)
      : client_(client), options_(std::move(options)), policy_(std::move(policy)) {}
  void CountReadError(const Status& s);
  void CountActionError(const Status& s);

  SlurmClient* client_;
  ControllerOptions options_;
  std::unique_ptr<scheduler::PlacementPolicy> policy_;
  ControllerMetrics metrics_;
  SlurmSnapshot last_;
};

}  // namespace stoker::slurm
