// The activity window the scheduling pass reads: a GPU's mean is kept between fills until a
// reading arrives or the window moves, and what a fill reports must be what a tracker that
// never filled before would report for the same readings.
#include "server/activity.h"

#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace stoker::server {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

GpuSample Reading(uint32_t index, uint32_t util_pct) {
  GpuSample s;
  s.id.index = index;
  s.util_gpu_pct = Field<uint32_t>::Of(util_pct);
  return s;
}

std::vector<pass::NodeView> Nodes(int nodes, int gpus) {
  std::vector<pass::NodeView> out(static_cast<size_t>(nodes));
  for (int n = 0; n < nodes; ++n) {
    out[static_cast<size_t>(n)].name = "n" + std::to_string(n);
    for (int g = 0; g < gpus; ++g) {
      pass::GpuView v;
      v.index = static_cast<uint32_t>(g);
      out[static_cast<size_t>(n)].gpus.push_back(v);
    }
  }
  return out;
}

// "busy/covered" per GPU, "-" where the GPU has no reading in the window.
std::string Means(const std::vector<pass::NodeView>& nodes) {
  std::string out;
  for (const pass::NodeView& n : nodes) {
    for (const pass::GpuView& g : n.gpus) {
      out += g.activity ? std::to_string(g.activity->busy_milli) + "/" +
                              std::to_string(g.activity->covered_ms)
                        : "-";
      out += ' ';
    }
    out += '\n';
  }
  return out;
}

TEST(ActivityTracker, MeanOverTheWindowAndHowMuchOfItIsCovered) {
  ActivityTracker t(seconds(300));  // 30 buckets of 10 s
  const WallTime t0{seconds(1'000'000)};
  t.Record("n0", {Reading(0, 20), Reading(1, 90)}, t0);
  t.Record("n0", {Reading(0, 40)}, t0 + seconds(20));
  auto nodes = Nodes(2, 2);
  t.Fill(&nodes, t0 + seconds(25));
  EXPECT_EQ(Means(nodes), "300/25000 900/25000 \n- - \n");
  // The window's oldest bucket lies partly outside it: the first readings still count 5 s past
  // the window, and leave it with that bucket, when only the second one is left for GPU 0.
  nodes = Nodes(2, 2);
  t.Fill(&nodes, t0 + seconds(305));
  EXPECT_EQ(Means(nodes), "300/300000 900/300000 \n- - \n");
  nodes = Nodes(2, 2);
  t.Fill(&nodes, t0 + seconds(315));
  EXPECT_EQ(Means(nodes), "400/295000 - \n- - \n");
}

// A long-lived tracker fills before every change and between them (its kept means are reused,
// dropped by readings, or outdated by the window moving); after every step its answer must be
// that of a new tracker given the same readings and filled once.
TEST(ActivityTracker, KeptMeansAreThoseComputedAfresh) {
  const Duration window = seconds(60);  // buckets of 2 s
  ActivityTracker kept(window);
  std::vector<std::pair<std::string, std::pair<std::vector<GpuSample>, WallTime>>> readings;
  std::mt19937 rng(7);
  WallTime now{seconds(2'000'000)};
  for (int step = 0; step < 400; ++step) {
    now += milliseconds(std::uniform_int_distribution<int>(0, 1500)(rng));
    if (std::uniform_int_distribution<int>(0, 2)(rng) > 0) {
      const std::string node = "n" + std::to_string(std::uniform_int_distribution<int>(0, 3)(rng));
      std::vector<GpuSample> gpus;
      for (uint32_t g = 0; g < 3; ++g) {
        if (std::uniform_int_distribution<int>(0, 3)(rng) > 0) {
          gpus.push_back(Reading(g, std::uniform_int_distribution<uint32_t>(0, 100)(rng)));
        }
      }
      kept.Record(node, gpus, now);
      readings.push_back({node, {gpus, now}});
    }
    auto a = Nodes(5, 3);  // n4 never reports
    kept.Fill(&a, now);
    ActivityTracker fresh(window);
    for (const auto& [node, r] : readings) fresh.Record(node, r.first, r.second);
    auto b = Nodes(5, 3);
    fresh.Fill(&b, now);
    ASSERT_EQ(Means(a), Means(b)) << "after step " << step;
  }
  // The window moved on while nothing was read: every kept mean is outdated in turn.
  for (int s = 0; s < 40; ++s) {
    now += seconds(2);
    auto a = Nodes(5, 3);
    kept.Fill(&a, now);
    ActivityTracker fresh(window);
    for (const auto& [node, r] : readings) fresh.Record(node, r.first, r.second);
    auto b = Nodes(5, 3);
    fresh.Fill(&b, now);
    ASSERT_EQ(Means(a), Means(b)) << "at +" << 2 * (s + 1) << " s";
  }
}

TEST(ActivityTracker, AForgottenNodeStartsOver) {
  ActivityTracker t(seconds(60));
  const WallTime t0{seconds(3'000'000)};
  t.Record("n0", {Reading(0, 50)}, t0);
  auto nodes = Nodes(1, 1);
  t.Fill(&nodes, t0 + seconds(1));
  EXPECT_EQ(Means(nodes), "500/1000 \n");
  t.ForgetNode("n0");
  nodes = Nodes(1, 1);
  t.Fill(&nodes, t0 + seconds(1));
  EXPECT_EQ(Means(nodes), "- \n");
}

}  // namespace
}  // namespace stoker::server
