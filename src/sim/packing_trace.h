#pragma once
// Loaders for the Alibaba "openb" node and pod lists (ATC'23 FGD artifact; see
// ../shared/traces/README.md) used by the static packing experiment.
//
// Columns are found by name in the header, so their order does not matter and columns the
// simulator does not use are ignored. Bad input is reported, never crashed on: a missing column,
// a row with another number of fields than the header, a missing field, a non-integer, a
// negative or overflowing value, or an unknown GPU model is an error naming the file, the line
// and the column ("pods.csv:12: column 3 (memory_mib): not an integer: '1x'"); with
// skip_bad_rows the row is dropped and counted instead.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "scheduler/cluster.h"
#include "scheduler/resources.h"

namespace stoker::sim {

// Node list: columns `sn,cpu_milli,memory_mib,gpu` and `model` (required where gpu > 0). GPU models
// are interned into the returned cluster's model table.
Result<scheduler::ClusterState> LoadOpenbNodes(const std::string& path, bool skip_bad_rows = false,
                                               int64_t* skipped = nullptr);
Result<scheduler::ClusterState> ParseOpenbNodes(std::string_view text, std::string_view source,
                                                bool skip_bad_rows, int64_t* skipped);

struct PodList {
  std::string workload;                  // "default" for openb_pod_list_default.csv
  std::vector<scheduler::Request> pods;  // in file order
  std::vector<std::string> names;        // the `name` of each pod
  int64_t skipped_rows = 0;
};

// Pod list: columns `name,cpu_milli,memory_mib,num_gpu,gpu_milli`, optionally `gpu_spec` and
// `qos` (the published lists have eleven columns; FGD's multi-GPU lists only the first five). A
// missing optional column means no constraint: any GPU model, not best-effort. gpu_spec names
// must exist in `models` (the node list's models).
Result<PodList> LoadOpenbPods(const std::string& path, const scheduler::GpuModelTable& models,
                              bool skip_bad_rows = false);
Result<PodList> ParseOpenbPods(std::string_view text, std::string_view source,
                               const scheduler::GpuModelTable& models, bool skip_bad_rows);

// "…/openb_pod_list_gpushare40.csv" -> "gpushare40"; other names: the file stem.
std::string WorkloadNameFromPath(std::string_view path);

}  // namespace stoker::sim
