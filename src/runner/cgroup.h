#pragma once
// Per-job cgroups (cgroup v2) for the runner: a job's whole process tree lives in its own
// cgroup "stoker-job-<id>.scope" (core/job_scope.h) under a parent the node was given or found,
// so that
//   - cancel and job end reach every process, including those that left the process group or
//     the session (cgroup.kill);
//   - CPU (cpu.max) and memory (memory.max, swap off) limits are enforced where the parent has
//     those controllers;
//   - only the job's own GPUs can be opened (an eBPF device program on the job's cgroup that
//     refuses /dev/nvidia<minor> for every other minor; nvidiactl, nvidia-uvm and the MIG
//     capability devices stay open, as CUDA needs them).
//
// What a node can do is found once at start (ProbeCgroups) and said in its inventory and in
// `stoker nodes`; where cgroups are not delegated to it the runner falls back to the job
// shim's own process tracking (a child subreaper: see shim.cc).

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace stoker::runner {

struct CgroupSupport {
  // Directory under which job cgroups are made; empty: no cgroups (see `why_not`).
  std::string parent;
  bool kill = false;     // cgroup.kill (Linux 5.14+)
  bool cpu = false;      // the cpu controller is enabled for job cgroups
  bool memory = false;   // the memory controller is enabled for job cgroups
  bool devices = false;  // eBPF device programs can be attached (CAP_BPF / root)
  std::string why_not;   // what is missing, for the node's description

  bool enabled() const { return !parent.empty(); }
  // One line for logs and `stoker nodes`: "cgroup v2 at /sys/fs/cgroup/...: kill, cpu, memory,
  // devices" or "no cgroups (why): process tracking only".
  std::string Describe() const;
};

// Finds where this node can make job cgroups and what they can enforce. `requested`:
//   ""    the cgroup this process runs in, when it is delegated to it: the root of a cgroup2
//         mount (a container's namespace) or a cgroup systemd delegated (Delegate=yes marks it
//         with the trusted.delegate / user.delegate attribute); a process inside a delegated
//         cgroup moves itself into a leaf "stoker-agent" so that controllers can be handed down
//   "off" no cgroups
//   PATH  this cgroup v2 directory (made if missing)
// Job cgroups go in `<that>/<node_dir>` (one directory per node state folder, so several agents
// on one host never share a job's cgroup name). Never fails: what cannot be used is said in
// why_not.
CgroupSupport ProbeCgroups(const std::string& requested, const std::string& node_dir);

// Limits and devices of one job's cgroup. Zero means no limit.
struct CgroupLimits {
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  // When true, /dev/nvidia<minor> may be opened only for these minors.
  bool restrict_gpus = false;
  std::vector<uint32_t> gpu_minors;
};

// Creates (or reuses, after an agent restart) the job's cgroup and applies the limits the
// support allows. Returns its directory.
Result<std::string> CreateJobCgroup(const CgroupSupport& support, const std::string& job_id,
                                    const CgroupLimits& limits);
// Kills every process in the cgroup (cgroup.kill, or SIGKILL to each listed pid).
Status KillCgroup(const std::string& dir);
// Sends `sig` to every process in the cgroup.
Status SignalCgroup(const std::string& dir, int sig);
// Pids in the cgroup (cgroup.procs).
std::vector<int> CgroupPids(const std::string& dir);
// Removes an empty job cgroup.
Status RemoveJobCgroup(const std::string& dir);

}  // namespace stoker::runner
