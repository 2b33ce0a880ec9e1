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
  // The delay D: the oldest request waits D, then for the batch ahead of its own if that still
  // runs (it started before this request arrived, so it is done by then when D >= t(b)), then
  // runs in a batch of what arrived meanwhile: max(D, t(b)) + t(b) <= budget, with b the 99th
  // percentile of 1 + Poisson(rate * D), at most the limit. Planning with the batch
  // the measured rate forms (not with the limit, which light load never reaches) is what lets
  // light load wait and form batches: with a large fixed cost a, 2 t(limit) takes the whole
  // budget and the model would run batches of one back to back.
  double left = budget - 2 * model.Predict(limit_);
  if (rate_ > 0) {
    const auto batch_at = [&](double d) {
      const double mean = rate_ * d;
      return 1 + mean + 2.33 * std::sqrt(mean);
    };
    const auto fits = [&](double d) {
      const double t = a + c * std::min(batch_at(d), static_cast<double>(limit_));
      return std::max(d, t) + t <= budget;
    };
    // Latency grows with D, so the longest D that fits is found by bisection.
    double lo = 0, hi = std::max(budget, delay_cap_);
    if (fits(lo)) {
      for (int i = 0; i < 40; ++i) {
        const double mid = (lo + hi) / 2;
        (fits(mid) ? lo : hi) = mid;
      }
      left = std::max(left, lo);
    }
  }
  delay_ = std::chrono::duration_cast<Duration>(
      std::chrono::duration<double>(std::clamp(left, 0.0, delay_cap_)));
}

}  // namespace stoker::batch
