#pragma once
// Runs jobs as real processes on this node.
//
// Each job gets a directory <state_dir>/<job_id>/ with:
//   spec.json    what to run (written by Launch before the shim starts)
//   shim.pid     the supervisor's pid
//   pid          "<child pid> <child pgid> <start time in clock ticks since boot>"
//   stdout.log / stderr.log
//   exit.json    {"exit_code":N} or {"signal":N} (or {"error":"..."} when exec failed),
//                written atomically (tmp + rename) by the shim when the job ends
// The shim (`stoker _job-shim DIR`, see ShimMain) is double-forked and runs in its own session,
// so it outlives the agent: a job that ends while the agent is down still gets its exit status
// recorded, and a restarted agent rebuilds its view from these files (Poll()).
//
// Isolation done here: own session and process group (cancel signals the whole group),
// environment, working directory, CUDA_VISIBLE_DEVICES, and when running as root the
// submitting user's uid/gid/supplementary groups.

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/status.h"

namespace stoker::runner {

struct LaunchSpec {
  std::string job_id;  // [A-Za-z0-9_.-]
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;  // added to a minimal base environment
  std::string workdir;                     // empty: the user's home (or / )
  std::string user;                        // used only when running as root
  // Value for CUDA_VISIBLE_DEVICES ("0,1", "MIG-<uuid>", "" = none visible). nullopt: unset.
  std::optional<std::string> cuda_visible_devices;
};

enum class JobPhase { kStarting, kRunning, kExited };

struct JobStatus {
  std::string job_id;
  JobPhase phase = JobPhase::kStarting;
  int pid = 0;
  std::optional<int> exit_code;  // normal exit
  std::optional<int> signal;     // killed by a signal
  std::string error;             // launch failure (exec, user, workdir): exit_code 127
};

class Runner {
 public:
  // `shim_argv` is the command that runs the shim, the job directory is appended
  // (e.g. {"/usr/bin/stoker", "_job-shim"}).
  Runner(std::string state_dir, std::vector<std::string> shim_argv, Clock* clock,
         Duration grace = std::chrono::seconds(10));

  // Writes the spec and starts the shim. AlreadyExists when the job directory exists.
  Status Launch(const LaunchSpec& spec);
  // SIGTERM to the job's process group now; SIGKILL after the grace period (sent by Poll()):
  // `grace` when given (a preemption's), else the runner's. A repeated cancel keeps the first
  // deadline. NotFound when the job is unknown; OK (no-op) when it already exited.
  Status Cancel(const std::string& job_id, std::optional<Duration> grace = std::nullopt);
  // Status of every job with a directory, sending due SIGKILLs first.
  std::vector<JobStatus> Poll();
  // One job's status.
  Result<JobStatus> Get(const std::string& job_id);
  // Removes an exited job's directory (after the server recorded its end).
  Status Forget(const std::string& job_id);

  std::string JobDir(const std::string& job_id) const;
  const std::string& state_dir() const { return state_dir_; }

 private:
  JobStatus Read(const std::string& job_id) const;

  std::string state_dir_;
  std::vector<std::string> shim_argv_;
  Clock* clock_;
  Duration grace_;
  std::map<std::string, MonoTime> kill_deadlines_;
};

// Entry point of the job shim: `argv` = {..., job_dir}. Returns the process exit code.
int ShimMain(const std::string& job_dir);

std::string JobPhaseName(JobPhase p);

}  // namespace stoker::runner
