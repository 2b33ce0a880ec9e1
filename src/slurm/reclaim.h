#pragma once
// Idle reclaim for Slurm jobs, through the efficiency engine's IdleReclaimer (the same sliding
// idle-run logic, exemptions, evidence and audit records as for Stoker's own jobs), with Slurm
// as the job directory and Slurm's levers as the actions. Two rules, each one IdleReclaimer:
//   - "idle": every sample of the job's GPUs idle for warn_after (then act_after). The idle run
//     starts at the last busy sample, so a job that was busy for a minute and then sat idle is
//     caught after warn_after of idleness (Job Defense Shield averages over its whole window
//     and misses it);
//   - "memory_held_while_idle": idle while the job's processes hold at least
//     held_memory_min_bytes of GPU memory (the GPU cannot be shared or given away), usually
//     with shorter times.
// Warnings set the job's Comment (`scontrol update JobId=<id> Comment=...`) and run the hook;
// actions requeue or cancel through Slurm after re-reading the job: one that vanished, ended,
// or was restarted since the evidence was gathered is not touched (logged and counted).

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/gpu.h"
#include "efficiency/config.h"
#include "efficiency/idle_reclaim.h"
#include "efficiency/jobs.h"
#include "slurm/client.h"

namespace stoker::slurm {

struct SlurmReclaimOptions {
  efficiency::IdleReclaimPolicy idle;
  efficiency::IdleReclaimPolicy memory_held;  // enabled=false to turn the rule off
  uint64_t held_memory_min_bytes = uint64_t{1} << 30;
  efficiency::ActivityMetric metric = efficiency::ActivityMetric::kAuto;
  // Exempt partitions and QOS (in addition to each policy's users and classes; the job class
  // is the partition). Jobs named interactive* or without a batch script are interactive.
  std::vector<std::string> exempt_partitions;
  std::vector<std::string> exempt_qos;
  // Optional hook run on every warning and action (argv, no shell), with STOKER_SLURM_JOB_ID,
  // STOKER_SLURM_USER, STOKER_RECLAIM_RULE, STOKER_RECLAIM_ACTION, STOKER_RECLAIM_MESSAGE in
  // its environment (a mail or webhook script).
  std::vector<std::string> hook;
  std::string audit_path;  // JSON lines appended per record; empty: in memory only
};

struct SlurmReclaimRecord {
  std::string rule;  // "idle" or "memory_held_while_idle"
  efficiency::ReclaimRecord record;
  uint64_t memory_held_bytes = 0;  // at the last sample, over the job's GPUs
};

struct SlurmReclaimMetrics {
  int64_t warnings = 0;
  int64_t requeues = 0;
  int64_t cancels = 0;
  int64_t exemptions = 0;
  int64_t refused_stale = 0;  // job vanished/ended/restarted since the evidence
  int64_t action_errors = 0;
  int64_t hook_errors = 0;
  int64_t samples_unattributed = 0;  // GPU samples with processes of no Slurm job
};

class SlurmReclaim {
 public:
  SlurmReclaim(SlurmClient* client, SlurmReclaimOptions options);
  ~SlurmReclaim();

  // The jobs as Slurm listed them this cycle: running ones are the directory; jobs that left
  // or restarted (requeued and started again) are forgotten.
  void UpdateJobs(const std::vector<SlurmJob>& jobs);
  // One GPU sample (already attributed by the agent): feeds both rules for each Slurm job on it,
  // the jobs its processes belong to and `holders`, the jobs Slurm allocated the GPU to (a job
  // that holds a GPU without a process on it is as idle as a job can be).
  void Observe(const GpuSample& sample, const std::vector<std::string>& holders = {});
  // Applies both rules at `now`; returns the records made (also in audit()).
  std::vector<SlurmReclaimRecord> Evaluate(WallTime now);

  // The newest records (at most kMaxAuditInMemory; the audit file has all of them).
  static constexpr size_t kMaxAuditInMemory = 10000;
  const std::vector<SlurmReclaimRecord>& audit() const { return audit_; }
  const SlurmReclaimMetrics& metrics() const { return metrics_; }

 private:
  class Directory;
  class Actions;
  void Append(const SlurmReclaimRecord& r);

  SlurmClient* client_;
  SlurmReclaimOptions options_;
  std::unique_ptr<Directory> directory_;
  std::unique_ptr<Actions> idle_actions_, memory_actions_;
  std::unique_ptr<efficiency::IdleReclaimer> idle_, memory_;
  std::map<std::string, uint64_t> memory_held_;  // job -> bytes at its last sample
  std::set<std::string> acted_;                  // requeued/cancelled in the current run
  std::vector<SlurmReclaimRecord> audit_;
  SlurmReclaimMetrics metrics_;
};

// The audit record as one JSON object (the audit file's line format).
std::string ReclaimRecordJson(const SlurmReclaimRecord& r);

}  // namespace stoker::slurm
