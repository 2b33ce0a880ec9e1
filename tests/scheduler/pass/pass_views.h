#pragma once
// Views and a one-call pass for the scheduling pass's tests.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "scheduler/pass/pass.h"
#include "scheduler/registry.h"

namespace stoker::pass::testing {

// A node of `gpus` plain GPUs and `mig_gpus` MIG GPUs (three 2-slice instances each).
inline NodeView Node(const std::string& name, int gpus, const std::string& model = "H100",
                     int mig_gpus = 0) {
  NodeView n;
  n.name = name;
  n.cpu_milli = 32000;
  n.memory_mib = 262144;
  for (int i = 0; i < gpus + mig_gpus; ++i) {
    GpuView g{static_cast<uint32_t>(i), model, 81920, i >= gpus, {}};
    if (g.mig_enabled) {
      for (int k = 0; k < 3; ++k) {
        g.mig.push_back(
            MigInstance{name + "-" + std::to_string(i) + "-mig" + std::to_string(k), 2});
      }
    }
    n.gpus.push_back(g);
  }
  return n;
}

// A queued job of `gpus` whole GPUs (1 CPU, 1 GiB).
inline JobView Queued(int64_t id, int gpus, bool preemptible = false, int priority = 0) {
  JobView j;
  j.id = id;
  j.phase = JobPhase::kQueued;
  j.cpu_milli = 1000;
  j.memory_mib = 1024;
  j.gpus = gpus;
  j.preemptible = preemptible;
  j.priority = priority;
  j.submit_ms = id;
  return j;
}

// `j` running on `node`, holding `milli` of each listed GPU position.
inline JobView Running(JobView j, const std::string& node, std::vector<uint8_t> gpus, int32_t milli,
                       int64_t start_ms = 0) {
  j.phase = JobPhase::kRunning;
  j.start_ms = start_ms;
  JobPlacement p;
  p.node = node;
  for (uint8_t g : gpus) p.shares.emplace_back(g, milli);
  j.placement = p;
  return j;
}

// One pass of a fresh SchedulingPass with `policy` and the FIFO queue.
inline Decision RunPass(const PassInput& in, const std::string& policy = "bestfit",
                        int32_t ratio = 1000, int64_t activity_window_ms = 300000) {
  auto pol = scheduler::CreatePlacementPolicy(policy, scheduler::PolicyConfig{});
  EXPECT_TRUE(pol.ok());
  SchedulingPass pass(std::move(*pol));
  auto fifo = queue::CreateQueuePolicy("fifo");
  EXPECT_TRUE(fifo.ok());
  return pass.Run(in, **fifo, PassOptions{policy, true, ratio, activity_window_ms});
}

inline const Action* Find(const Decision& d, int64_t job) {
  for (const Action& a : d.actions) {
    if (a.job == job) return &a;
  }
  return nullptr;
}

}  // namespace stoker::pass::testing
