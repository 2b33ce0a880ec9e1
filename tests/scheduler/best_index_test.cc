// BestIndex (the score index's tournament tree) against a brute-force scan, and the indexed
// policies against the exhaustive scan on random clusters with churn.
#include "scheduler/best_index.h"

#include <gtest/gtest.h>

#include <deque>
#include <string>
#include <vector>

#include "scheduler/registry.h"
#include "scheduler/rng.h"
#include "scheduler/scoring_policy.h"
#include "scheduler/stoker_policy.h"

namespace stoker::scheduler {
namespace {

// Highest score, lowest id among ties, over listed nodes; -1 if none.
int32_t BruteBest(const std::vector<int64_t>& score, const std::vector<bool>& listed) {
  int32_t best = -1;
  for (int32_t i = 0; i < static_cast<int32_t>(score.size()); ++i) {
    if (listed[i] && (best < 0 || score[i] > score[best])) best = i;
  }
  return best;
}

TEST(BestIndexTest, EmptyAndSingle) {
  BestIndex idx;
  idx.Reset(0);
  EXPECT_EQ(idx.Best(), -1);
  idx.Reset(1);
  EXPECT_EQ(idx.Best(), -1);
  idx.SetLeaf(0, -5);
  idx.Update(0);
  EXPECT_EQ(idx.Best(), 0);
  idx.UnsetLeaf(0);
  idx.Update(0);
  EXPECT_EQ(idx.Best(), -1);
}

TEST(BestIndexTest, TiesGoToLowestId) {
  BestIndex idx;
  idx.Reset(5);
  for (int32_t i : {4, 2, 3}) {
    idx.SetLeaf(i, 7);
    idx.Update(i);
  }
  EXPECT_EQ(idx.Best(), 2);
  idx.SetLeaf(4, 8);
  idx.Update(4);
  EXPECT_EQ(idx.Best(), 4);
}

TEST(BestIndexTest, EqualsBruteForceUnderRandomChanges) {
  Rng rng(7);
  for (int32_t n : {1, 2, 3, 17, 31, 32, 33, 64, 100, 1000, 5000}) {
    BestIndex idx;
    idx.Reset(n);
    std::vector<int64_t> score(n, 0);
    std::vector<bool> listed(n, false);
    for (int step = 0; step < 4000; ++step) {
      // Few distinct scores, so ties are common; extreme values included.
      const int32_t i = static_cast<int32_t>(rng.Uniform(static_cast<uint64_t>(n)));
      const uint64_t op = rng.Uniform(10);
      if (op < 6) {
        const int64_t s = op == 0   ? INT64_MIN
                          : op == 1 ? INT64_MAX
                                    : static_cast<int64_t>(rng.Uniform(5)) - 2;
        score[i] = s;
        listed[i] = true;
        idx.SetLeaf(i, s);
      } else if (op < 9) {
        listed[i] = false;
        idx.UnsetLeaf(i);
      } else {
        listed[i] = true;  // relist with the kept score
        idx.RelistLeaf(i);
      }
      // Alternate path repair and whole rebuilds.
      if (step % 7 == 0) {
        idx.Build();
      } else {
        idx.Update(i);
      }
      ASSERT_EQ(idx.Best(), BruteBest(score, listed)) << "n=" << n << " step=" << step;
    }
  }
}

// Several indexes with their leaves in one arena (as a policy's shapes have) stay independent:
// each equals the brute force under random changes interleaved across them, with GPUs and tags
// kept per index and node; an arena of another size is refused (the index keeps its own leaves).
TEST(BestIndexTest, IndexesSharingAnArenaStayIndependent) {
  Rng rng(5);
  for (int32_t n : {1, 31, 33, 1000}) {
    constexpr int kSlots = 5;
    LeafArena arena;
    arena.Reset(n, kSlots);
    std::vector<BestIndex> idx(kSlots);
    std::vector<std::vector<int64_t>> score(kSlots, std::vector<int64_t>(n, 0));
    std::vector<std::vector<bool>> listed(kSlots, std::vector<bool>(n, false));
    for (int s = 0; s < kSlots; ++s) idx[s].Reset(n, arena, s);
    for (int step = 0; step < 6000; ++step) {
      const int s = static_cast<int>(rng.Uniform(kSlots));
      const int32_t i = static_cast<int32_t>(rng.Uniform(static_cast<uint64_t>(n)));
      if (rng.Uniform(4) == 0) {
        listed[s][i] = false;
        idx[s].UnsetLeaf(i);
      } else {
        score[s][i] = static_cast<int64_t>(rng.Uniform(7));
        listed[s][i] = true;
        idx[s].SetLeaf(i, score[s][i]);
        idx[s].gpus(i)[0] = static_cast<uint8_t>(s);
        idx[s].set_tag(i, static_cast<uint8_t>(s + 1));
      }
      idx[s].Update(i);
      for (int t = 0; t < kSlots; ++t) {
        ASSERT_EQ(idx[t].Best(), BruteBest(score[t], listed[t])) << "n=" << n << " slot " << t;
      }
    }
    for (int s = 0; s < kSlots; ++s) {
      for (int32_t i = 0; i < n; ++i) {
        if (idx[s].tag(i) != 0) {
          ASSERT_EQ(idx[s].tag(i), s + 1);
          ASSERT_EQ(idx[s].gpus(i)[0], s);
        }
      }
    }
  }
  LeafArena small;
  small.Reset(10, 2);
  BestIndex other;
  other.Reset(20, small, 0);
  other.SetLeaf(19, 3);
  other.Update(19);
  EXPECT_EQ(other.Best(), 19);
}

// Several leaves changed, then one Build(): the bulk path of a catch-up.
TEST(BestIndexTest, BuildAfterManyChangesEqualsBruteForce) {
  Rng rng(3);
  for (int32_t n : {1, 40, 1000, 10000}) {
    BestIndex idx;
    idx.Reset(n);
    std::vector<int64_t> score(n, 0);
    std::vector<bool> listed(n, false);
    for (int round = 0; round < 50; ++round) {
      const int changes = 1 + static_cast<int>(rng.Uniform(static_cast<uint64_t>(n)));
      for (int c = 0; c < changes; ++c) {
        const int32_t i = static_cast<int32_t>(rng.Uniform(static_cast<uint64_t>(n)));
        if (rng.Uniform(4) == 0) {
          listed[i] = false;
          idx.UnsetLeaf(i);
        } else {
          score[i] = static_cast<int64_t>(rng.Uniform(20));
          listed[i] = true;
          idx.SetLeaf(i, score[i]);
        }
      }
      idx.Build();
      ASSERT_EQ(idx.Best(), BruteBest(score, listed)) << "n=" << n << " round=" << round;
    }
  }
}

// The indexed policies decide exactly as the exhaustive scan on a random heterogeneous cluster
// under allocation and release churn, memory-bound requests included.
TEST(BestIndexTest, IndexedPoliciesEqualScanUnderChurn) {
  for (const std::string name :
       {"fgd", "fgd-online", "stoker", "bestfit", "packing", "dotprod", "clustering", "weighted"}) {
    ClusterState cluster;
    const GpuModelId a = *cluster.models().Intern("A");
    const GpuModelId b = *cluster.models().Intern("B");
    Rng rng(11);
    for (int i = 0; i < 300; ++i) {
      const int gpus = static_cast<int>(rng.Uniform(3)) * 4;  // 0, 4 or 8
      ASSERT_TRUE(cluster
                      .AddNode({"n" + std::to_string(i),
                                32000 + 32000 * static_cast<int64_t>(rng.Uniform(3)),
                                65536 * (1 + static_cast<int64_t>(rng.Uniform(4))), gpus,
                                rng.Uniform(2) == 0 ? a : b, 0, false})
                      .ok());
    }
    std::vector<Request> shapes;
    for (int i = 0; i < 40; ++i) {
      const int64_t cpu = 1000 * (1 + static_cast<int64_t>(rng.Uniform(16)));
      const int64_t mem = 4096 * (1 + static_cast<int64_t>(rng.Uniform(60)));
      switch (rng.Uniform(3)) {
        case 0:
          shapes.push_back(
              Request::GpuShare(50 * (1 + static_cast<int32_t>(rng.Uniform(19))), cpu, mem));
          break;
        case 1:
          shapes.push_back(Request::WholeGpus(1 << rng.Uniform(4), cpu, mem));
          break;
        default:
          shapes.push_back(Request::CpuOnly(cpu, mem));
      }
    }
    PolicyConfig config;
    config.typical_shapes = ComputeTypicalShapes(shapes, 95);
    auto indexed = std::move(CreatePlacementPolicy(name, config).value());
    auto scan = std::move(CreatePlacementPolicy(name, config).value());
    auto* scoring = dynamic_cast<ScoringPolicy*>(scan.get());
    ASSERT_NE(scoring, nullptr) << name;
    scoring->DisableCache();
    std::deque<Placement> live;
    for (int step = 0; step < 3000; ++step) {
      const Request& r = shapes[rng.Uniform(shapes.size())];
      indexed->Observe(r);
      scan->Observe(r);
      const PlacementResult got = indexed->Place(r, cluster);
      const PlacementResult want = scan->Place(r, cluster);
      ASSERT_EQ(got.status, want.status) << name << " step " << step;
      ASSERT_EQ(got.placement, want.placement) << name << " step " << step;
      if (got.placed()) {
        ASSERT_TRUE(cluster.Allocate(got.placement).ok());
        live.push_back(got.placement);
      }
      // Release a random live placement now and then, the oldest when GPUs run out.
      while (!live.empty() && (rng.Uniform(3) == 0 || cluster.allocated_gpu_milli() * 10 >
                                                          cluster.total_gpu_milli() * 9)) {
        const size_t k = rng.Uniform(live.size());
        ASSERT_TRUE(cluster.Release(live[k]).ok());
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
      }
    }
  }
}

// On clusters of at least ScoringPolicy's eager size, fgd marks every cached shape at every
// change with its score bound, and stoker rescores every cached shape at every change; their
// decisions still equal the exhaustive scan's, from a cluster filled at random to high
// allocation and under churn with bursts of releases. stoker learns online: after 1,100
// observations of part of the shapes, all shapes arrive, and the refresh at 1,536 is adopted
// mid-run (every index rebuilt under the new distribution).
class EagerIndexTest : public testing::TestWithParam<std::string> {};
INSTANTIATE_TEST_SUITE_P(Policies, EagerIndexTest, testing::Values("fgd", "stoker"));

TEST_P(EagerIndexTest, EqualsScanOnLargeCluster) {
  const std::string name = GetParam();
  ClusterState cluster;
  const GpuModelId a = *cluster.models().Intern("A");
  Rng rng(13);
  for (int i = 0; i < 4200; ++i) {
    ASSERT_TRUE(
        cluster
            .AddNode({"n" + std::to_string(i), 32000 + 32000 * static_cast<int64_t>(rng.Uniform(3)),
                      262144, rng.Uniform(8) == 0 ? 0 : 8, a, 0, false})
            .ok());
  }
  std::vector<Request> shapes;
  for (int i = 0; i < 60; ++i) {
    const int64_t cpu = 1000 * (1 + static_cast<int64_t>(rng.Uniform(24)));
    switch (rng.Uniform(3)) {
      case 0:
        shapes.push_back(
            Request::GpuShare(50 * (1 + static_cast<int32_t>(rng.Uniform(19))), cpu, 1024));
        break;
      case 1:
        shapes.push_back(Request::WholeGpus(1 << rng.Uniform(4), cpu, 1024));
        break;
      default:
        shapes.push_back(Request::CpuOnly(cpu, 1024));
    }
  }
  std::deque<Placement> live;
  // Random fill to ~75 % of GPUs (not through the policies).
  for (int tries = 0;
       tries < 200000 && cluster.allocated_gpu_milli() * 4 < cluster.total_gpu_milli() * 3;
       ++tries) {
    const Request& r = shapes[rng.Uniform(shapes.size())];
    const auto node = static_cast<int32_t>(rng.Uniform(static_cast<uint64_t>(cluster.num_nodes())));
    uint8_t gpus[kMaxGpusPerNode] = {};
    if (!cluster.Fits(node, r) || !DefaultGpuChoice(r, cluster.node(node), gpus)) continue;
    const Placement p = MakePlacement(r, node, gpus);
    ASSERT_TRUE(cluster.Allocate(p).ok());
    live.push_back(p);
  }
  PolicyConfig config;
  config.typical_shapes = ComputeTypicalShapes(shapes, 95);
  auto indexed = std::move(CreatePlacementPolicy(name, config).value());
  auto scan = std::move(CreatePlacementPolicy(name, config).value());
  dynamic_cast<ScoringPolicy*>(scan.get())->DisableCache();
  ASSERT_GT(cluster.allocated_gpu_milli() * 10, cluster.total_gpu_milli() * 6);
  const bool learns = name == "stoker";
  if (learns) {
    for (int i = 0; i < 1100; ++i) {
      const Request& r = shapes[rng.Uniform(shapes.size() / 3)];
      indexed->Observe(r);
      scan->Observe(r);
    }
  }
  const int64_t adopted_before = StokerAdoptions(*indexed);
  const int64_t reserve_before = StokerReserveAdoptions(*indexed);
  int placed = 0;
  for (int step = 0; step < 500; ++step) {
    const Request& r = shapes[rng.Uniform(shapes.size())];
    if (learns) {
      indexed->Observe(r);
      scan->Observe(r);
    }
    const PlacementResult got = indexed->Place(r, cluster);
    const PlacementResult want = scan->Place(r, cluster);
    ASSERT_EQ(got.status, want.status) << "step " << step;
    ASSERT_EQ(got.placement, want.placement) << "step " << step;
    if (got.placed()) {
      ++placed;
      ASSERT_TRUE(cluster.Allocate(got.placement).ok());
      live.push_back(got.placement);
    }
    while (!live.empty() && (rng.Uniform(2) == 0 ||
                             cluster.allocated_gpu_milli() * 5 > cluster.total_gpu_milli() * 4)) {
      const size_t k = rng.Uniform(live.size());
      ASSERT_TRUE(cluster.Release(live[k]).ok());
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
    }
    // Now and then a burst of releases: more changes than stoker rescores per decision in the
    // other shapes (ScoringPolicy::kEagerBudget), so their catch-up is deferred and resumed.
    for (int burst = step % 50 == 49 ? 200 : 0; burst > 0 && !live.empty(); --burst) {
      ASSERT_TRUE(cluster.Release(live.back()).ok());
      live.pop_back();
    }
  }
  EXPECT_GT(placed, 300);
  if (learns) {
    EXPECT_EQ(StokerAdoptions(*indexed), adopted_before + 1);
    // New reserve weights drop only the scores of the nodes with a slot of a class whose weight
    // moved (ScoringPolicy::InvalidateNodes); the scan above checks every decision after them.
    EXPECT_GT(StokerReserveAdoptions(*indexed), reserve_before);
  }
}

}  // namespace
}  // namespace stoker::scheduler
