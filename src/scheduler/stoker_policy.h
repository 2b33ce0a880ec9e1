#pragma once
// Stoker's default placement policy ("stoker"). See docs/scheduling.md for the design.

#include <memory>

#include "scheduler/policy.h"

namespace stoker::scheduler {

// When the learned typical-shape distribution is refreshed (every 512 requests), stoker adopts
// the new one only if it moved enough from the one in use: total-variation distance of the
// shape frequencies, or relative change of the CPU-per-GPU ratio, above the threshold. Adopting
// changes every node's score, so every cached shape index is rebuilt (10,000 rescorings on a
// 10,000-node cluster); in steady state adoptions become rare. 0 adopts every refresh.
struct StokerOptions {
  double refresh_threshold = 0.05;
  // Every cached shape index follows every cluster change (see
  // ScoringPolicy::EagerExactCatchUp); false: a shape catches up when next requested.
  bool eager_catch_up = true;
  // Changed nodes get a cheap upper bound on their score in every cached shape (as fgd's do) and
  // are scored exactly only when their bound reaches the top; false: exact rescoring (with
  // eager_catch_up, a budget per decision).
  bool score_bound = true;
};
// For tests: stoker's score of `r` on `node` (false where `r` cannot run there) and the upper
// bound its score index marks changed nodes with.
bool StokerScoreAndBound(PlacementPolicy& stoker, const Request& r, const ClusterState& c,
                         int32_t node, int64_t* score, int64_t* bound);
// Adoptions of a new typical-shape distribution so far (tests, benchmarks).
int64_t StokerAdoptions(const PlacementPolicy& stoker);
// Adoptions of new reserve weights so far (each, like an adoption of typical shapes, drops every
// cached score; tests, benchmarks).
int64_t StokerReserveAdoptions(const PlacementPolicy& stoker);
// Nodes scored exactly so far (the work the score bounds leave; benchmarks).
int64_t StokerExactScorings(const PlacementPolicy& stoker);

std::unique_ptr<PlacementPolicy> MakeStokerPolicy(const PolicyConfig& config);
std::unique_ptr<PlacementPolicy> MakeStokerPolicy(const PolicyConfig& config,
                                                  StokerOptions options);

}  // namespace stoker::scheduler
