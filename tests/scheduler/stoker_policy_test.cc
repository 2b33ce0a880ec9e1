// Stoker's default placement policy: its principles on small clusters, and the issue-3 target
// that it allocates more GPUs than the published FGD on real traces.
#include "scheduler/stoker_policy.h"

#include <gtest/gtest.h>

#include <array>
#include <string>
#include <vector>

#include "scheduler/registry.h"

namespace stoker::scheduler {
namespace {

std::unique_ptr<PlacementPolicy> MakeStoker() {
  auto p = CreatePlacementPolicy("stoker", PolicyConfig{});
  EXPECT_TRUE(p.ok());
  return std::move(p).value();
}

// Observes `r` `times` times (teaches the online shape distribution) without placing it.
void Teach(PlacementPolicy& p, const Request& r, int times) {
  for (int i = 0; i < times; ++i) p.Observe(r);
}

PlacementResult PlaceObserved(PlacementPolicy& p, const Request& r, const ClusterState& c) {
  p.Observe(r);
  return p.Place(r, c);
}

TEST(StokerPolicyTest, ShareJoinsAnAlreadySharedGpuInsteadOfOpeningOne) {
  ClusterState c;
  const GpuModelId g = *c.models().Intern("G");
  ASSERT_TRUE(c.AddNode({"fresh", 64000, 262144, 2, g, 0, false}).ok());
  ASSERT_TRUE(c.AddNode({"shared", 64000, 262144, 2, g, 0, false}).ok());
  auto p = MakeStoker();
  const Request share = Request::GpuShare(400, 2000, 1);
  Teach(*p, share, 8);
  Teach(*p, Request::WholeGpus(1, 8000, 1), 8);
  // Node 1: GPU 0 is whole-used, GPU 1 holds a 400-milli share (600 free).
  ASSERT_TRUE(
      c.Allocate(MakePlacement(Request::WholeGpus(1, 8000, 1), 1, std::array<uint8_t, 1>{0}.data()))
          .ok());
  ASSERT_TRUE(c.Allocate(MakePlacement(share, 1, std::array<uint8_t, 1>{1}.data())).ok());
  const PlacementResult r = PlaceObserved(*p, share, c);
  ASSERT_TRUE(r.placed());
  EXPECT_EQ(r.placement.node, 1);
  EXPECT_EQ(r.placement.gpus[0].gpu, 1);  // fills the shared GPU; node 0 keeps two whole GPUs
}

TEST(StokerPolicyTest, OneGpuPodKeepsIdleEightGpuNodesWhole) {
  ClusterState c;
  const GpuModelId g = *c.models().Intern("G");
  ASSERT_TRUE(c.AddNode({"idle", 96000, 393216, 8, g, 0, false}).ok());
  ASSERT_TRUE(c.AddNode({"used", 96000, 393216, 8, g, 0, false}).ok());
  auto p = MakeStoker();
  Teach(*p, Request::WholeGpus(8, 64000, 1), 4);
  Teach(*p, Request::WholeGpus(1, 8000, 1), 8);
  const std::array<uint8_t, 4> four = {0, 1, 2, 3};
  ASSERT_TRUE(c.Allocate(MakePlacement(Request::WholeGpus(4, 32000, 1), 1, four.data())).ok());
  const PlacementResult r = PlaceObserved(*p, Request::WholeGpus(1, 8000, 1), c);
  ASSERT_TRUE(r.placed());
  EXPECT_EQ(r.placement.node, 1);  // the idle node stays available to an 8-GPU pod
}

TEST(StokerPolicyTest, AvoidsLeavingGpusWithoutTheCpuToUseThem) {
  ClusterState c;
  const GpuModelId g = *c.models().Intern("G");
  // Node 0 is CPU-poor (8 CPUs per GPU), node 1 CPU-rich; both have two idle GPUs.
  ASSERT_TRUE(c.AddNode({"cpu-poor", 16000, 131072, 2, g, 0, false}).ok());
  ASSERT_TRUE(c.AddNode({"cpu-rich", 64000, 262144, 2, g, 0, false}).ok());
  auto p = MakeStoker();
  Teach(*p, Request::WholeGpus(1, 8000, 1), 16);
  // 12 CPUs on node 0 would leave its other GPU with 4 CPUs, too few for the typical pod.
  const PlacementResult r = PlaceObserved(*p, Request::WholeGpus(1, 12000, 1), c);
  ASSERT_TRUE(r.placed());
  EXPECT_EQ(r.placement.node, 1);
  // A pod that fits node 0's CPU share exactly goes there (the most packed choice).
  ClusterState c2 = c;
  const PlacementResult r2 = PlaceObserved(*p, Request::WholeGpus(1, 8000, 1), c2);
  ASSERT_TRUE(r2.placed());
  EXPECT_EQ(r2.placement.node, 0);
}

TEST(StokerPolicyTest, EqualNodesTieToTheLowestId) {
  ClusterState c;
  const GpuModelId g = *c.models().Intern("G");
  for (int i = 0; i < 5; ++i)
    ASSERT_TRUE(c.AddNode({"n" + std::to_string(i), 64000, 262144, 4, g, 0, false}).ok());
  auto p = MakeStoker();
  const PlacementResult r = PlaceObserved(*p, Request::WholeGpus(2, 8000, 1), c);
  ASSERT_TRUE(r.placed());
  EXPECT_EQ(r.placement.node, 0);
}

// The learned distribution is refreshed at 1, 2, 4, ..., 512 observations and then every 512.
// With a threshold, a refresh is adopted only when the distribution moved: a stationary stream
// stops causing adoptions, a shift of the workload causes one.
TEST(StokerPolicyTest, RefreshAdoptedOnlyWhenTheDistributionMoves) {
  const Request a = Request::WholeGpus(1, 8000, 1);
  const Request b = Request::GpuShare(500, 4000, 1);
  const Request c = Request::WholeGpus(4, 32000, 1);
  auto every = MakeStokerPolicy(PolicyConfig{}, {0.0, true});
  auto thresholded = MakeStokerPolicy(PolicyConfig{}, {0.05, true});
  // Stationary: a, a, b repeated (2/3, 1/3) for 4,096 observations: 17 refreshes.
  for (int i = 0; i < 4096; ++i) {
    const Request& r = i % 3 == 2 ? b : a;
    every->Observe(r);
    thresholded->Observe(r);
  }
  EXPECT_EQ(StokerAdoptions(*every), 17);
  const int64_t settled = StokerAdoptions(*thresholded);
  EXPECT_LT(settled, 10);  // the early refreshes move a lot; later ones almost nothing
  for (int i = 0; i < 2048; ++i) thresholded->Observe(i % 3 == 2 ? b : a);
  EXPECT_EQ(StokerAdoptions(*thresholded), settled);
  // A new shape arrives: after 512 more observations it is ~8 % of the pods (above 5 %).
  for (int i = 0; i < 512; ++i) thresholded->Observe(c);
  EXPECT_EQ(StokerAdoptions(*thresholded), settled + 1);
}

// Same seed, same requests: same decisions and adoptions (nothing depends on time or address).
TEST(StokerPolicyTest, DeterministicForASeed) {
  ClusterState cluster;
  const GpuModelId g = *cluster.models().Intern("G");
  for (int i = 0; i < 64; ++i) {
    ASSERT_TRUE(cluster
                    .AddNode({"n" + std::to_string(i), 32000 + 16000 * (i % 3), 262144,
                              i % 5 == 0 ? 0 : 8, g, 0, false})
                    .ok());
  }
  const std::vector<Request> shapes = {
      Request::WholeGpus(1, 8000, 1024), Request::GpuShare(250, 2000, 1024),
      Request::GpuShare(600, 6000, 1024), Request::WholeGpus(4, 24000, 1024),
      Request::CpuOnly(4000, 1024)};
  std::vector<std::unique_ptr<PlacementPolicy>> runs;
  runs.push_back(MakeStoker());
  runs.push_back(MakeStoker());
  std::vector<ClusterState> clusters = {cluster, cluster};
  std::vector<std::vector<Placement>> live(2);
  for (int step = 0; step < 3000; ++step) {
    // Shifting mix, so refreshes are adopted now and then.
    const Request& r = shapes[(step * 7 + step / 500) % (step < 1500 ? 3 : 5)];
    PlacementResult got[2];
    for (int k = 0; k < 2; ++k) {
      got[k] = PlaceObserved(*runs[k], r, clusters[k]);
      if (got[k].placed()) {
        ASSERT_TRUE(clusters[k].Allocate(got[k].placement).ok());
        live[k].push_back(got[k].placement);
      }
      if (live[k].size() > 60) {
        ASSERT_TRUE(clusters[k].Release(live[k].front()).ok());
        live[k].erase(live[k].begin());
      }
    }
    ASSERT_EQ(got[0].status, got[1].status) << "step " << step;
    ASSERT_EQ(got[0].placement, got[1].placement) << "step " << step;
  }
  EXPECT_EQ(StokerAdoptions(*runs[0]), StokerAdoptions(*runs[1]));
  EXPECT_GT(StokerAdoptions(*runs[0]), 3);
}

// The reserve (docs/scheduling.md, "stoker"): capacity that only some expected pods can use is
// kept for them while other capacity remains. Node 0, half used, holds the cluster's only slot
// for the 4-GPU pods with 100 CPUs that keep arriving (node 1 has 96 CPUs); a 1-GPU pod, which
// would otherwise pack onto the fuller node 0, leaves that slot alone.
TEST(StokerPolicyTest, KeepsTheOnlySlotOfAScarceShapeForIt) {
  auto cluster = [] {
    ClusterState c;
    const GpuModelId g = *c.models().Intern("G");
    EXPECT_TRUE(c.AddNode({"big", 128000, 786432, 8, g, 0, false}).ok());
    EXPECT_TRUE(c.AddNode({"medium", 96000, 786432, 8, g, 0, false}).ok());
    const std::array<uint8_t, 4> four = {0, 1, 2, 3};
    EXPECT_TRUE(c.Allocate(MakePlacement(Request::WholeGpus(4, 16000, 1), 0, four.data())).ok());
    return c;
  };
  const Request one = Request::WholeGpus(1, 8000, 1);
  const Request wide = Request::WholeGpus(4, 100000, 1);
  // Without pods of the scarce shape in view, the fuller node wins (most packed).
  {
    auto p = MakeStoker();
    Teach(*p, one, 16);
    const PlacementResult r = PlaceObserved(*p, one, cluster());
    ASSERT_TRUE(r.placed());
    EXPECT_EQ(r.placement.node, 0);
  }
  auto p = MakeStoker();
  Teach(*p, one, 16);
  Teach(*p, wide, 8);
  const ClusterState c = cluster();
  const PlacementResult r = PlaceObserved(*p, one, c);
  ASSERT_TRUE(r.placed());
  EXPECT_EQ(r.placement.node, 1);
  // The scarce shape itself still takes its slot.
  const PlacementResult w = PlaceObserved(*p, wide, c);
  ASSERT_TRUE(w.placed());
  EXPECT_EQ(w.placement.node, 0);
}

// The reserve's hedge: a scarce shape seen once among 128 pods may be rarer than it is, and
// while the cluster is mostly free the reserve plans for the upper confidence bound of its rate.
// Four half-used big nodes hold the only slots of the 4-GPU pods with 100 CPUs; at the rate seen
// (one pod in 128) four slots are ample (the chance they run short is 0.05 %) and a 1-GPU pod
// would pack onto a big node, but at the hedged rate they run short with a chance of 28 %, so
// it takes an idle medium node. Once 60 % of the GPUs are allocated the rate seen stands and
// the pod packs onto the big node.
TEST(StokerPolicyTest, HedgesTheRateOfAScarceShapeSeenOnceWhileTheClusterIsMostlyFree) {
  auto cluster = [](int full_nodes) {
    ClusterState c;
    const GpuModelId g = *c.models().Intern("G");
    const std::array<uint8_t, 8> gpus = {0, 1, 2, 3, 4, 5, 6, 7};
    for (int i = 0; i < 4; ++i) {
      EXPECT_TRUE(c.AddNode({"big-" + std::to_string(i), 128000, 786432, 8, g, 0, false}).ok());
      EXPECT_TRUE(c.Allocate(MakePlacement(Request::WholeGpus(4, 16000, 1), i, gpus.data())).ok());
    }
    for (int i = 0; i < 4; ++i) {
      EXPECT_TRUE(c.AddNode({"medium-" + std::to_string(i), 96000, 786432, 8, g, 0, false}).ok());
    }
    for (int i = 0; i < full_nodes; ++i) {
      const int32_t node = c.num_nodes();
      EXPECT_TRUE(c.AddNode({"full-" + std::to_string(i), 96000, 786432, 8, g, 0, false}).ok());
      EXPECT_TRUE(
          c.Allocate(MakePlacement(Request::WholeGpus(8, 96000, 1), node, gpus.data())).ok());
    }
    return c;
  };
  const Request one = Request::WholeGpus(1, 8000, 1);
  const Request wide = Request::WholeGpus(4, 100000, 1);
  auto place_one = [&](const ClusterState& c) {
    auto p = MakeStoker();
    Teach(*p, one, 100);
    Teach(*p, wide, 1);
    Teach(*p, one, 26);
    const PlacementResult r = PlaceObserved(*p, one, c);  // the 128th pod: the learner refreshes
    EXPECT_TRUE(r.placed());
    return r.placement.node;
  };
  const ClusterState mostly_free = cluster(0);  // 16 of 64 GPUs allocated
  EXPECT_GE(place_one(mostly_free), 4) << "25 % allocated: the big nodes' slots are kept";
  const ClusterState filled = cluster(8);  // 80 of 128 GPUs allocated, the same 48 free
  EXPECT_EQ(place_one(filled), 0) << "62.5 % allocated: the rate seen, the fuller big node";
}

// Pods pinned to a GPU model make that model a pool: pods with a choice keep off it while other
// models have room, even where they would pack better on it.
TEST(StokerPolicyTest, PodsWithAChoiceKeepOffAGpuModelThatPinnedPodsNeed) {
  ClusterState c;
  const GpuModelId small = *c.models().Intern("small");
  const GpuModelId big = *c.models().Intern("big");
  ASSERT_TRUE(c.AddNode({"small-0", 32000, 131072, 2, small, 0, false}).ok());
  ASSERT_TRUE(c.AddNode({"big-0", 96000, 393216, 8, big, 0, false}).ok());
  const Request any = Request::WholeGpus(1, 8000, 1);
  Request pinned = any;
  pinned.allowed_models = GpuModelTable::Bit(small);
  {
    auto p = MakeStoker();
    Teach(*p, any, 24);
    const PlacementResult r = PlaceObserved(*p, any, c);
    ASSERT_TRUE(r.placed());
    EXPECT_EQ(r.placement.node, 0) << "unpinned workload: the smaller node packs first";
  }
  auto p = MakeStoker();
  Teach(*p, any, 24);
  Teach(*p, pinned, 8);
  const PlacementResult r = PlaceObserved(*p, any, c);
  ASSERT_TRUE(r.placed());
  EXPECT_EQ(r.placement.node, 1);
  const PlacementResult q = PlaceObserved(*p, pinned, c);
  ASSERT_TRUE(q.placed());
  EXPECT_EQ(q.placement.node, 0);
}

}  // namespace
}  // namespace stoker::scheduler
