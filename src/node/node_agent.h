#pragma once
// The node loop: register with the server (agent token), then every heartbeat_interval (1 s)
// sample the GPUs and look at the jobs, and report to the server: the GPU samples, the state of
// every job in the runner's state directory and new log bytes; start / cancel / forget jobs as
// the reply says. All state that matters lives in the runner's files, so an agent restart loses
// nothing: it reports what it finds and the server reconciles.
//
// Two ways to send samples. The compact form (GpuSamplesFeed): every second's samples are kept
// and sent together every report interval, which the server directs in its reply (longer as the
// cluster grows, so its request rate stays bounded); a node reports at once when one of its
// jobs changes phase (starts, exits) or could not be launched, so job ends and starts are not
// delayed by the interval. The full form (a JSON function, agents before the compact form):
// the latest samples, every second.

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <random>
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
  size_t max_log_chunk = size_t{256} * 1024;  // per stream per heartbeat
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

// The compact form's source: the latest sample of each GPU (telemetry::ReportSamples of the
// Sampler's cache), with its index, health and readings.
struct GpuSamplesFeed {
  std::function<std::vector<GpuSample>()> latest;
};

class NodeAgent {
 public:
  // `samples` returns the latest GPU samples as JSON (from the telemetry Sampler's cache): the
  // full form, a report every round.
  NodeAgent(NodeOptions options, Clock* clock, protocol::NodeInventory inventory,
            std::function<protocol::json()> samples);
  // The compact form: every round's samples, reported every interval the server directs.
  NodeAgent(NodeOptions options, Clock* clock, protocol::NodeInventory inventory,
            GpuSamplesFeed samples);

  // One round that reports whatever is due: register if needed, sample, report, act on the
  // reply. Unavailable when the server is unreachable (jobs keep running; the next round
  // retries).
  Status RunOnce();
  // One round of Run: sample (the compact form), look at the jobs, and report when due: the
  // report interval passed, a job changed phase or failed to launch, or the last report failed
  // and its retry time came. Retries back off: the first after heartbeat_interval, then each
  // wait doubles up to the report interval the server directed, jittered to between half and
  // all of it (never under heartbeat_interval; the jitter seeded by the node's name), so the
  // nodes of a cluster whose server was down do not all come back in the same second. Until the
  // retry the round returns the last failure; the seconds keep being sampled (up to
  // limits::kReportTicksMax of them) and go with the next report that is answered.
  Status Tick();
  // Rounds (Tick) every heartbeat_interval until *stop.
  void Run(const std::atomic<bool>* stop);

  // The report interval the server directed (the compact form; heartbeat_interval until told).
  Duration report_interval() const { return report_interval_; }
  // Reports sent (answered 2xx), for tests and logs.
  int64_t reports() const { return reports_; }
  // Reports that failed in a row (0 once one is answered).
  int failures() const { return failures_; }

  runner::Runner& runner() { return runner_; }

 private:
  protocol::RunReport ReportFor(const runner::JobStatus& st);
  void Sample();
  Status Report(const std::vector<runner::JobStatus>& polled);
  // Report, and keep the count of failures in a row and the retry time (RunOnce and Tick).
  Status Send(const std::vector<runner::JobStatus>& polled);
  // The compact form: this node's next report slot after now (its name's phase within the
  // interval, anchored on the wall clock).
  MonoTime NextSlot() const;
  // The wait before the next retry after failures_ failures in a row.
  Duration RetryDelay();
  std::map<int64_t, std::string> PhasesOf(const std::vector<runner::JobStatus>& polled) const;

  NodeOptions options_;
  Clock* clock_;
  protocol::NodeInventory inventory_;
  std::function<protocol::json()> samples_;
  GpuSamplesFeed feed_;                        // set: the compact form
  std::vector<protocol::SampleTick> pending_;  // seconds not yet reported, oldest first
  bool identity_sent_ = false;                 // since the last registration
  Duration report_interval_{};
  MonoTime next_report_{};  // the compact form: when the next report is due
  int failures_ = 0;        // reports failed in a row
  MonoTime retry_at_{};     // after a failure: no report before this
  Status last_error_;       // the last failure, returned while waiting to retry
  std::mt19937_64 jitter_;
  int64_t reports_ = 0;
  std::map<int64_t, std::string> reported_phases_;  // job -> phase, as last reported
  runner::Runner runner_;
  client::ApiClient client_;
  bool registered_ = false;
  std::map<int64_t, std::pair<int64_t, int64_t>> sent_;  // bytes of stdout/stderr the server holds
  // Jobs that could not be launched: (attempt, why).
  std::map<int64_t, std::pair<int64_t, std::string>> launch_errors_;
};

}  // namespace stoker::node
