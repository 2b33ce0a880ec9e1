// The service-time model and the adaptive controller, on a simulated service in simulated
// time (batch/simulate.h): deterministic, no timing flakiness.
#include "batch/controller.h"

#include <gtest/gtest.h>

#include <random>

#include "batch/service_model.h"
#include "batch/simulate.h"

namespace stoker::batch {
namespace {

using std::chrono::milliseconds;

TEST(ServiceModel, LearnsFixedAndPerItemCostFromNoisyBatches) {
  ServiceModel m;
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> size(1, 64);
  std::uniform_real_distribution<double> noise(0.9, 1.1);
  for (int i = 0; i < 2000; ++i) {
    const int b = size(rng);
    m.Observe(static_cast<size_t>(b), (0.003 + 0.0002 * b) * noise(rng));
  }
  EXPECT_NEAR(m.a(), 0.003, 0.0004);
  EXPECT_NEAR(m.c(), 0.0002, 0.00002);
  EXPECT_NEAR(m.Predict(32), 0.003 + 0.0064, 0.0005);
}

TEST(ServiceModel, FollowsADriftingService) {
  ServiceModel m;
  for (int i = 0; i < 1000; ++i) m.Observe(static_cast<size_t>(1 + i % 32), 0.001 * (1 + i % 32));
  for (int i = 0; i < 3000; ++i) m.Observe(static_cast<size_t>(1 + i % 32), 0.002 * (1 + i % 32));
  EXPECT_NEAR(m.c(), 0.002, 0.0001);  // old batches forgotten
}

TEST(ServiceModel, OneBatchSizeKeepsThePriorsSplit) {
  ServiceModel m(0.001, 0.001);
  for (int i = 0; i < 10; ++i) m.Observe(4, 0.010);
  EXPECT_NEAR(m.Predict(4), 0.010, 1e-9);
  EXPECT_NEAR(m.a() / m.c(), 1.0, 1e-9);
}

Options AdaptiveOptionsFor(Duration objective) {
  Options o;
  o.max_batch_size = 64;
  o.max_pending = 100000;
  o.adaptive.enabled = true;
  o.adaptive.p99_objective = objective;
  return o;
}

// t(b) = 2 ms + 0.1 ms * b: at most 64 / 8.4 ms = 7,619 items/s.
const ServiceCurve kCurve{0.002, 0.0001, 0.1};

TEST(AdaptiveController, MeetsItsP99ObjectiveAcrossLoads) {
  const Options o = AdaptiveOptionsFor(milliseconds(25));
  for (double load : {0.05, 0.3, 0.6, 0.85}) {
    const double rate = load * kCurve.Limit(64);
    const SimResult r = Simulate(o, kCurve, rate, 60000, 11);
    SCOPED_TRACE(testing::Message() << "load " << load);
    EXPECT_EQ(r.rejected, 0u);
    EXPECT_LE(r.p99, 0.025);
    EXPECT_NEAR(r.throughput, rate, 0.05 * rate);  // keeps up with the offered load
    EXPECT_NEAR(r.model_c, kCurve.c, 0.3 * kCurve.c);
  }
}

TEST(AdaptiveController, OverloadKeepsBatchesLargeAndTheBacklogDrains) {
  // 120 % of the limit: the objective cannot be met, but the controller must not shrink batches
  // (misses shrink the latency budget; the floor from the offered rate and the backlog holds
  // the batch size). It used to drain the final backlog in batches of 1 at 6 % of the limit.
  Options o = AdaptiveOptionsFor(milliseconds(25));
  o.max_pending = 4096;
  const SimResult r = Simulate(o, kCurve, 1.2 * kCurve.Limit(64), 100000, 42);
  EXPECT_GT(r.rejected, 0u);
  EXPECT_GE(r.throughput, 0.95 * kCurve.Limit(64));
  EXPECT_GT(r.mean_batch, 60);
}

TEST(AdaptiveController, FixedSettingsMissWhereItHolds) {
  // A long fixed delay (good for heavy load) misses the objective at light load; no batching
  // cannot keep up at heavy load. The adaptive controller meets both (previous test).
  Options fixed;
  fixed.max_batch_size = 64;
  fixed.max_pending = 100000;
  fixed.max_queue_delay = milliseconds(30);
  const SimResult light = Simulate(fixed, kCurve, 0.05 * kCurve.Limit(64), 20000, 11);
  EXPECT_GT(light.p99, 0.025);
  Options single = fixed;
  single.max_batch_size = 1;
  single.max_queue_delay = Duration{0};
  single.max_pending = 1000;
  const SimResult heavy = Simulate(single, kCurve, 0.85 * kCurve.Limit(64), 20000, 11);
  EXPECT_GT(heavy.rejected, 0u);  // 6,476/s offered, 1 / 2.1 ms = 476/s served
  EXPECT_LT(heavy.throughput, 0.2 * 0.85 * kCurve.Limit(64));
}

TEST(AdaptiveController, WaitsToFormBatchesAtLightLoadWhenTheFixedCostIsLarge) {
  // t(b) = 5 ms + 0.05 ms * b up to 256 (a GPU-like curve): the largest batch that fits 25 ms
  // is 150, and 2 t(150) takes the whole budget. The delay used to be what the budget left after
  // that (0), so at light load batches of one ran back to back (busy 0.99 at 5 % load). Planned
  // with the batch the measured rate forms, it waits and keeps the model far less busy.
  const ServiceCurve gpu{0.005, 0.00005, 0.1};
  Options o = AdaptiveOptionsFor(milliseconds(25));
  o.max_batch_size = 256;
  o.max_queue_delay = milliseconds(20);
  for (double load : {0.05, 0.2, 0.5}) {
    const double rate = load * gpu.Limit(256);
    const SimResult r = Simulate(o, gpu, rate, 40000, 3);
    SCOPED_TRACE(testing::Message() << "load " << load);
    EXPECT_EQ(r.rejected, 0u);
    EXPECT_LE(r.p99, 0.025);
    EXPECT_NEAR(r.throughput, rate, 0.05 * rate);
    // Greedy batching (delay 0) keeps it busy all the time at every one of these loads.
    EXPECT_LT(r.busy_fraction, 0.8 + 0.1 * (load > 0.4));
    EXPECT_GT(r.mean_batch, 1 + 0.01 * rate);  // at least what 10 ms of arrivals brings
  }
}

TEST(AdaptiveController, ShrinksTheBudgetAfterAMissAndGrowsItBack) {
  Options o = AdaptiveOptionsFor(milliseconds(10));
  o.adaptive.window = 10;
  AdaptiveController c(o);
  ServiceModel m(0.001, 0.0001);
  c.Recompute(m);
  EXPECT_EQ(c.batch_limit(), 40u);  // 2 * (1 ms + 0.1 ms * 40) = 10 ms
  const MonoTime t(std::chrono::seconds(1));
  for (int i = 0; i < 10; ++i) c.OnLatency(t + milliseconds(i), milliseconds(20), m);
  EXPECT_NEAR(c.budget_scale(), 0.7, 1e-9);
  EXPECT_LT(c.batch_limit(), 40u);
  for (int k = 0; k < 10; ++k) {
    for (int i = 0; i < 10; ++i)
      c.OnLatency(t + milliseconds(100 + 10 * k + i), milliseconds(1), m);
  }
  EXPECT_NEAR(c.budget_scale(), 1.0, 1e-9);
  EXPECT_EQ(c.batch_limit(), 40u);
}

TEST(Simulate, SaturationThroughputReachesTheServiceCurveLimit) {
  Options o;
  o.max_batch_size = 64;
  o.max_queue_delay = milliseconds(5);
  o.max_pending = 1000;
  const ServiceCurve exact{0.002, 0.0001, 0};
  const SimResult r = Simulate(o, exact, 2 * exact.Limit(64), 100000, 5);
  EXPECT_GE(r.throughput, 0.95 * exact.Limit(64));
  EXPECT_GT(r.busy_fraction, 0.99);
}

}  // namespace
}  // namespace stoker::batch
