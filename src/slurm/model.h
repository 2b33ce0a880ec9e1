#pragma once
// What Stoker reads from Slurm, and the parsers for Slurm's answers. Nodes and jobs come from
// `sinfo --json` / `squeue --json` (Slurm 22.05's openapi/v0.0.38 dump), partitions from
// `scontrol -o show partition` (one line of Key=Value per partition). Every parser returns
// InvalidArgument naming the command, the record and the field on a malformed answer; none
// throws or crashes.

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "scheduler/resources.h"

namespace stoker::slurm {

struct SlurmNode {
  std::string name;
  std::string state;                     // lower case: idle, mixed, allocated, down, ...
  std::vector<std::string> state_flags;  // DRAIN, NOT_RESPONDING, ...
  int64_t cpus = 0;
  int64_t alloc_cpus = 0;
  int64_t real_memory_mib = 0;
  int64_t alloc_memory_mib = 0;
  int32_t gpus = 0;                       // gres gpu count
  int32_t gpus_used = 0;                  // gres_used gpu count
  std::vector<int32_t> gpu_used_indices;  // from gres_used "(IDX:...)" when present
  std::string gpu_type;                   // "a100" in gpu:a100:8; empty when untyped
  int32_t shards = 0;                     // gres shard count (GPU sharing), 0 without shards
  int64_t weight = 1;
  std::vector<std::string> partitions;
  std::string reason;

  // Up and schedulable (not down, drained, failing or powered off).
  bool Usable() const;
  // Shards on each GPU (gres.conf spreads a node's shards evenly over its GPUs); 0 without.
  int32_t ShardsPerGpu() const { return gpus > 0 ? shards / gpus : 0; }
};

// The milli-GPUs that `shards` shards count as where a GPU is cut into `per_gpu` shards, at most
// `gpus` whole GPUs: rounded up, so one shard in use keeps a GPU from being given whole. The
// controller, the efficiency engine and the ledger all count shards with this.
inline int32_t ShardMilli(int32_t shards, int32_t per_gpu, int32_t gpus = 1) {
  if (shards <= 0 || per_gpu <= 0 || gpus <= 0) return 0;
  return static_cast<int32_t>(
      std::min<int64_t>(int64_t{gpus} * scheduler::kMilliPerGpu,
                        (int64_t{shards} * scheduler::kMilliPerGpu + per_gpu - 1) / per_gpu));
}

struct SlurmJob {
  uint32_t id = 0;
  std::string name;
  std::string user;
  uint32_t user_id = 0;
  std::string partition;
  std::string qos;
  std::string state;                        // upper case: PENDING, RUNNING, COMPLETING, ...
  std::string state_reason;                 // None, Priority, JobHeldUser, ...
  std::vector<std::string> nodes;           // expanded from the job's host list
  std::vector<std::string> required_nodes;  // ReqNodeList (what steering sets), expanded
  std::vector<std::string> excluded_nodes;  // ExcNodeList (what the submit plan sets), expanded
  int32_t gpus_per_node = 0;                // tres_per_node gres:gpu:N (or gres/gpu:N)
  int32_t gpus_per_job = 0;                 // tres_per_job (--gpus=N)
  std::string gpu_type;                     // "a100" in gres:gpu:a100:2; empty when untyped
  int32_t shards_per_node = 0;              // tres_per_node gres:shard:N (GPU sharing)
  // Per allocated node (same order as `nodes`), from gres_detail: the GPU indices held whole,
  // and the shards held with the GPUs they are on (Slurm 22.05 takes a job's shards on one node
  // from one GPU; when a detail names several, the shards are split evenly over them).
  std::vector<std::vector<int32_t>> gpu_indices;
  std::vector<int32_t> shard_counts;
  std::vector<std::vector<int32_t>> shard_gpus;
  int64_t cpus = 0;
  int64_t submit_time = 0;  // Unix seconds; 0 when unknown
  int64_t start_time = 0;
  int64_t end_time = 0;
  uint64_t priority = 0;
  bool requeue = true;
  bool batch = true;
  std::string comment;
  std::string admin_comment;

  bool Running() const { return state == "RUNNING"; }
  bool Pending() const { return state == "PENDING"; }
  // Running or still releasing its resources: what it holds counts as used.
  bool Holding() const { return Running() || state == "COMPLETING" || state == "SUSPENDED"; }
  bool Held() const;  // pending and held (priority 0 / JobHeld*)
  // Named interactive* or without a batch script (salloc, srun alone).
  bool Interactive() const { return !batch || name.starts_with("interactive"); }
  // GPUs the job asks for on one node (whole GPUs), 0 for a CPU-only job.
  int32_t GpusWanted() const;
};

struct SlurmPartition {
  std::string name;
  std::vector<std::string> nodes;
  std::string state;  // UP, DOWN, DRAIN, INACTIVE
  bool is_default = false;
};

// Largest answer accepted from a Slurm command, and the most host names one host list may
// expand to: bounds on input from outside.
inline constexpr size_t kMaxAnswerBytes = size_t{256} << 20;
inline constexpr size_t kMaxHostListNames = 100000;

Result<std::vector<SlurmNode>> ParseSinfoJson(std::string_view text);
Result<std::vector<SlurmJob>> ParseSqueueJson(std::string_view text);
Result<std::vector<SlurmPartition>> ParsePartitionsText(std::string_view text);

// "g[1-3,7],h2" -> g1 g2 g3 g7 h2. InvalidArgument on unbalanced brackets, bad ranges, or more
// than kMaxHostListNames names.
Result<std::vector<std::string>> ExpandHostList(std::string_view list);
// "0-2,5" -> 0 1 2 5 (indices in gres "IDX:" fields). InvalidArgument when malformed.
Result<std::vector<int32_t>> ParseIndexList(std::string_view list);

// A gres string ("gpu:8", "gpu:a100:4(S:0-1),shard:16", "gpu:a100:2(IDX:0-1)",
// "shard:3(IDX:0)") -> the gpu count, the type and the indices named by IDX, and the same for
// shards. InvalidArgument when the gpu or shard part is malformed.
struct GresGpu {
  int32_t count = 0;
  std::string type;
  std::vector<int32_t> indices;
  int32_t shards = 0;
  std::vector<int32_t> shard_indices;
};
Result<GresGpu> ParseGresGpu(std::string_view gres);
// "gres:gpu:2", "gres/gpu:2", "gres:gpu:a100:2" -> 2; 0 when no gpu is named. `type` (when not
// null) gets the GPU type named, if any.
Result<int32_t> ParseTresGpuCount(std::string_view tres, std::string* type = nullptr);
// The same for shards: "gres:shard:4", "gres/shard:4" -> 4.
Result<int32_t> ParseTresShardCount(std::string_view tres);

}  // namespace stoker::slurm
