#pragma once
// The node loop: register with the server (agent token), heartbeat every interval with the
// latest GPU samples, the state of every job in the runner's state directory and new log bytes;
// start / cancel / forget jobs as the reply says. All state that matters lives in the runner's
// files, so an agent restart loses nothing: it reports what it finds and the server reconciles.

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "client/api_client.h"
#include "core/clock.h"
#include "core/gpu_source.h"
#include "core/status.h"
#include "protocol/model.h"
#include "runner/runner.h"

namespace stoker::node {

struct NodeOptions {
  std::string server_url;
  std::string token;
  std::string ca_file;
  std::string state_dir;               // job directories (runner)
  std::vector<std::string> shim_argv;  // e.g. {"/usr/bin/stoker", "_job-shim"}
  Duration heartbeat_interval = std::chrono::seconds(1);
  Duration cancel_grace = std::chrono::seconds(10);
  size_t max_log_chunk = 256 * 1024;  // per stream per heartbeat
  // Who jobs may run as when the agent is root: a start order for anyone else (root and
  // system accounts, by default) is refused here, whatever the server says.
  runner::UserPolicy users;
  // What the node can enforce for jobs (runner::ProbeCgroups); said in its registration.
  runner::CgroupSupport cgroups;
  // Where the other parts of a gang reach this node (registered as the inventory's address);
  // empty: the node's name.
  std::string address;
};

// The GPU part of the inventory from a GpuSource (index, UUID, model, memory, MIG instances),
// plus this host's CPUs and memory. `source` may be null (no GPUs).
protocol::NodeInventory BuildInventory(const std::string& name, GpuSource* source);

class NodeAgent {
 public:
  // `samples` returns the latest GPU samples as JSON (from the telemetry Sampler's cache).
  NodeAgent(NodeOptions options, Clock* clock, protocol::NodeInventory inventory,
            std::function<protocol::json()> samples);

  // One round: register if needed, heartbeat, act on the reply. Unavailable when the server is
  // unreachable (jobs keep running; the next round retries).
  Status RunOnce();
  // Rounds every heartbeat_interval until *stop.
  void Run(const std::atomic<bool>* stop);

  runner::Runner& runner() { return runner_; }

 private:
  protocol::RunReport ReportFor(const runner::JobStatus& st);

  NodeOptions options_;
  Clock* clock_;
  protocol::NodeInventory inventory_;
  std::function<protocol::json()> samples_;
  runner::Runner runner_;
  client::ApiClient client_;
  bool registered_ = false;
  std::map<int64_t, std::pair<int64_t, int64_t>> sent_;  // bytes of stdout/stderr the server holds
  // Jobs that could not be launched: (attempt, why).
  std::map<int64_t, std::pair<int64_t, std::string>> launch_errors_;
};

}  // namespace stoker::node
