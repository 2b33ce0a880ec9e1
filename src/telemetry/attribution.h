#pragma once
// Which job a GPU process belongs to. The agent reads /proc/<pid>/cgroup (authoritative: a job
// cannot leave its cgroup) and falls back to the process environment (STOKER_JOB_ID,
// SLURM_JOB_ID), which a process can change and which is unreadable for other users' processes.
// The Stoker job cgroup convention (scope name, environment variable) is core/job_scope.h's.

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/clock.h"
#include "core/gpu.h"
#include "core/job_scope.h"
#include "core/status.h"

namespace stoker::telemetry {

inline constexpr std::string_view kSlurmJobEnvVar = "SLURM_JOB_ID";
inline constexpr std::string_view kSlurmStepEnvVar = "SLURM_STEP_ID";  // set in srun steps

// What a cgroup path says about its owner.
struct CgroupAttribution {
  JobRef job;                   // kind kNone when the path names no known job
  std::optional<uint32_t> uid;  // Slurm's uid_<N> component, when present
};

// Parses the content of /proc/<pid>/cgroup (one "hierarchy-id:controllers:path" per line,
// cgroup v1 and v2). Recognises, in this order: Stoker scopes, Slurm (v1
// /slurm[_<node>]/uid_<N>/job_<id>/step_<s>, v2 .../slurmstepd.scope/job_<id>/step_<s>; the
// job id and, where present, the step),
// Kubernetes (cgroupfs /kubepods[/<qos>]/pod<uid>/<container>, systemd
// kubepods-<qos>-pod<uid_with_underscores>.slice/cri-containerd-<id>.scope and docker-/crio-).
// Kubernetes jobs are identified by pod UID (the agent does not talk to the kubelet); the
// container field holds the container id.
CgroupAttribution ParseCgroupFile(std::string_view content);

// Looks `name` up in a NUL-separated environment block (/proc/<pid>/environ).
std::optional<std::string> FindEnvVar(std::string_view environ_block, std::string_view name);

// Everything the attributor needs to know about one process.
struct ProcessFacts {
  std::string name;           // executable name (comm), empty when unknown
  std::string cgroup;         // content of /proc/<pid>/cgroup, empty when unreadable
  std::string environ_block;  // NUL-separated environment, empty when unreadable
  std::optional<uint32_t> uid;
  std::string user;  // resolved name; empty -> the attributor resolves uid
};

// Where process facts come from: /proc in production, the scenario in simulated mode.
// Thread-safe.
class ProcessInfo {
 public:
  virtual ~ProcessInfo() = default;
  // NotFound when the process no longer exists.
  virtual Result<ProcessFacts> Lookup(uint32_t pid) const = 0;
  // User name for `uid`, or the uid as text when it has no passwd entry.
  virtual std::string UserName(uint32_t uid) const;
};

// Reads <proc_root>/<pid>/{comm,cgroup,environ,status}. `proc_root` is injectable for tests.
class ProcfsProcessInfo final : public ProcessInfo {
 public:
  explicit ProcfsProcessInfo(std::string proc_root = "/proc") : root_(std::move(proc_root)) {}
  Result<ProcessFacts> Lookup(uint32_t pid) const override;

 private:
  std::string root_;
};

// A second source of attribution, consulted after a sample's processes are attributed: who
// holds the GPU by allocation (on Kubernetes, the kubelet's PodResources: k8s/pod_attribution.h).
// It fills the sample's claims and names the pod and container of processes that the cgroup
// could only tie to a pod UID. Thread-safe (the per-GPU sampler threads call it).
class ClaimResolver {
 public:
  virtual ~ClaimResolver() = default;
  virtual void Resolve(GpuSample* sample, const ProcessInfo& info) const = 0;
};

// Combines cgroup and environment into a JobRef and caches the answer per pid, so each process
// costs a few /proc reads once, not once per sample. Entries not touched for `ttl` are evicted
// by Prune() (exited processes disappear; a pid reused within ttl would inherit the old
// answer, which is why ttl is a few sample intervals, not minutes). Thread-safe.
class Attributor {
 public:
  Attributor(const ProcessInfo* info, const Clock* clock, Duration ttl = std::chrono::seconds(10));

  // Fills process.job and process.name (when empty) for every process of `sample`, then lets
  // the claim resolver (if any) add the sample's claims and name pods.
  void Attribute(GpuSample* sample);
  // `resolver` (not owned; may be null) must outlive this. Set before sampling starts.
  void SetClaimResolver(const ClaimResolver* resolver) { claims_ = resolver; }
  // Returns the attribution of one pid (cached).
  JobRef AttributePid(uint32_t pid, std::string* name = nullptr);
  // Drops entries last used before now - ttl.
  void Prune();
  size_t cache_size() const;

 private:
  struct Entry {
    JobRef job;
    std::string name;
    MonoTime last_used;
  };
  JobRef Resolve(uint32_t pid, std::string* name) const;

  const ProcessInfo* info_;
  const Clock* clock_;
  const ClaimResolver* claims_ = nullptr;
  Duration ttl_;
  mutable std::mutex mu_;
  std::unordered_map<uint32_t, Entry> cache_;  // guarded by mu_
  MonoTime last_prune_;                        // guarded by mu_
};

}  // namespace stoker::telemetry
