#pragma once
// The configuration of Slurm as the server's engine (`stoker server --engine slurm
// --slurm-config FILE`): how to reach Slurm, how often to cycle, how to place (the scheduling
// pass's policies), where each node's agent answers, idle reclaim, job summaries and the
// jobcomp spool. YAML; every error names the file, and the field path (docs/slurm.md).
//
//   slurm_conf: /etc/slurm/slurm.conf   # SLURM_CONF for Slurm's commands (empty: Slurm's default)
//   bin_dir: ""                         # where sinfo, squeue, scontrol, scancel are (empty: PATH)
//   command_timeout: 30s
//   cycle: 2s                           # read Slurm, decide, act (a held job waits <= 1 cycle)
//   measure_every: 10s                  # agents' samples, reclaim, summaries (>= cycle)
//   placement: stoker                   # placement policy; queue and backfill as the server's
//   queue: fifo
//   backfill: true
//   manage_weights: true
//   steer_held_jobs: true
//   steer_marker: stoker:steer
//   keep_shards_apart: true             # whole-GPU and shard jobs on separate GPUs
//   submit_plan: /etc/slurm/stoker-submit-plan  # written every cycle for job_submit.lua
//   agents:
//     url: http://{node}:9400           # each node's `stoker agent`; {node} is the Slurm name
//     nodes: {g1: http://10.0.0.7:9400} # per-node addresses (override url)
//     timeout: 2s
//     parallel: 16                      # agents asked at once
//   reclaim:                            # absent: no idle reclaim of Slurm jobs
//     idle: {warn_after: 30m, act_after: 60m, action: requeue}      # idle_reclaim's keys
//     memory_held: {warn_after: 10m, act_after: 20m, action: cancel, min_memory: 1G}
//     exempt_partitions: [debug]
//     exempt_qos: []
//     hook: [/usr/local/bin/notify-owner]   # argv, no shell
//     audit_log: /var/lib/stoker/slurm-reclaim.jsonl
//   jobstats: {enabled: true, publish_every: 60s, price_per_gpu_hour: 2.5, currency: USD}
//   jobcomp_spool: /var/spool/stoker/jobcomp   # scripts/slurm-jobcomp.sh writes it

#include <map>
#include <string>
#include <string_view>

#include "core/duration.h"
#include "core/status.h"
#include "slurm/client.h"
#include "slurm/controller.h"
#include "slurm/jobstats.h"
#include "slurm/reclaim.h"

namespace stoker::slurm {

struct AgentsConfig {
  std::string url = "http://{node}:9400";    // {node} is replaced by the Slurm node name
  std::map<std::string, std::string> nodes;  // node -> base URL
  Duration timeout = std::chrono::seconds(2);
  int parallel = 16;
  // The base URL of `node`'s agent.
  std::string UrlFor(const std::string& node) const;
};

struct SlurmEngineConfig {
  CommandClientOptions client;
  Duration cycle = std::chrono::seconds(2);
  Duration measure_every = std::chrono::seconds(10);
  ControllerOptions controller;
  AgentsConfig agents;
  bool reclaim_enabled = false;
  SlurmReclaimOptions reclaim;
  bool jobstats_enabled = true;
  JobStatsOptions jobstats;
  std::string jobcomp_spool;  // empty: no spool
};

// `origin` (a file name) prefixes error messages.
Result<SlurmEngineConfig> LoadSlurmEngineConfigYaml(std::string_view text,
                                                    std::string_view origin = "slurm config");
Result<SlurmEngineConfig> LoadSlurmEngineConfigFile(const std::string& path);

}  // namespace stoker::slurm
