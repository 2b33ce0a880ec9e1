#pragma once
// Per-job efficiency summaries for Slurm jobs, in the form Princeton's jobstats tools read from
// a job's AdminComment: "JS1:" + base64(gzip(JSON)), the JSON being
//   {"gpus": N, "total_time": <elapsed s>, "nodes": {"<host>": {"cpus": N,
//     "gpu_total_memory": {"<idx>": bytes}, "gpu_used_memory": {"<idx>": bytes (peak)},
//     "gpu_utilization": {"<idx>": percent (mean)}, ...}}}
// (the public description of the format: docs/slurm.md). Stoker adds, per node,
// "gpu_sm_active" and "gpu_tensor_active" (mean percent, where the GPU reports GPM),
// "gpu_energy_joules", and at top level "cost" and "cost_currency". It measures GPUs, not
// cgroups, so the CPU keys total_memory/used_memory/total_time are left out.
// Slurm 22.05 refuses `scontrol update AdminComment=` once a job has finished, so the
// collector writes the summary while the job runs (every publish interval) and the last one
// stands at job end; with slurmdbd, `sacctmgr` can rewrite it afterwards.

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/gpu.h"
#include "core/status.h"
#include "slurm/client.h"

namespace stoker::slurm {

// "JS1:" + base64(gzip(json.dump())).
Result<std::string> EncodeJS1(const nlohmann::json& summary);
// The inverse; InvalidArgument for a missing prefix, bad base64, bad gzip or bad JSON, and for
// a decompressed size over 1 MiB.
Result<nlohmann::json> DecodeJS1(std::string_view text);

struct JobStatsOptions {
  double price_per_gpu_hour = 0;  // 0: no cost key
  std::string currency = "USD";
  int64_t publish_every_s = 60;  // AdminComment refresh per running job
};

// Accumulates what the agents report for Slurm jobs' GPUs (samples attributed by the agent).
// Not thread-safe: one owner serialises calls.
class JobStatsCollector {
 public:
  explicit JobStatsCollector(JobStatsOptions options) : options_(std::move(options)) {}
  // One GPU sample of `host`, for the Slurm jobs its processes belong to and `holders` (the jobs
  // Slurm allocated the GPU to).
  void Observe(const std::string& host, const GpuSample& sample,
               const std::vector<std::string>& holders = {});
  // The jobstats JSON for `job` (empty object when nothing was observed).
  nlohmann::json Summary(const SlurmJob& job, int64_t now_unix) const;
  // Writes the summary of every running job observed, at most every publish_every_s; drops
  // state of jobs that left. Returns the number written; errors are logged and counted.
  int Publish(SlurmClient& client, const std::vector<SlurmJob>& jobs, int64_t now_unix);
  int64_t publish_errors() const { return publish_errors_; }

 private:
  struct Gpu {
    uint64_t total_memory = 0, peak_memory = 0;
    int64_t util_sum = 0, util_n = 0;
    double sm_sum = 0, tensor_sum = 0;
    int64_t gpm_n = 0;
    uint64_t energy_first_mj = 0, energy_last_mj = 0;
    bool energy_seen = false;
  };
  struct Job {
    std::map<std::string, std::map<uint32_t, Gpu>> hosts;  // host -> GPU index -> stats
    int64_t last_published = 0;
  };
  JobStatsOptions options_;
  std::map<std::string, Job> jobs_;
  int64_t publish_errors_ = 0;
};

// A finished job as Slurm's jobcomp/script hands it over (its environment: JOBID, USERNAME,
// UID, PARTITION, JOBSTATE, START, END, NODES, ...). scripts/slurm-jobcomp.sh writes that
// environment NUL-separated into a spool directory; ReadJobCompSpool turns each file into one
// record for the cost ledger and removes it.
struct JobCompRecord {
  uint32_t job = 0;
  std::string user;
  uint32_t uid = 0;
  std::string partition;
  std::string state;
  std::vector<std::string> nodes;
  int64_t start = 0, end = 0;  // Unix seconds
  int64_t elapsed_s() const { return end > start ? end - start : 0; }
};
// Parses one NUL-separated environment block; InvalidArgument naming the variable otherwise.
Result<JobCompRecord> ParseJobCompEnv(std::string_view environ_block);
// Reads and removes every "*.env" file in `dir`; unreadable or malformed files are moved to
// "<name>.bad" with the error logged, never dropped silently.
std::vector<JobCompRecord> ReadJobCompSpool(const std::string& dir, int* bad = nullptr);
// GPU-hours times the price.
double JobCost(const JobCompRecord& r, int32_t gpus, double price_per_gpu_hour);

}  // namespace stoker::slurm
