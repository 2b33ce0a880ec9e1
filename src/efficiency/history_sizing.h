#pragma once
// Cluster sizing from a server's own history (`stoker sim size --history`): the jobs and GPU
// samples a running server recorded (efficiency/records.h; GET /api/v1/report?format=records)
// say, per job class, what the class actually needs, and the same search as `stoker sim size`
// (sizing.h) says how many GPUs of each model would have served that history within the
// queueing targets, and at what cost at the configured prices.
//
// Per job, from its samples: the memory peak on any of its GPUs, the 95th percentile of its
// activity (SM activity where measured, else utilisation), its mean tensor-core activity, and
// how many of its GPUs did work (mean activity at least busy_gpu_threshold). Per class (the job's
// class; "-" without one), the largest of those over its jobs. What the class needs:
//   - several busy GPUs: that many whole GPUs;
//   - one, on a MIG-capable model (A100, H100, H200, B200, A30): the smallest MIG profile whose
//     memory holds the peak plus memory_headroom and whose compute slices (of 7) cover the
//     activity percentile; 7g (a whole GPU) when nothing smaller does;
//   - one, on another model: a whole GPU.
// The model is the one the class ran on: how fast a job would run on another model is not in
// the history, so the answer never moves a class to a model it did not use.
//
// Sizing, per model: the jobs replayed (recorded submission and run time, FIFO, no backfill)
// on a cluster of GPUs split into 7 compute slices each: a slice job takes its slices on one
// GPU, a job of n whole GPUs n whole GPUs. MIG placement rules beyond the slice count (which
// profiles may sit side by side) are not modelled. The search runs twice: with every job as it
// was allocated (whole GPUs, as requested) and with every job at its class's need.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "efficiency/config.h"
#include "efficiency/records.h"
#include "efficiency/sizing.h"

namespace stoker::efficiency {

struct ClassNeed {
  std::string job_class;  // "-" for jobs without a class
  std::string model;      // the GPU model its jobs ran on (short name where known, e.g. "H100")
  int64_t jobs = 0;
  int gpus_requested = 0;       // most GPUs any of its jobs held
  int gpus_busy = 0;            // most GPUs any of its jobs kept busy
  uint64_t mem_peak_bytes = 0;  // largest memory peak on one GPU
  uint64_t mem_total_bytes = 0;
  double activity_p95 = 0;              // largest per-job 95th percentile, 0..1
  std::optional<double> tensor_active;  // mean over its jobs' samples, 0..1, where measured
  std::string need;                     // "1g.10gb" .. "7g.80gb", "1 GPU", "4 GPUs"
  int slices = 0;                       // compute slices per job (7 per whole GPU)
};

struct ModelSize {
  std::string model;
  int64_t jobs = 0;
  int recorded_gpus = 0;      // distinct GPUs of this model in the samples
  int32_t as_requested = -1;  // GPUs that meet the targets with whole GPUs as allocated
  int32_t right_sized = -1;   // ... with every class at its need; -1: none up to the limit
  double queue_mean_s = 0, queue_p99_s = 0;  // at right_sized
  int64_t price_per_gpu_hour_micro = 0;
  // Cost of the history's span at that price, currency units x 1e6.
  int64_t cost_recorded_micro = 0, cost_as_requested_micro = 0, cost_right_sized_micro = 0;
};

struct HistorySizing {
  WallTime from{}, to{};
  double span_hours = 0;
  int64_t jobs_used = 0;     // jobs that ran and had samples
  int64_t jobs_skipped = 0;  // never started, or no sample names them
  std::vector<ClassNeed> classes;
  std::vector<ModelSize> models;
};

struct HistorySizingOptions {
  QueueTargets targets;
  double memory_headroom = 0.10;      // a slice must hold the memory peak x (1 + this)
  double busy_gpu_threshold = 0.10;   // a GPU did work when its mean activity reached this
  double activity_percentile = 0.95;  // of a job's samples, for the compute a slice must give
  std::map<std::string, int64_t> price_per_gpu_hour_micro;  // by model, "*" = default
  int32_t max_gpus = 100'000;
  std::string queue_policy = "fifo";
  std::function<void(const std::string& model, const SizingProbe&)> on_probe;
};

// InvalidArgument when the history has no job with samples, or for bad options.
Result<HistorySizing> SizeFromHistory(const RecordSet& history, const HistorySizingOptions& o);

}  // namespace stoker::efficiency
