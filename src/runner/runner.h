#pragma once
// Runs jobs as real processes on this node.
//
// Each job gets a directory <state_dir>/<job_id>/ with:
//   spec.json    what to run (written by Launch before the shim starts)
//   shim.pid     "<the supervisor's pid> <its start time in clock ticks since boot>"
//   pid          "<child pid> <child pgid> <start time in clock ticks since boot>"
//   stdout.log / stderr.log
//   exit.json    {"exit_code":N} or {"signal":N} (or {"error":"..."} when exec failed),
//                written atomically (tmp + rename) by the shim when the job ends
// The shim (`stoker _job-shim DIR`, see ShimMain) is double-forked and runs in its own session,
// so it outlives the agent: a job that ends while the agent is down still gets its exit status
// recorded, and a restarted agent rebuilds its view from these files (Poll()).
//
// Isolation done here (docs/security.md, "Running jobs"):
//   - the job starts with only stdin (/dev/null), stdout and stderr (its log files) open: every
//     other descriptor of the agent is closed before the shim runs, and the shim's own are
//     close-on-exec;
//   - a documented clean environment (kJobPath, HOME, USER, ...), the job's variables, then
//     STOKER_JOB_ID and CUDA_VISIBLE_DEVICES, which the job cannot override ("" for a job
//     without GPUs: it sees none);
//   - its own session and process group, its own cgroup where the node has cgroups
//     (cgroup.h: the whole tree killed on cancel, CPU and memory limits, only its GPUs'
//     device files), and otherwise the shim as child subreaper, so processes that leave the
//     group are still found and stopped;
//   - when running as root, the submitting user's uid/gid/supplementary groups, and never a
//     user the UserPolicy refuses (root and system accounts by default), whatever the server
//     asked for.

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "core/enum_table.h"
#include "core/status.h"
#include "runner/cgroup.h"

namespace stoker::runner {

// PATH of every job (the agent's own PATH is not passed on).
inline constexpr std::string_view kJobPath = "/usr/local/bin:/usr/bin:/bin";

// Who jobs may run as when the runner runs as root (it then becomes the submitting user).
// A runner that is not root runs every job as itself and ignores LaunchSpec::user.
struct UserPolicy {
  bool allow_root = false;      // uid 0
  uint32_t min_uid = 1000;      // accounts below this (system accounts) are refused ...
  std::set<std::string> allow;  // ... unless named here
};

struct RunnerOptions {
  std::string state_dir;
  // The command that runs the shim, the job directory is appended
  // (e.g. {"/usr/bin/stoker", "_job-shim"}).
  std::vector<std::string> shim_argv;
  Duration grace = std::chrono::seconds(10);
  UserPolicy users;
  // What ProbeCgroups found (default: none; the job shim then tracks the process tree itself).
  CgroupSupport cgroups;
};

struct LaunchSpec {
  std::string job_id;  // [A-Za-z0-9_.-]
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;  // added to a minimal base environment
  std::string workdir;                     // empty: the user's home (or / )
  std::string user;                        // used only when running as root
  // Value for CUDA_VISIBLE_DEVICES ("0,1", "MIG-<uuid>"; "" = none visible).
  std::string cuda_visible_devices;
  // Device minors (/dev/nvidia<N>) of the job's GPUs: with a cgroup device filter, the only
  // GPU device files the job can open (none for a CPU-only job).
  std::vector<uint32_t> gpu_minors;
  int64_t cpu_milli = 0;   // cgroup CPU limit (0: none)
  int64_t memory_mib = 0;  // cgroup memory limit (0: none)
  int64_t attempt = 0;     // the server's attempt number, reported back with the status
};

enum class JobPhase { kStarting, kRunning, kExited };

struct JobStatus {
  std::string job_id;
  JobPhase phase = JobPhase::kStarting;
  int pid = 0;
  std::optional<int> exit_code;  // normal exit
  std::optional<int> signal;     // killed by a signal
  std::string error;             // launch failure (exec, user, workdir): exit_code 127
  int64_t attempt = 0;           // LaunchSpec::attempt of this run
};

class Runner {
 public:
  Runner(RunnerOptions options, Clock* clock);
  // No user policy beyond the defaults, no cgroups.
  Runner(std::string state_dir, std::vector<std::string> shim_argv, Clock* clock,
         Duration grace = std::chrono::seconds(10));

  // Writes the spec and starts the shim. AlreadyExists when the job directory exists,
  // PermissionDenied for a user the policy refuses, InvalidArgument for a bad spec.
  Status Launch(const LaunchSpec& spec);
  // SIGTERM to every process of the job now (its cgroup, or its process group and every
  // process the shim adopted); SIGKILL after the grace period (sent by Poll()): `grace` when
  // given (a preemption's), else the runner's. A repeated cancel keeps the first deadline.
  // NotFound when the job is unknown; OK (no-op) when it already exited.
  Status Cancel(const std::string& job_id, std::optional<Duration> grace = std::nullopt);
  // Status of every job with a directory, sending due SIGKILLs first.
  std::vector<JobStatus> Poll();
  // One job's status.
  Result<JobStatus> Get(const std::string& job_id);
  // Removes an exited job's directory (after the server recorded its end).
  Status Forget(const std::string& job_id);

  std::string JobDir(const std::string& job_id) const;
  const std::string& state_dir() const { return options_.state_dir; }
  const CgroupSupport& cgroups() const { return options_.cgroups; }

 private:
  JobStatus Read(const std::string& job_id) const;
  Status CheckUser(const std::string& user) const;
  // The shim's pid while it runs (0 when it is gone or never wrote its pid).
  int LiveShim(const std::string& job_id) const;
  // The job's cgroup directory ("" when it has none).
  std::string JobCgroup(const std::string& job_id) const;

  RunnerOptions options_;
  Clock* clock_;
  std::map<std::string, MonoTime> kill_deadlines_;
};

// Entry point of the job shim: `argv` = {..., job_dir}. Returns the process exit code.
// Signals it takes from the runner: SIGTERM (pass SIGTERM to every process of the job) and
// SIGUSR1 (kill every process of the job).
int ShimMain(const std::string& job_dir);

// Closes every descriptor from `lowest` up (close_range, or one by one where the kernel lacks
// it). Async-signal-safe: for use between fork and exec.
void CloseDescriptorsFrom(int lowest);

inline constexpr EnumTable<JobPhase, 3> kJobPhaseNames{"job phase",
                                                       {{{JobPhase::kStarting, "starting"},
                                                         {JobPhase::kRunning, "running"},
                                                         {JobPhase::kExited, "exited"}}}};
constexpr const auto& NamesOf(JobPhase) { return kJobPhaseNames; }
inline std::string JobPhaseName(JobPhase v) { return std::string(kJobPhaseNames.Name(v)); }

}  // namespace stoker::runner
