#pragma once
// Spreads requests over replicas (each a model instance on its own GPU).
//
//   kRoundRobin        replicas in turn;
//   kLeastOutstanding  the replica with the fewest requests in flight;
//   kUtilization       the smallest expected completion time (outstanding + 1) * s_i, where
//                      s_i, the replica's time per request, is its live GPU utilization
//                      (UtilizationSource: what Stoker's agents export on /metrics) divided by
//                      the rate at which it completed requests over the last refresh period.
//                      A slow replica is busy longer for each request, so its utilization is
//                      high for a low completion rate; outstanding counts catch up between the
//                      utilization samples. Replicas with no estimate yet borrow the smallest
//                      known one (they get tried).
// Thread-safe.

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

#include "core/clock.h"
#include "core/enum_table.h"

namespace stoker::batch {

// Live GPU utilization of a replica in [0, 1]; nullopt when unknown (no sample yet, agent
// unreachable).
class UtilizationSource {
 public:
  virtual ~UtilizationSource() = default;
  virtual std::optional<double> Utilization(size_t replica) const = 0;
};

enum class RoutePolicy { kRoundRobin, kLeastOutstanding, kUtilization };
inline constexpr EnumTable<RoutePolicy, 3> kRoutePolicyNames{
    "route policy",
    {{{RoutePolicy::kRoundRobin, "round-robin"},
      {RoutePolicy::kLeastOutstanding, "least-outstanding"},
      {RoutePolicy::kUtilization, "utilization"}}}};
constexpr const auto& NamesOf(RoutePolicy) { return kRoutePolicyNames; }
inline const char* RoutePolicyName(RoutePolicy p) { return kRoutePolicyNames.CName(p); }

class ReplicaRouter {
 public:
  // `util` and `clock` are not owned; util may be null for the first two policies.
  ReplicaRouter(size_t replicas, RoutePolicy policy, const UtilizationSource* util, Clock* clock,
                Duration refresh = std::chrono::milliseconds(100));
  // Chooses a replica and counts a request outstanding there.
  size_t Pick();
  // The request sent to `replica` has been answered.
  void Done(size_t replica);
  size_t outstanding(size_t replica) const;
  // The current time-per-request estimate (seconds; 0 when none).
  double estimate(size_t replica) const;
  size_t replicas() const { return outstanding_.size(); }

 private:
  void Refresh(MonoTime now);

  const RoutePolicy policy_;
  const UtilizationSource* util_;
  Clock* clock_;
  const Duration refresh_;
  mutable std::mutex mu_;
  std::vector<size_t> outstanding_;
  std::vector<uint64_t> completed_;  // since the last refresh
  std::vector<double> per_request_;  // s_i, seconds; 0: unknown
  MonoTime last_refresh_{};
  bool refreshed_ = false;
  size_t next_ = 0;
};

}  // namespace stoker::batch
