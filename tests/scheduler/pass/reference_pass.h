#pragma once
// The scheduling pass before its preemption planner was rewritten, kept as a reference for the
// randomized equivalence test (see reference_pass.cc).

#include <memory>

#include "scheduler/pass/pass.h"

namespace stoker::pass::reference {

// What SchedulingPass::Run decided at commit 9daeecc, with `placement` as the pass's policy and
// `be_placement` its best-effort instance (made when first needed, kept by the caller).
Decision RunReferencePass(scheduler::PlacementPolicy& placement,
                          std::unique_ptr<scheduler::PlacementPolicy>& be_placement,
                          const PassInput& in, const queue::QueuePolicy& queue_policy,
                          const PassOptions& options);

}  // namespace stoker::pass::reference
