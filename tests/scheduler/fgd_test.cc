#include "scheduler/fgd.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <vector>

#include "scheduler/registry.h"
#include "scheduler/rng.h"
#include "scheduler/scoring_policy.h"
#include "scheduler/stoker_policy.h"

namespace stoker::scheduler {
namespace {

TypicalShapes OneShape(PodShape s) { return {{{s, 1}}, 1}; }

TEST(TypicalShapesTest, CoversRequestedShareMostFrequentFirst) {
  std::vector<Request> pods;
  for (int i = 0; i < 60; ++i) pods.push_back(Request::GpuShare(500, 1000, 1));
  for (int i = 0; i < 30; ++i) pods.push_back(Request::WholeGpus(1, 2000, 1));
  for (int i = 0; i < 10; ++i) pods.push_back(Request::CpuOnly(4000, 1));
  TypicalShapes t = ComputeTypicalShapes(pods, 85);
  ASSERT_EQ(t.shapes.size(), 2u);  // 60 + 30 = 90 % >= 85 %
  EXPECT_EQ(t.shapes[0].shape.gpu_milli, 500);
  EXPECT_EQ(t.total, 90);
  EXPECT_EQ(ComputeTypicalShapes(pods, 95).shapes.size(), 3u);
  EXPECT_EQ(ComputeTypicalShapes(pods, 60).shapes.size(), 1u);
}

TEST(FragModelTest, MatchesPublishedDefinition) {
  const int16_t left[4] = {1000, 300, 600, 0};  // idle = 1900
  // Share of 500 with enough CPU: fragment = GPUs individually too small (300 + 0).
  FragModel share(OneShape({1000, 1, 500, 0}));
  EXPECT_DOUBLE_EQ(share.NodeFrag(8000, left, 4, 0), 300.0);
  // Not enough CPU: everything idle is fragment.
  EXPECT_DOUBLE_EQ(share.NodeFrag(500, left, 4, 0), 1900.0);
  // Two whole GPUs but only one is free: everything idle is fragment.
  FragModel two(OneShape({1000, 2, 1000, 0}));
  EXPECT_DOUBLE_EQ(two.NodeFrag(8000, left, 4, 0), 1900.0);
  // Model not allowed: everything idle.
  FragModel other_model(OneShape({1000, 1, 100, GpuModelTable::Bit(3)}));
  EXPECT_DOUBLE_EQ(other_model.NodeFrag(8000, left, 4, 0), 1900.0);
  // CPU-only typical shapes count all idle GPU milli (as the published code does).
  FragModel cpu(OneShape({1000, 0, 0, 0}));
  EXPECT_DOUBLE_EQ(cpu.NodeFrag(8000, left, 4, 0), 1900.0);
  // Frequencies weight the shapes.
  TypicalShapes mix{{{{1000, 1, 500, 0}, 3}, {{1000, 2, 1000, 0}, 1}}, 4};
  EXPECT_DOUBLE_EQ(FragModel(mix).NodeFrag(8000, left, 4, 0), 0.75 * 300 + 0.25 * 1900);
}

TEST(FgdPolicyTest, PicksTheGpuThatLeavesNoFragment) {
  ClusterState c;
  GpuModelId g = *c.models().Intern("G");
  ASSERT_TRUE(c.AddNode({"a", 64000, 262144, 2, g, 0, false}).ok());
  Placement p;
  p.node = 0;
  p.num_gpus = 1;
  p.gpus[0] = {1, 500, 0};
  ASSERT_TRUE(c.Allocate(p).ok());  // GPU 1 has 500 left, GPU 0 is free
  PolicyConfig config;
  config.typical_shapes = TypicalShapes{{{{1000, 1, 500, 0}, 1}, {{1000, 1, 1000, 0}, 1}}, 2};
  auto fgd = std::move(CreatePlacementPolicy("fgd", config).value());
  PlacementResult r = fgd->Place(Request::GpuShare(500, 1000, 1), c);
  ASSERT_TRUE(r.placed());
  EXPECT_EQ(r.placement.gpus[0].gpu, 1);  // fills the half-used GPU, keeps GPU 0 whole
}

TEST(FgdPolicyTest, OnlineVariantLearnsFromObserve) {
  ClusterState c;
  GpuModelId g = *c.models().Intern("G");
  ASSERT_TRUE(c.AddNode({"a", 64000, 262144, 2, g, 0, false}).ok());
  auto online = std::move(CreatePlacementPolicy("fgd-online", PolicyConfig{}).value());
  Request r = Request::GpuShare(500, 1000, 1);
  for (int i = 0; i < 3; ++i) {
    online->Observe(r);
    PlacementResult res = online->Place(r, c);
    ASSERT_TRUE(res.placed());
    ASSERT_TRUE(c.Allocate(res.placement).ok());
  }
  // Learned that 500-milli shares are typical: the third went next to the second on one GPU.
  EXPECT_EQ(c.node(0).full_free_gpus, 0);
  EXPECT_EQ(c.allocated_gpu_milli(), 1500);
}

TEST(StokerPolicyTest, CpuOnlyWorkGoesWhereGpusAreTaken) {
  ClusterState c;
  GpuModelId g = *c.models().Intern("G");
  ASSERT_TRUE(c.AddNode({"idle", 64000, 262144, 4, g, 0, false}).ok());
  ASSERT_TRUE(c.AddNode({"busy", 64000, 262144, 4, g, 0, false}).ok());
  auto stoker = std::move(CreatePlacementPolicy("stoker", PolicyConfig{}).value());
  Request whole = Request::WholeGpus(4, 8000, 1);
  stoker->Observe(whole);
  uint8_t gpus[4] = {0, 1, 2, 3};
  ASSERT_TRUE(c.Allocate(MakePlacement(whole, 1, gpus)).ok());
  Request cpu = Request::CpuOnly(32000, 1);
  stoker->Observe(cpu);
  PlacementResult r = stoker->Place(cpu, c);
  ASSERT_TRUE(r.placed());
  EXPECT_EQ(r.placement.node, 1);  // its CPU would strand the idle node's GPUs
}

// stoker's score bound (what its index marks a changed node with) is never below the exact
// score, for whole GPUs, shares, CPU-only and MIG requests on random node states, while its
// learned distribution and CPU:GPU ratio change; and it is reached for some requests.
TEST(StokerPolicyTest, ScoreNeverExceedsBound) {
  ClusterState c;
  const GpuModelId g = *c.models().Intern("G");
  Rng rng(21);
  for (int i = 0; i < 40; ++i) {
    const bool mig = i % 10 == 9;
    const int gpus = mig ? 4 : static_cast<int>(rng.Uniform(3)) * 4;  // 0, 4 or 8
    ASSERT_TRUE(
        c.AddNode({"n" + std::to_string(i), 16000 * (1 + static_cast<int64_t>(rng.Uniform(6))),
                   524288, gpus, g, 0, mig})
            .ok());
  }
  auto stoker = std::move(CreatePlacementPolicy("stoker", PolicyConfig{}).value());
  auto random_request = [&] {
    const int64_t cpu = 1000 * static_cast<int64_t>(rng.Uniform(24));
    switch (rng.Uniform(4)) {
      case 0:
        return Request::CpuOnly(cpu, 1024);
      case 1:
        return Request::WholeGpus(1 << rng.Uniform(4), cpu, 1024);
      case 2:
        return Request::GpuShare(static_cast<int32_t>(10 * (1 + rng.Uniform(99))), cpu, 1024);
      default:
        return Request::Mig(rng.Uniform(2) == 0 ? MigProfile::k1g : MigProfile::k3g, cpu, 1024);
    }
  };
  int checked = 0, tight = 0;
  for (int step = 0; step < 3000; ++step) {
    const Request r = random_request();
    stoker->Observe(r);
    // Change the cluster: place r where the policy says, or release something now and then.
    const PlacementResult placed = stoker->Place(r, c);
    if (placed.placed()) {
      ASSERT_TRUE(c.Allocate(placed.placement).ok());
    }
    const Request probe = random_request();
    for (int32_t node = 0; node < c.num_nodes(); ++node) {
      int64_t score = 0, bound = 0;
      if (!StokerScoreAndBound(*stoker, probe, c, node, &score, &bound)) continue;
      ++checked;
      tight += score == bound;
      ASSERT_LE(score, bound) << "step " << step << " node " << node;
    }
    if (c.allocated_gpu_milli() * 10 > c.total_gpu_milli() * 8) {
      // Start over from an empty cluster state (keeps the policy's learning).
      ClusterState fresh;
      (void)fresh.models().Intern("G");
      for (int32_t node = 0; node < c.num_nodes(); ++node)
        ASSERT_TRUE(fresh.AddNode(c.spec(node)).ok());
      c = std::move(fresh);
    }
  }
  EXPECT_GT(checked, 10000);
  EXPECT_GT(tight, 0);
  EXPECT_GT(StokerAdoptions(*stoker), 3);
}

// The per-shape score cache must not change any decision.
TEST(ScoreCacheTest, CachedAndUncachedPoliciesAgree) {
  for (const std::string name :
       {"dotprod", "bestfit", "packing", "clustering", "fgd", "stoker", "weighted"}) {
    ClusterState a, b;
    for (ClusterState* c : {&a, &b}) {
      GpuModelId g = *c->models().Intern("G");
      for (int i = 0; i < 30; ++i)
        ASSERT_TRUE(c->AddNode({"n" + std::to_string(i), 32000 + 8000 * (i % 4), 262144,
                                1 << (i % 4), g, 0, false})
                        .ok());
    }
    PolicyConfig config;
    std::vector<Request> pods;
    Rng rng(3);
    for (int i = 0; i < 300; ++i) {
      switch (rng.Uniform(4)) {
        case 0:
          pods.push_back(Request::CpuOnly(2000 * (1 + static_cast<int64_t>(rng.Uniform(4))), 1));
          break;
        case 1:
          pods.push_back(
              Request::GpuShare(250 * (1 + static_cast<int32_t>(rng.Uniform(3))), 2000, 1));
          break;
        default:
          pods.push_back(Request::WholeGpus(1 << rng.Uniform(3), 4000, 1));
          break;
      }
    }
    config.typical_shapes = ComputeTypicalShapes(pods, 95);
    auto cached = std::move(CreatePlacementPolicy(name, config).value());
    auto uncached = std::move(CreatePlacementPolicy(name, config).value());
    static_cast<ScoringPolicy*>(uncached.get())->DisableCache();
    for (const Request& r : pods) {
      cached->Observe(r);
      uncached->Observe(r);
      PlacementResult x = cached->Place(r, a);
      PlacementResult y = uncached->Place(r, b);
      ASSERT_EQ(x.status, y.status) << name;
      if (!x.placed()) continue;
      ASSERT_EQ(x.placement, y.placement) << name;
      ASSERT_TRUE(a.Allocate(x.placement).ok());
      ASSERT_TRUE(b.Allocate(y.placement).ok());
    }
    EXPECT_GT(a.allocated_gpu_milli(), 0) << name;
  }
}

// The per-shape score index must give the exhaustive scan's decision under churn: releases,
// memory that binds on some nodes (the index walks past them), best-effort oversubscription,
// more shapes than the index keeps (eviction), a copied cluster (a new history) and trial copies
// placed on between decisions on the original.
TEST(ScoreCacheTest, IndexMatchesExhaustiveScanUnderChurn) {
  for (const std::string name :
       {"dotprod", "bestfit", "packing", "clustering", "fgd", "stoker", "weighted"}) {
    ClusterState a, b;
    for (ClusterState* c : {&a, &b}) {
      GpuModelId g = *c->models().Intern("G");
      for (int i = 0; i < 40; ++i) {
        ASSERT_TRUE(c->AddNode({"n" + std::to_string(i), 32000 + 8000 * (i % 4), 8192 * (1 + i % 5),
                                1 << (i % 4), g, 0, false})
                        .ok());
      }
      ASSERT_TRUE(c->SetBestEffortOversubscription(1500).ok());
    }
    Rng rng(11);
    std::vector<Request> pods;
    for (int i = 0; i < 1500; ++i) {
      // 100 distinct CPU amounts: more shapes than the index keeps.
      const int64_t cpu = 500 * (1 + static_cast<int64_t>(rng.Uniform(100)));
      const int64_t mem = 1024 * (1 + static_cast<int64_t>(rng.Uniform(12)));
      Request r;
      switch (rng.Uniform(4)) {
        case 0:
          r = Request::CpuOnly(cpu, mem);
          break;
        case 1:
          r = Request::GpuShare(250 * (1 + static_cast<int32_t>(rng.Uniform(3))), cpu, mem);
          break;
        default:
          r = Request::WholeGpus(1 << rng.Uniform(3), cpu, mem);
          break;
      }
      r.best_effort = rng.Uniform(5) == 0;
      pods.push_back(r);
    }
    PolicyConfig config;
    config.typical_shapes = ComputeTypicalShapes(pods, 95);
    auto indexed = std::move(CreatePlacementPolicy(name, config).value());
    auto scan = std::move(CreatePlacementPolicy(name, config).value());
    static_cast<ScoringPolicy*>(scan.get())->DisableCache();
    std::vector<Placement> live;
    int placed = 0;
    for (size_t i = 0; i < pods.size(); ++i) {
      const Request& r = pods[i];
      if (i == 700) a = ClusterState(a);  // a copy: the index must notice and rebuild
      indexed->Observe(r);
      scan->Observe(r);
      PlacementResult x = indexed->Place(r, a);
      PlacementResult y = scan->Place(r, b);
      ASSERT_EQ(x.status, y.status) << name << " request " << i;
      if (x.placed()) {
        ASSERT_EQ(x.placement, y.placement) << name << " request " << i;
        ASSERT_TRUE(a.Allocate(x.placement).ok());
        ASSERT_TRUE(b.Allocate(y.placement).ok());
        live.push_back(x.placement);
        ++placed;
      }
      // A trial copy (as the server's preemption check makes), used between decisions on the
      // original: both must keep agreeing with the scan.
      if (i % 10 == 5 && !live.empty()) {
        ClusterState ta = a, tb = b;
        ASSERT_TRUE(ta.Release(live.front()).ok());
        ASSERT_TRUE(tb.Release(live.front()).ok());
        PlacementResult tx = indexed->Place(r, ta);
        PlacementResult ty = scan->Place(r, tb);
        ASSERT_EQ(tx.status, ty.status) << name << " trial " << i;
        if (tx.placed()) {
          ASSERT_EQ(tx.placement, ty.placement) << name << " trial " << i;
        }
      }
      // Churn: release a random live placement now and then.
      if (!live.empty() && rng.Uniform(3) == 0) {
        const size_t k = rng.Uniform(live.size());
        ASSERT_TRUE(a.Release(live[k]).ok());
        ASSERT_TRUE(b.Release(live[k]).ok());
        live[k] = live.back();
        live.pop_back();
      }
    }
    EXPECT_GT(placed, 300) << name;
  }
}

// The definition in fgd.h, evaluated per shape with a plain loop over the GPUs (what NodeFrag did
// before it counted per distinct GPU size), in the same order of addition.
double ReferenceFrag(const TypicalShapes& typical, int64_t cpu_free, const int16_t* left,
                     int num_gpus, GpuModelId model) {
  int64_t idle = 0;
  for (int g = 0; g < num_gpus; ++g) idle += left[g];
  if (idle == 0) return 0.0;
  const double total = static_cast<double>(typical.total);
  double cpu_only = 0;
  for (const TypicalShape& t : typical.shapes) {
    if (t.shape.num_gpu == 0 || t.shape.gpu_milli == 0)
      cpu_only += static_cast<double>(t.count) / total;
  }
  double f = cpu_only * static_cast<double>(idle);
  for (const TypicalShape& t : typical.shapes) {
    const PodShape& p = t.shape;
    if (p.num_gpu == 0 || p.gpu_milli == 0) continue;
    const double freq = static_cast<double>(t.count) / total;
    if ((p.allowed_models != 0 && (p.allowed_models & GpuModelTable::Bit(model)) == 0) ||
        cpu_free < p.cpu_milli) {
      f += freq * static_cast<double>(idle);
      continue;
    }
    int fit = 0;
    int64_t small = 0;
    for (int g = 0; g < num_gpus; ++g) {
      if (left[g] >= p.gpu_milli) {
        ++fit;
      } else {
        small += left[g];
      }
    }
    f += freq * static_cast<double>(fit >= p.num_gpu ? small : idle);
  }
  return f;
}

// NodeFrag (counted once per distinct GPU size, or per shape beyond 64 sizes) and FragVariants
// (one GPU lowered) equal the definition bit for bit on random shapes and node states.
TEST(FragModelTest, CountsEqualDefinitionOnRandomStates) {
  Rng rng(5);
  for (const int sizes : {3, 13, 64, 65, 200}) {
    for (int round = 0; round < 20; ++round) {
      TypicalShapes typical;
      for (int i = 0; i < 40 + sizes; ++i) {
        PodShape p;
        p.cpu_milli = 1000 * static_cast<int64_t>(rng.Uniform(40));
        const uint64_t kind = rng.Uniform(4);
        p.num_gpu = kind == 0 ? 0 : kind == 1 ? 1 << rng.Uniform(4) : 1;
        p.gpu_milli = kind == 0 ? 0
                      : kind == 1
                          ? 1000
                          : static_cast<int32_t>(1 + rng.Uniform(static_cast<uint64_t>(sizes)) *
                                                         (999 / sizes));
        p.allowed_models = rng.Uniform(4) == 0 ? GpuModelMask{2} : GpuModelMask{0};
        typical.shapes.push_back({p, 1 + static_cast<int64_t>(rng.Uniform(50))});
        typical.total += typical.shapes.back().count;
      }
      const FragModel model(typical);
      FragVariants variants;
      for (int node = 0; node < 50; ++node) {
        const int num_gpus = 1 + static_cast<int>(rng.Uniform(8));
        int16_t left[kMaxGpusPerNode] = {};
        for (int g = 0; g < num_gpus; ++g) {
          left[g] = static_cast<int16_t>(rng.Uniform(3) == 0 ? 1000 : rng.Uniform(1001));
        }
        const int64_t cpu = 1000 * static_cast<int64_t>(rng.Uniform(45));
        const GpuModelId gpu_model = static_cast<GpuModelId>(rng.Uniform(2));
        ASSERT_EQ(model.NodeFrag(cpu, left, num_gpus, gpu_model),
                  ReferenceFrag(typical, cpu, left, num_gpus, gpu_model));
        variants.Prepare(model, cpu, left, num_gpus, gpu_model);
        for (int g = 0; g < num_gpus; ++g) {
          const int16_t from = left[g];
          const int16_t to = static_cast<int16_t>(rng.Uniform(static_cast<uint64_t>(from) + 1));
          left[g] = to;
          ASSERT_EQ(variants.WithChange(from, to),
                    ReferenceFrag(typical, cpu, left, num_gpus, gpu_model))
              << "sizes " << sizes << " gpu " << g;
          left[g] = from;
        }
      }
    }
  }
}

// The tabled bound on FGD's score is never below the score and at most one level above, on a
// grid over the whole range and right at each level's threshold.
TEST(FgdScoreTest, TabledBoundCoversTheScore) {
  std::vector<double> drops;
  for (double d = -10000; d <= 40000; d += 0.37) drops.push_back(d);
  for (int k = 1; k <= 99; ++k) {
    const double t = 1000.0 * std::log(k / (100.0 - k));
    for (double e : {-1e-3, -1e-6, -1e-9, 0.0, 1e-9, 1e-6, 1e-3}) drops.push_back(t + e);
  }
  for (const double d : drops) {
    const int64_t score = FgdScore(d);
    const int64_t bound = FgdScoreAtMost(d);
    ASSERT_GE(bound, score) << "drop " << d;
    ASSERT_LE(bound, score + 1) << "drop " << d;
  }
  EXPECT_EQ(FgdScoreAtMost(0.0), 50);
  EXPECT_EQ(FgdScore(8000.0), 99);
}

// The score bounds' premise: placing a request lowers F by at most FragDropBound, for whole GPUs
// (on fully free GPUs), a share on any GPU with room, CPU-only requests and MIG, on random
// typical sets and node states; the bound is tight for some whole-GPU placements.
TEST(FragModelTest, DropNeverExceedsBound) {
  Rng rng(9);
  int tight = 0;
  for (int round = 0; round < 30; ++round) {
    TypicalShapes typical;
    for (int i = 0; i < 40; ++i) {
      PodShape p;
      p.cpu_milli = 1000 * static_cast<int64_t>(rng.Uniform(40));
      const uint64_t kind = rng.Uniform(4);
      p.num_gpu = kind == 0 ? 0 : kind == 1 ? 1 << rng.Uniform(4) : 1;
      p.gpu_milli = kind == 0   ? 0
                    : kind == 1 ? 1000
                                : static_cast<int32_t>(10 * (1 + rng.Uniform(99)));
      p.allowed_models = rng.Uniform(4) == 0 ? GpuModelMask{2} : GpuModelMask{0};
      typical.shapes.push_back({p, 1 + static_cast<int64_t>(rng.Uniform(50))});
      typical.total += typical.shapes.back().count;
    }
    const FragModel model(typical);
    for (int node = 0; node < 200; ++node) {
      NodeState n;
      n.num_gpus = static_cast<uint8_t>(1 + rng.Uniform(8));
      for (int g = 0; g < n.num_gpus; ++g) {
        n.gpu_free_milli[g] =
            static_cast<int16_t>(rng.Uniform(2) == 0 ? 1000 : 10 * rng.Uniform(101));
      }
      n.free_cpu_milli = 1000 * static_cast<int64_t>(rng.Uniform(45));
      n.gpu_model = static_cast<GpuModelId>(rng.Uniform(2));
      double blocked = 0;
      const double before = model.NodeFrag(n.free_cpu_milli, n.gpu_free_milli.data(), n.num_gpus,
                                           n.gpu_model, &blocked);
      ASSERT_EQ(before, model.NodeFrag(n));
      const int64_t cpu = 1000 * static_cast<int64_t>(rng.Uniform(20));
      Request r;
      std::array<int16_t, kMaxGpusPerNode> left = n.gpu_free_milli;
      switch (rng.Uniform(4)) {
        case 0:
          r = Request::CpuOnly(cpu, 0);
          break;
        case 1: {
          r = Request::WholeGpus(1 << rng.Uniform(4), cpu, 0);
          uint8_t gpus[kMaxGpusPerNode];
          if (!PickFullyFreeGpus(n, r.num_gpu, gpus)) continue;
          for (int i = 0; i < r.num_gpu; ++i) left[gpus[i]] = 0;
          break;
        }
        case 2: {
          r = Request::GpuShare(static_cast<int32_t>(10 * (1 + rng.Uniform(99))), cpu, 0);
          std::vector<int> room;
          for (int g = 0; g < n.num_gpus; ++g) {
            if (n.gpu_free_milli[g] >= r.gpu_milli) room.push_back(g);
          }
          if (room.empty()) continue;
          left[room[rng.Uniform(room.size())]] -= static_cast<int16_t>(r.gpu_milli);
          break;
        }
        default: {
          // MIG: any lowering of one GPU's free milli (the bound then uses F before only).
          r = Request::Mig(MigProfile::k1g, cpu, 0);
          const int g = static_cast<int>(rng.Uniform(n.num_gpus));
          left[g] = static_cast<int16_t>(rng.Uniform(static_cast<uint64_t>(left[g]) + 1));
        }
      }
      if (n.free_cpu_milli < cpu) continue;
      const double after =
          model.NodeFrag(n.free_cpu_milli - cpu, left.data(), n.num_gpus, n.gpu_model);
      const double bound = FragDropBound(model, r, n, before, blocked);
      ASSERT_LE(before - after, bound + 1e-6) << "round " << round << " node " << node << " gpus "
                                              << r.num_gpu << " milli " << r.gpu_milli;
      if (r.num_gpu > 0 && !r.IsGpuShare() && !r.IsMig() && before - after > bound - 1e-6) ++tight;
    }
  }
  EXPECT_GT(tight, 0);  // a bound that is never reached would be suspiciously loose
}

}  // namespace
}  // namespace stoker::scheduler
