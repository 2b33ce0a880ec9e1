#pragma once
// The adaptive controller: keeps the p99 of request latency under an objective while letting
// batches grow as large as that allows (cost per item falls with the batch size).
//
// It works on a latency budget B = s * objective, s in [s_min, 1], steered by AIMD on the
// measured p99 of each window of requests: a window whose p99 misses the objective multiplies s
// by `decrease`, a window that meets it adds `increase`. From B and the learned model
// t(b) = a + c*b it derives
//   - the batch limit: the largest b with 2 t(b) <= B (a request may wait for the batch ahead
//     of it and then run in its own), but never below the smallest b whose throughput
//     b / t(b) covers the measured arrival rate with 10 % headroom (else the queue would grow
//     without bound and no budget would be met), plus what drains the requests already queued
//     within one objective (else a backlog left by a burst drains in batches sized for the
//     arrival rate alone);
//   - the queue delay D: once the arrival rate r is measured, the longest D with
//     max(D, t(b)) + t(b) <= B, where b is the batch that forms meanwhile (the 99th percentile
//     of 1 + Poisson(r D), at most the limit): the oldest request waits D, then for the batch
//     ahead of its own if that one still runs, then runs. Before a rate is measured (or if no D
//     fits), what is left of B after 2 t(limit). Capped by Options::max_queue_delay (or by the
//     objective when that is 0). Planning with the batch the rate forms, not with the limit
//     that light load never reaches, is what lets light load wait and form batches.
// Not thread-safe: the batcher calls it under its lock.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "batch/options.h"
#include "batch/service_model.h"
#include "core/clock.h"

namespace stoker::batch {

class AdaptiveController {
 public:
  explicit AdaptiveController(const Options& o);

  // A request was offered (count refused ones too: the rate the batch floor must cover is the
  // offered one; counting only accepted requests lets a saturated queue shrink batches).
  void OnArrival() { ++arrivals_; }
  // One answered request's latency, and the requests queued now. Runs a control step when the
  // window is full.
  void OnLatency(MonoTime now, Duration latency, const ServiceModel& model, size_t queued = 0);
  // Recomputes limit and delay from the current budget and model (also done at each step).
  void Recompute(const ServiceModel& model);

  size_t batch_limit() const { return limit_; }
  Duration delay() const { return delay_; }
  double budget_scale() const { return scale_; }
  double arrival_rate() const { return rate_; }  // requests per second, last window
  uint64_t steps() const { return steps_; }
  double last_window_p99_seconds() const { return last_p99_; }

 private:
  const size_t max_batch_;
  const int instances_;
  const double objective_;  // seconds
  const double delay_cap_;  // seconds
  const AdaptiveOptions opt_;
  std::vector<double> window_;
  MonoTime window_start_{};
  bool started_ = false;
  uint64_t arrivals_ = 0;
  double rate_ = 0;
  size_t backlog_ = 0;
  double scale_ = 1.0;
  double last_p99_ = 0;
  uint64_t steps_ = 0;
  size_t limit_;
  Duration delay_{0};
};

}  // namespace stoker::batch
