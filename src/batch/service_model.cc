#include "batch/service_model.h"

#include <algorithm>
#include <cmath>

namespace stoker::batch {

ServiceModel::ServiceModel(double a_prior, double c_prior, double forget)
    : forget_(forget), a_(std::max(0.0, a_prior)), c_(std::max(0.0, c_prior)) {}

void ServiceModel::Observe(size_t batch_size, double seconds) {
  if (!(seconds >= 0) || !std::isfinite(seconds) || batch_size == 0) return;
  const double b = static_cast<double>(batch_size);
  s0_ = s0_ * forget_ + 1;
  sb_ = sb_ * forget_ + b;
  sbb_ = sbb_ * forget_ + b * b;
  st_ = st_ * forget_ + seconds;
  sbt_ = sbt_ * forget_ + b * seconds;
  ++n_;
  Solve();
}

void ServiceModel::Solve() {
  const double mean_b = sb_ / s0_, mean_t = st_ / s0_;
  const double var_b = sbb_ / s0_ - mean_b * mean_b;
  if (var_b > 1e-6 * std::max(1.0, mean_b * mean_b)) {
    const double cov = sbt_ / s0_ - mean_b * mean_t;
    c_ = std::max(0.0, cov / var_b);
    a_ = mean_t - c_ * mean_b;
    if (a_ < 0) {  // a line through the origin fits better than a negative fixed cost
      a_ = 0;
      c_ = sbt_ / sbb_;
    }
    return;
  }
  // One batch size so far: keep the prior's split between fixed and per-item cost, scaled to
  // the measured mean (or all of it per item when there is no prior).
  const double prior = a_ + c_ * mean_b;
  if (prior > 0) {
    const double k = mean_t / prior;
    a_ *= k;
    c_ *= k;
  } else {
    a_ = 0;
    c_ = mean_t / mean_b;
  }
}

}  // namespace stoker::batch
