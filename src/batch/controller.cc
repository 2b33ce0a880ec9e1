#include "batch/controller.h"

#include <algorithm>
#include <cmath>

namespace stoker::batch {

AdaptiveController::AdaptiveController(const Options& o)
    : max_batch_(o.max_batch_size),
      instances_(std::max(1, o.instances)),
      objective_(ToSeconds(o.adaptive.p99_objective)),
      delay_cap_(ToSeconds(o.max_queue_delay > Duration{0} ? o.max_queue_delay
                                                           : o.adaptive.p99_objective)),
      opt_(o.adaptive),
      limit_(o.max_batch_size) {
  window_.reserve(std::max<size_t>(opt_.window, 1));
}

void AdaptiveController::OnLatency(MonoTime now, Duration latency, const ServiceModel& model,
                                   size_t queued) {
  if (!started_) {
    started_ = true;
    window_start_ = now;
  }
  window_.push_back(ToSeconds(latency));
  if (window_.size() < std::max<size_t>(opt_.window, 1)) return;
  // p99 of the window (nearest rank).
  const size_t rank = static_cast<size_t>(std::ceil(0.99 * static_cast<double>(window_.size())));
  std::nth_element(window_.begin(), window_.begin() + static_cast<std::ptrdiff_t>(rank - 1),
                   window_.end());
  last_p99_ = window_[rank - 1];
  const double span = ToSeconds(now - window_start_);
  if (span > 0) rate_ = static_cast<double>(arrivals_) / span;
  arrivals_ = 0;
  window_start_ = now;
  window_.clear();
  backlog_ = queued;
  ++steps_;
  if (last_p99_ > objective_) {
    scale_ = std::max(0.05, scale_ * opt_.decrease);
  } else {
    scale_ = std::min(1.0, scale_ + opt_.increase);
  }
  Recompute(model);
}

void AdaptiveController::Recompute(const ServiceModel& model) {
  const double budget = scale_ * objective_;
  const double a = model.a(), c = model.c();
  // Largest b with 2 t(b) <= budget.
  size_t by_latency = 1;
  if (c > 0) {
    const double b = std::floor((budget / 2 - a) / c);
    by_latency =
        b >= static_cast<double>(max_batch_) ? max_batch_ : static_cast<size_t>(std::max(1.0, b));
  } else {
    by_latency = 2 * a <= budget ? max_batch_ : 1;
  }
  // Smallest b with instances * b / t(b) >= 1.1 * rate.
  size_t by_rate = 1;
  // Per instance, items per second: the arrivals with headroom, and the backlog within one
  // objective.
  const double need = (1.1 * rate_ + static_cast<double>(backlog_) / objective_) / instances_;
  if (need > 0) {
    if (need * c >= 1) {
      by_rate = max_batch_;  // beyond the model's limit even at the largest batch
    } else {
      const double b = std::ceil(need * a / (1 - need * c));
      by_rate =
          b >= static_cast<double>(max_batch_) ? max_batch_ : static_cast<size_t>(std::max(1.0, b));
    }
  }
  limit_ = std::max(by_latency, by_rate);
  const double left = budget - 2 * model.Predict(limit_);
  delay_ = std::chrono::duration_cast<Duration>(
      std::chrono::duration<double>(std::clamp(left, 0.0, delay_cap_)));
}

}  // namespace stoker::batch
