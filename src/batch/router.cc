#include "batch/router.h"

#include <algorithm>
#include <limits>

namespace stoker::batch {

ReplicaRouter::ReplicaRouter(size_t replicas, RoutePolicy policy, const UtilizationSource* util,
                             Clock* clock, Duration refresh)
    : policy_(util == nullptr && policy == RoutePolicy::kUtilization
                  ? RoutePolicy::kLeastOutstanding
                  : policy),
      util_(util),
      clock_(clock),
      refresh_(refresh),
      outstanding_(std::max<size_t>(replicas, 1), 0),
      completed_(outstanding_.size(), 0),
      per_request_(outstanding_.size(), 0.0) {}

void ReplicaRouter::Refresh(MonoTime now) {
  if (!refreshed_) {
    refreshed_ = true;
    last_refresh_ = now;
    return;
  }
  const double span = ToSeconds(now - last_refresh_);
  if (span <= 0) return;
  for (size_t i = 0; i < outstanding_.size(); ++i) {
    const std::optional<double> u = util_->Utilization(i);
    if (u && completed_[i] > 0) {
      const double s = std::clamp(*u, 0.0, 1.0) * span / static_cast<double>(completed_[i]);
      // Smooth over refreshes: utilization samples and completion counts are both noisy.
      per_request_[i] = per_request_[i] > 0 ? 0.5 * per_request_[i] + 0.5 * s : s;
    } else if (u && *u > 0.5 && outstanding_[i] > 0) {
      // Busy and nothing finished for a whole period: at least the period per request.
      per_request_[i] = std::max(per_request_[i], span);
    }
    completed_[i] = 0;
  }
  last_refresh_ = now;
}

size_t ReplicaRouter::Pick() {
  std::lock_guard lk(mu_);
  size_t best = 0;
  switch (policy_) {
    case RoutePolicy::kRoundRobin:
      best = next_;
      next_ = (next_ + 1) % outstanding_.size();
      break;
    case RoutePolicy::kLeastOutstanding: {
      // Ties go round-robin so equal replicas share the load.
      size_t least = std::numeric_limits<size_t>::max();
      for (size_t k = 0; k < outstanding_.size(); ++k) {
        const size_t i = (next_ + k) % outstanding_.size();
        if (outstanding_[i] < least) {
          least = outstanding_[i];
          best = i;
        }
      }
      next_ = (best + 1) % outstanding_.size();
      break;
    }
    case RoutePolicy::kUtilization: {
      const MonoTime now = clock_->Now();
      if (!refreshed_ || now - last_refresh_ >= refresh_) Refresh(now);
      double known = std::numeric_limits<double>::max();
      for (double s : per_request_) {
        if (s > 0) known = std::min(known, s);
      }
      if (known == std::numeric_limits<double>::max()) known = 1.0;
      double least = std::numeric_limits<double>::max();
      for (size_t k = 0; k < outstanding_.size(); ++k) {
        const size_t i = (next_ + k) % outstanding_.size();
        const double s = per_request_[i] > 0 ? per_request_[i] : known;
        const double score = static_cast<double>(outstanding_[i] + 1) * s;
        if (score < least) {
          least = score;
          best = i;
        }
      }
      next_ = (best + 1) % outstanding_.size();
      break;
    }
  }
  ++outstanding_[best];
  return best;
}

void ReplicaRouter::Done(size_t replica) {
  std::lock_guard lk(mu_);
  if (replica >= outstanding_.size()) return;
  if (outstanding_[replica] > 0) --outstanding_[replica];
  ++completed_[replica];
}

size_t ReplicaRouter::outstanding(size_t replica) const {
  std::lock_guard lk(mu_);
  return replica < outstanding_.size() ? outstanding_[replica] : 0;
}

double ReplicaRouter::estimate(size_t replica) const {
  std::lock_guard lk(mu_);
  return replica < per_request_.size() ? per_request_[replica] : 0.0;
}

}  // namespace stoker::batch
