#include "batch/router.h"

#include <gtest/gtest.h>

#include "batch/metrics.h"
#include "batch/queue.h"
#include "support/enum_tables.h"

namespace stoker::batch {
namespace {

using std::chrono::milliseconds;

class ScriptedUtil : public UtilizationSource {
 public:
  std::optional<double> Utilization(size_t i) const override {
    return i < util.size() ? util[i] : std::optional<double>();
  }
  std::vector<std::optional<double>> util;
};

TEST(ReplicaRouter, RoundRobinTakesTurns) {
  ManualClock clock;
  ReplicaRouter r(3, RoutePolicy::kRoundRobin, nullptr, &clock);
  EXPECT_EQ(r.Pick(), 0u);
  EXPECT_EQ(r.Pick(), 1u);
  EXPECT_EQ(r.Pick(), 2u);
  EXPECT_EQ(r.Pick(), 0u);
  EXPECT_EQ(r.outstanding(0), 2u);
}

TEST(ReplicaRouter, LeastOutstandingFillsTheEmptiest) {
  ManualClock clock;
  ReplicaRouter r(3, RoutePolicy::kLeastOutstanding, nullptr, &clock);
  for (int i = 0; i < 6; ++i) r.Pick();
  r.Done(1);
  r.Done(1);
  EXPECT_EQ(r.Pick(), 1u);
  EXPECT_EQ(r.Pick(), 1u);
  EXPECT_EQ(r.outstanding(1), 2u);
}

TEST(ReplicaRouter, UtilizationSendsMoreToTheFasterReplica) {
  ManualClock clock;
  ScriptedUtil util;
  util.util = {0.9, 0.9};
  ReplicaRouter r(2, RoutePolicy::kUtilization, &util, &clock, milliseconds(100));
  EXPECT_EQ(r.Pick(), 0u);  // the first refresh starts the period
  // Over 100 ms both were 90 % busy; replica 0 finished 40 requests, replica 1 only 10: it takes
  // 9 ms per request against 2.25 ms.
  for (int i = 0; i < 40; ++i) r.Done(0);
  for (int i = 0; i < 10; ++i) r.Done(1);
  clock.Advance(milliseconds(100));
  std::vector<int> picks(2, 0);
  for (int i = 0; i < 50; ++i) ++picks[r.Pick()];
  EXPECT_NEAR(r.estimate(0), 0.00225, 1e-6);
  EXPECT_NEAR(r.estimate(1), 0.009, 1e-6);
  EXPECT_EQ(picks[0], 40);  // (o0 + 1) * 2.25 ms vs (o1 + 1) * 9 ms: 4 to 1
  EXPECT_EQ(picks[1], 10);
}

TEST(ReplicaRouter, UnknownUtilizationFallsBack) {
  ManualClock clock;
  ScriptedUtil util;  // no samples at all
  ReplicaRouter r(2, RoutePolicy::kUtilization, &util, &clock);
  EXPECT_EQ(r.Pick(), 0u);
  EXPECT_EQ(r.Pick(), 1u);                                            // equal scores: spread
  ReplicaRouter none(2, RoutePolicy::kUtilization, nullptr, &clock);  // least-outstanding
  none.Pick();
  EXPECT_EQ(none.Pick(), 1u);
}

// The batcher's names are label values of its metrics (batch/metrics.cc): dashboards and
// alerts match them, so they are pinned here as well as round-tripped.
TEST(EnumNames, TheBatchersTablesRoundTripAndKeepTheirLabelValues) {
  using stoker::testing::ExpectRoundTrip;
  ExpectRoundTrip(kRoutePolicyNames);
  ExpectRoundTrip(kRejectionNames);
  ExpectRoundTrip(kFormedWhyNames);
  EXPECT_STREQ(RoutePolicyName(RoutePolicy::kLeastOutstanding), "least-outstanding");
  EXPECT_STREQ(RejectionName(Rejection::kQueueFull), "queue_full");
  EXPECT_STREQ(RejectionName(Rejection::kFailed), "failed");
  EXPECT_STREQ(WhyName(Formed::Why::kPreferred), "preferred");
  EXPECT_STREQ(WhyName(Formed::Why::kDrain), "drain");
}

}  // namespace
}  // namespace stoker::batch
