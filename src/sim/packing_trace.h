#pragma once
// Loaders for the Alibaba "openb" node and pod lists (ATC'23 FGD artifact; see
// ../shared/traces/README.md) used by the static packing experiment.
//
// Bad input is reported, never crashed on: a missing field, a non-integer, a negative or
// overflowing value, or an unknown GPU model is an error naming the file, line and field; with
// skip_bad_rows the row is dropped and counted instead.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "scheduler/cluster.h"
#include "scheduler/resources.h"

namespace stoker::sim {

// Node list: header `sn,cpu_milli,memory_mib,gpu,model`. GPU models are interned into the
// returned cluster's model table.
Result<scheduler::ClusterState> LoadOpenbNodes(const std::string& path, bool skip_bad_rows = false,
                                               int64_t* skipped = nullptr);
Result<scheduler::ClusterState> ParseOpenbNodes(std::string_view text, std::string_view source,
                                                bool skip_bad_rows, int64_t* skipped);

struct PodList {
  std::string workload;                  // "default" for openb_pod_list_default.csv
  std::vector<scheduler::Request> pods;  // in file order
  int64_t skipped_rows = 0;
};

// Pod list: header `name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,...` (further
// columns ignored). gpu_spec names must exist in `models` (the node list's models).
Result<PodList> LoadOpenbPods(const std::string& path, const scheduler::GpuModelTable& models,
                              bool skip_bad_rows = false);
Result<PodList> ParseOpenbPods(std::string_view text, std::string_view source,
                               const scheduler::GpuModelTable& models, bool skip_bad_rows);

// "…/openb_pod_list_gpushare40.csv" -> "gpushare40"; other names: the file stem.
std::string WorkloadNameFromPath(std::string_view path);

}  // namespace stoker::sim
