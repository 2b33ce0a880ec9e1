// The two views of GPU commitments the scheduling pass gives the placement library when
// preemptible work may oversubscribe GPUs.

#include "scheduler/pass/gpu_commitments.h"

#include <gtest/gtest.h>

namespace stoker::pass {
namespace {
using scheduler::ClusterState;
using scheduler::GpuShare;
using scheduler::Placement;

ClusterState OneNode(int gpus, bool mig = false) {
  ClusterState c;
  scheduler::NodeSpec spec;
  spec.name = "n1";
  spec.cpu_milli = 8000;
  spec.memory_mib = 65536;
  spec.num_gpus = gpus;
  spec.gpu_model = c.models().Intern("H100").value();
  spec.gpu_memory_mib = 81920;
  spec.mig_enabled = mig;
  EXPECT_TRUE(c.AddNode(spec).ok());
  return c;
}

Placement On(std::initializer_list<std::pair<int, int>> shares, int64_t cpu = 1000) {
  Placement p;
  p.node = 0;
  p.cpu_milli = cpu;
  p.memory_mib = 1024;
  for (auto [gpu, milli] : shares) {
    p.gpus[p.num_gpus++] = GpuShare{static_cast<uint8_t>(gpu), static_cast<int16_t>(milli), 0};
  }
  return p;
}

TEST(GpuCommitments, ClampKeepsWhatFitsPerGpu) {
  ClusterState c = OneNode(2);
  ASSERT_TRUE(c.Allocate(On({{0, 700}})).ok());
  Placement want = On({{0, 500}, {1, 1000}});
  Placement fits = ClampToFree(want, c);
  ASSERT_EQ(fits.num_gpus, 2);
  EXPECT_EQ(fits.gpus[0].milli, 300);
  EXPECT_EQ(fits.gpus[1].milli, 1000);
  EXPECT_EQ(fits.cpu_milli, want.cpu_milli);
  EXPECT_TRUE(c.Allocate(fits).ok());
  // A full GPU: the share disappears, CPU and memory stay.
  Placement none = ClampToFree(On({{0, 100}}), c);
  EXPECT_EQ(none.num_gpus, 0);
  EXPECT_EQ(none.cpu_milli, 1000);
  EXPECT_TRUE(c.Allocate(none).ok());
}

TEST(GpuCommitments, BestEffortViewShowsRoomUpToTheRatio) {
  ClusterState c = OneNode(3);
  GpuCommitments commits(c.num_nodes());
  // GPU 0 at 1.2 (a guaranteed whole GPU and a preemptible 0.2), GPU 1 at 0.3, GPU 2 empty.
  commits.Add(1, false, On({{0, 1000}}), false);
  commits.Add(2, true, On({{0, 200}}), false);
  commits.Add(3, false, On({{1, 300}}), false);
  for (const Placement& p : {On({{0, 1000}}, 3000), On({{1, 300}}, 0)}) {
    ASSERT_TRUE(c.Allocate(ClampToFree(p, c)).ok());
  }
  EXPECT_EQ(commits.Total(0, 0), 1200);
  int64_t guaranteed = 0;
  for (const auto& h : commits.Holders(0, 0)) guaranteed += h.preemptible ? 0 : h.milli;
  EXPECT_EQ(guaranteed, 1000);
  auto view = BuildBestEffortView(c, commits, 1500);
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  const scheduler::NodeState& n = view->node(0);
  EXPECT_EQ(n.gpu_free_milli[0], 300);   // 1.5 - 1.2
  EXPECT_EQ(n.gpu_free_milli[1], 1000);  // 0.3 <= 0.5: a whole GPU still fits
  EXPECT_EQ(n.gpu_free_milli[2], 1000);
  EXPECT_EQ(n.free_cpu_milli, c.node(0).free_cpu_milli);  // CPU and memory are real
  EXPECT_EQ(n.free_memory_mib, c.node(0).free_memory_mib);
  // At 1.0 the view is the real cluster.
  auto same = BuildBestEffortView(c, commits, 1000);
  ASSERT_TRUE(same.ok());
  for (int g = 0; g < 3; ++g)
    EXPECT_EQ(same->node(0).gpu_free_milli[g], c.node(0).gpu_free_milli[g]);
}

TEST(GpuCommitments, DeltaKeepsTheViewEqualToARebuild) {
  ClusterState c = OneNode(2);
  GpuCommitments commits(c.num_nodes());
  auto view = BuildBestEffortView(c, commits, 1500);
  ASSERT_TRUE(view.ok());
  // Placements in sequence: the view updated by deltas equals one rebuilt from scratch.
  for (const Placement& p :
       {On({{0, 300}}), On({{0, 1000}, {1, 1000}}), On({{1, 200}}), On({{0, 150}})}) {
    ASSERT_TRUE(view->Allocate(BestEffortDelta(p, commits, 1500)).ok());
    commits.Add(7, true, p, false);
    ASSERT_TRUE(c.Allocate(ClampToFree(p, c)).ok());
    auto rebuilt = BuildBestEffortView(c, commits, 1500);
    ASSERT_TRUE(rebuilt.ok());
    for (int g = 0; g < 2; ++g) {
      EXPECT_EQ(view->node(0).gpu_free_milli[g], rebuilt->node(0).gpu_free_milli[g]) << g;
    }
    EXPECT_EQ(view->node(0).free_cpu_milli, rebuilt->node(0).free_cpu_milli);
  }
  EXPECT_EQ(commits.Total(0, 0), 1450);
  EXPECT_EQ(view->node(0).gpu_free_milli[0], 50);
}

TEST(GpuCommitments, MigSlicesAreNeverShared) {
  ClusterState c = OneNode(1, /*mig=*/true);
  Placement slice;
  slice.node = 0;
  slice.num_gpus = 1;
  slice.gpus[0] = GpuShare{0, 0, 3};
  ASSERT_TRUE(c.Allocate(slice).ok());
  GpuCommitments commits(c.num_nodes());
  commits.Add(1, true, slice, /*mig=*/true);
  EXPECT_EQ(commits.Total(0, 0), 0);
  auto view = BuildBestEffortView(c, commits, 1500);
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(view->node(0).gpu_free_slices[0], 4);  // as in the real cluster
}

TEST(GpuCommitments, AdmitsPreemptibleUpToTheRatioAndNotOneMilliBeyond) {
  EXPECT_TRUE(AdmitsPreemptible(1000, 500, 1500));  // a guaranteed GPU plus half a GPU
  EXPECT_FALSE(AdmitsPreemptible(1000, 501, 1500));
  EXPECT_TRUE(AdmitsPreemptible(1000, 500, 1500));
  EXPECT_TRUE(AdmitsPreemptible(0, 1000, 1000));
  EXPECT_FALSE(AdmitsPreemptible(1000, 1, 1000));  // ratio 1.0: nothing beyond capacity
  EXPECT_FALSE(AdmitsPreemptible(0, 0, 1500));     // an empty share is no admission
}

// The best-effort view is the admission rule in the placement library's terms: a share fits on a
// GPU of the view exactly where AdmitsPreemptible says yes.
TEST(GpuCommitments, BestEffortViewAgreesWithTheAdmissionRule) {
  for (int32_t ratio : {1000, 1200, 1500}) {
    for (int64_t total = 0; total <= ratio; total += 50) {
      for (int64_t milli = 50; milli <= 1000; milli += 50) {
        const bool fits = BestEffortUsed(total, ratio) + milli <= scheduler::kMilliPerGpu;
        EXPECT_EQ(fits, AdmitsPreemptible(total, milli, ratio))
            << "ratio " << ratio << " total " << total << " milli " << milli;
      }
    }
  }
}

TEST(GpuCommitments, ShareVictimsStopsTheYoungestAndOnlyWhatIsNeeded) {
  // A guaranteed 500 beside old (500, started 1) and young (500, started 9) preemptible shares:
  // the young one goes, the old one stays (500 + 500 fit).
  auto v = ShareVictims({{1, 500, true, 1}, {2, 500, true, 9}}, 500);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(*v, (std::vector<int64_t>{2}));
  // A whole GPU: both go, youngest first; equal starts: the larger id first.
  v = ShareVictims({{1, 500, true, 1}, {2, 500, true, 9}, {3, 300, true, 9}}, 1000);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(*v, (std::vector<int64_t>{3, 2, 1}));
  // Room already: nobody stops.
  v = ShareVictims({{1, 300, true, 1}}, 700);
  ASSERT_TRUE(v.has_value());
  EXPECT_TRUE(v->empty());
  // Guaranteed (or otherwise unmovable) work is never stopped: not enough room, no plan.
  EXPECT_FALSE(ShareVictims({{1, 1000, false, 1}, {2, 500, true, 1}}, 100).has_value());
  EXPECT_FALSE(ShareVictims({{1, 600, false, 1}, {2, 500, true, 2}}, 500).has_value());
  v = ShareVictims({{1, 500, false, 1}, {2, 500, true, 2}}, 500);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(*v, (std::vector<int64_t>{2}));
}

}  // namespace
}  // namespace stoker::pass
