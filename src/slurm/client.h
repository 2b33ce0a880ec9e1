#pragma once
// The Slurm engine adapter's view of Slurm: reads (nodes, jobs, partitions) and Slurm's own
// levers (node weight, job hold/steer/release, comments, requeue, cancel). SlurmClient is the
// interface the controller and the reclaim bridge use; CommandSlurmClient implements it with
// Slurm 22.05's commands (sinfo/squeue --json, scontrol -o, scontrol update, scancel), see
// docs/dependencies.md for why commands rather than libslurm or slurmrestd.

#include <chrono>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "core/status.h"
#include "slurm/model.h"

namespace stoker::slurm {

// Implementations are safe to call from several threads at once (the controller reads nodes
// and jobs in parallel).
class SlurmClient {
 public:
  virtual ~SlurmClient() = default;
  virtual Result<std::vector<SlurmNode>> Nodes() = 0;
  virtual Result<std::vector<SlurmJob>> Jobs() = 0;
  virtual Result<std::vector<SlurmPartition>> Partitions() = 0;
  virtual Status SetNodeWeight(const std::string& node, int64_t weight) = 0;
  // Restricts a pending job to `nodes` (ReqNodeList; none: unchanged) and releases its hold.
  virtual Status SteerAndRelease(uint32_t job, const std::vector<std::string>& nodes) = 0;
  // The same for several jobs (what one cycle decided): one status per job, in order. The
  // default steers and releases them one by one.
  using SteerList = std::vector<std::pair<uint32_t, std::vector<std::string>>>;
  virtual std::vector<Status> SteerAndReleaseAll(const SteerList& jobs);
  // Sets pending jobs' excluded nodes (ExcNodeList; none: cleared): one status per job, in
  // order.
  virtual std::vector<Status> SetExcludedNodesAll(const SteerList& jobs) = 0;
  // Several nodes' weights: one status per node. The default sets them one by one.
  virtual std::map<std::string, Status> SetNodeWeights(const std::map<std::string, int64_t>& w);
  virtual Status SetComment(uint32_t job, const std::string& text) = 0;
  virtual Status SetAdminComment(uint32_t job, const std::string& text) = 0;
  virtual Status Requeue(uint32_t job) = 0;
  virtual Status Cancel(uint32_t job) = 0;
};

// The result of running one command.
struct CommandOutput {
  int exit_code = -1;  // -1 when killed by a signal or timed out
  std::string out;
  std::string err;
};

// Runs argv[0] (looked up in PATH) with `env` added to this process's environment, no stdin,
// every other descriptor closed (spawned with close-on-exec pipes). Output beyond `max_output`
// bytes per stream is an error; the command is killed after `timeout`.
Result<CommandOutput> RunCommand(const std::vector<std::string>& argv,
                                 const std::map<std::string, std::string>& env, Duration timeout,
                                 size_t max_output);

struct CommandClientOptions {
  std::string slurm_conf;  // SLURM_CONF for every command; empty: Slurm's default
  std::string bin_dir;     // where sinfo/squeue/scontrol/scancel are; empty: PATH
  Duration timeout = std::chrono::seconds(30);
};

class CommandSlurmClient final : public SlurmClient {
 public:
  explicit CommandSlurmClient(CommandClientOptions options) : options_(std::move(options)) {}
  Result<std::vector<SlurmNode>> Nodes() override;
  Result<std::vector<SlurmJob>> Jobs() override;
  Result<std::vector<SlurmPartition>> Partitions() override;
  Status SetNodeWeight(const std::string& node, int64_t weight) override;
  Status SteerAndRelease(uint32_t job, const std::vector<std::string>& nodes) override;
  // Each job's ReqNodeList update (up to 8 at once), then one `scontrol release` for all of
  // them: a cycle that steers k jobs costs about k/8 + 1 command times instead of 2k.
  std::vector<Status> SteerAndReleaseAll(const SteerList& jobs) override;
  // One `scontrol update JobId=j ExcNodeList=...` per job, up to 8 at once.
  std::vector<Status> SetExcludedNodesAll(const SteerList& jobs) override;
  // One `scontrol update NodeName=a,b Weight=w` per distinct weight.
  std::map<std::string, Status> SetNodeWeights(const std::map<std::string, int64_t>& w) override;
  Status SetComment(uint32_t job, const std::string& text) override;
  Status SetAdminComment(uint32_t job, const std::string& text) override;
  Status Requeue(uint32_t job) override;
  Status Cancel(uint32_t job) override;

  // Runs one Slurm command; a non-zero exit becomes a Status from its stderr (Unavailable when
  // the controller cannot be reached, NotFound for an unknown job or node).
  Result<std::string> Run(std::vector<std::string> argv) const;

 private:
  CommandClientOptions options_;
};

// Maps a failed command's stderr to a Status code (exposed for tests).
Status StatusFromSlurmError(const std::string& command, int exit_code, const std::string& err);

}  // namespace stoker::slurm
