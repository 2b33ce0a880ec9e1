#pragma once
// A discrete-event simulation of the batcher in front of a service whose batch of b items takes
// t(b) = a + c*b (times a deterministic pseudo-random factor in [1 - jitter, 1 + jitter]),
// under Poisson arrivals. It drives the same BatchQueue, ServiceModel and AdaptiveController as
// Batcher, in the same order (expire, take while an instance is free, learn from each batch),
// in simulated time: the tests check the controller's objective with it and the benchmarks
// sweep loads with it, with no timing flakiness.

#include <cstdint>
#include <functional>
#include <vector>

#include "batch/options.h"

namespace stoker::batch {

struct ServiceCurve {
  double a = 0.002;     // seconds per batch
  double c = 0.0001;    // seconds per item
  double jitter = 0.0;  // relative, uniform
  // Items per second one instance completes at the largest batch: the service-curve limit.
  double Limit(size_t max_batch) const {
    return static_cast<double>(max_batch) / (a + c * static_cast<double>(max_batch));
  }
};

struct SimResult {
  uint64_t offered = 0, completed = 0, rejected = 0, batches = 0;
  double span_seconds = 0;   // first arrival to last completion
  double throughput = 0;     // completed per second of span
  double busy_fraction = 0;  // instance-seconds busy / (instances * span)
  double mean_batch = 0;
  double p50 = 0, p99 = 0, max_latency = 0;  // seconds, of completed requests
  size_t final_limit = 0;
  double final_delay = 0;  // seconds
  double model_a = 0, model_c = 0;
};

// `rate`: arrivals per second; `requests`: how many arrive; `seed`: the arrival stream.
SimResult Simulate(const Options& o, const ServiceCurve& curve, double rate, uint64_t requests,
                   uint64_t seed = 1);

// The same simulation over a measured service: `service(items)` runs (or replays) one batch of
// that many items and returns the seconds it took. bench/inference runs the real model in it and
// returns the thread's CPU time, so latencies are those of a dedicated worker whatever else the
// machine runs.
using ServiceTime = std::function<double(size_t items)>;
SimResult Simulate(const Options& o, const ServiceTime& service, double rate, uint64_t requests,
                   uint64_t seed = 1);

// p-quantile (nearest rank) of `v` (reordered).
double Quantile(std::vector<double>& v, double p);

}  // namespace stoker::batch
