#pragma once
// Jobs as a large scheduling pass leaves them, for the benchmarks of what observes a server (the
// efficiency engine, the dashboard's history): `n` one-GPU jobs of user "alice", assigned in
// order to nodes of `gpus_per_node` GPUs named "node-<k>" (job i + 1 on node i / gpus_per_node,
// GPU i % gpus_per_node), submitted at `submit_ms`. Header only, on the protocol's types: its
// users link stoker::protocol themselves (the benchmarks of the server's observers do).

#include <cstdint>
#include <string>
#include <vector>

#include "protocol/model.h"

namespace stoker::testing {

inline std::vector<protocol::Job> PlacedOneGpuJobs(int n, int gpus_per_node, int64_t submit_ms) {
  std::vector<protocol::Job> jobs(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    protocol::Job& j = jobs[static_cast<size_t>(i)];
    j.id = i + 1;
    j.user = "alice";
    j.state = protocol::JobState::kAssigned;
    j.spec.gpus = 1;
    j.submit_ms = submit_ms;
    protocol::Assignment a;
    a.node = "node-" + std::to_string(i / gpus_per_node);
    a.gpu_indices = {static_cast<uint32_t>(i % gpus_per_node)};
    j.assignment = a;
  }
  return jobs;
}

}  // namespace stoker::testing
