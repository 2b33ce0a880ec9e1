#include "scheduler/cluster.h"

#include <gtest/gtest.h>

#include "scheduler/policy.h"

namespace stoker::scheduler {
namespace {

ClusterState TwoNodes() {
  ClusterState c;
  GpuModelId g2 = *c.models().Intern("G2");
  EXPECT_TRUE(c.AddNode({"a", 64000, 262144, 8, g2, 0, false}).ok());
  EXPECT_TRUE(c.AddNode({"b", 32000, 131072, 2, g2, 0, false}).ok());
  return c;
}

Placement Share(int32_t node, uint8_t gpu, int16_t milli, int64_t cpu) {
  Placement p;
  p.node = node;
  p.cpu_milli = cpu;
  p.num_gpus = 1;
  p.gpus[0] = {gpu, milli, 0};
  return p;
}

TEST(ClusterStateTest, AllocateAndReleaseKeepAggregatesExact) {
  ClusterState c = TwoNodes();
  EXPECT_EQ(c.total_gpu_milli(), 10000);
  EXPECT_EQ(c.total_gpus(), 10);
  Placement p = Share(0, 3, 300, 4000);
  ASSERT_TRUE(c.Allocate(p).ok());
  EXPECT_EQ(c.allocated_gpu_milli(), 300);
  EXPECT_EQ(c.node(0).gpu_free_milli[3], 700);
  EXPECT_EQ(c.node(0).full_free_gpus, 7);
  EXPECT_EQ(c.node(0).free_cpu_milli, 60000);
  const uint32_t v = c.node(0).version;
  ASSERT_TRUE(c.Release(p).ok());
  EXPECT_NE(c.node(0).version, v);
  EXPECT_EQ(c.allocated_gpu_milli(), 0);
  EXPECT_EQ(c.allocated_cpu_milli(), 0);
  EXPECT_EQ(c.node(0).full_free_gpus, 8);
  // Double release is refused and changes nothing.
  EXPECT_EQ(c.Release(p).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(c.node(0).gpu_free_milli[3], 1000);
}

TEST(ClusterStateTest, JournalListsChangedNodesAndHistoryIdMarksCopies) {
  ClusterState c = TwoNodes();
  const uint64_t start = c.journal_end();
  const uint64_t id = c.history_id();
  Placement p = Share(1, 0, 500, 1000);
  ASSERT_TRUE(c.Allocate(p).ok());
  ASSERT_TRUE(c.Allocate(Share(0, 2, 100, 1000)).ok());
  ASSERT_TRUE(c.Release(p).ok());
  // A refused change is not journaled.
  EXPECT_FALSE(c.Release(p).ok());
  ASSERT_EQ(c.journal_end(), start + 3);
  EXPECT_EQ(c.journal_at(start), 1);
  EXPECT_EQ(c.journal_at(start + 1), 0);
  EXPECT_EQ(c.journal_at(start + 2), 1);
  EXPECT_EQ(c.history_id(), id);  // allocations do not start a new history
  ClusterState copy = c;
  EXPECT_NE(copy.history_id(), c.history_id());
  ClusterState assigned;
  assigned = c;
  EXPECT_NE(assigned.history_id(), c.history_id());
  ASSERT_TRUE(c.SetBestEffortOversubscription(1200).ok());
  EXPECT_NE(c.history_id(), id);  // feasibility changed everywhere
}

TEST(ClusterStateTest, AdoptCopiesOnlyChangedNodesAndKeepsItsHistory) {
  ClusterState kept = TwoNodes();
  ASSERT_TRUE(kept.Allocate(Share(0, 1, 400, 2000)).ok());
  ClusterState fresh = TwoNodes();  // the same layout, node 0 holding the same, node 1 more
  ASSERT_TRUE(fresh.Allocate(Share(0, 1, 400, 2000)).ok());
  ASSERT_TRUE(fresh.Allocate(Share(1, 0, 250, 1000)).ok());
  ASSERT_TRUE(fresh.SetMeasuredBusy(0, 5, 700).ok());
  const uint64_t id = kept.history_id();
  const uint64_t start = kept.journal_end();
  const uint64_t v0 = kept.node(0).version;
  ASSERT_TRUE(kept.Allocate(Share(0, 2, 100, 0)).ok());  // placed since: undone by Adopt
  ASSERT_TRUE(kept.Release(Share(0, 2, 100, 0)).ok());
  const uint64_t after_undo = kept.journal_end();
  EXPECT_NE(kept.node(0).version, v0);
  // Node 0 differs only by its measurement, node 1 by an allocation: both are copied.
  EXPECT_EQ(kept.Adopt(fresh), 2);
  EXPECT_EQ(kept.history_id(), id);
  ASSERT_EQ(kept.journal_end(), after_undo + 2);
  EXPECT_EQ(kept.journal_at(after_undo), 0);
  EXPECT_EQ(kept.journal_at(after_undo + 1), 1);
  EXPECT_GT(after_undo, start);
  for (int32_t n = 0; n < 2; ++n) EXPECT_TRUE(kept.node(n) == fresh.node(n)) << n;
  EXPECT_EQ(kept.allocated_gpu_milli(), fresh.allocated_gpu_milli());
  EXPECT_EQ(kept.allocated_cpu_milli(), fresh.allocated_cpu_milli());
  EXPECT_EQ(kept.allocated_memory_mib(), fresh.allocated_memory_mib());
  // Nothing changed since: nothing copied, no journal entry, versions kept.
  const uint64_t v1 = kept.node(1).version;
  EXPECT_EQ(kept.Adopt(fresh), 0);
  EXPECT_EQ(kept.journal_end(), after_undo + 2);
  EXPECT_EQ(kept.node(1).version, v1);
  // Another layout (a node more): a copy of it with a new history.
  ASSERT_TRUE(fresh.AddNode({"c", 1000, 1024, 0, 0, 0, false}).ok());
  EXPECT_EQ(kept.Adopt(fresh), 3);
  EXPECT_EQ(kept.num_nodes(), 3);
  EXPECT_NE(kept.history_id(), id);
  EXPECT_NE(kept.history_id(), fresh.history_id());
  EXPECT_EQ(kept.spec(2).name, "c");
}

TEST(ClusterStateTest, SwapExchangesContentsAndHistories) {
  ClusterState a = TwoNodes();
  ClusterState b;
  ASSERT_TRUE(a.Allocate(Share(1, 1, 500, 1000)).ok());
  const uint64_t ha = a.history_id(), hb = b.history_id();
  const uint64_t ja = a.journal_end();
  a.Swap(b);
  EXPECT_EQ(a.num_nodes(), 0);
  EXPECT_EQ(b.num_nodes(), 2);
  EXPECT_EQ(a.history_id(), hb);
  EXPECT_EQ(b.history_id(), ha);
  EXPECT_EQ(b.journal_end(), ja);
  EXPECT_EQ(b.allocated_gpu_milli(), 500);
  EXPECT_EQ(b.node(1).gpu_free_milli[1], 500);
  EXPECT_EQ(b.total_gpus(), 10);
}

TEST(ClusterStateTest, RefusesOverAllocationAtomically) {
  ClusterState c = TwoNodes();
  ASSERT_TRUE(c.Allocate(Share(1, 0, 800, 1000)).ok());
  Placement two;
  two.node = 1;
  two.num_gpus = 2;
  two.gpus[0] = {1, 1000, 0};
  two.gpus[1] = {0, 1000, 0};  // GPU 0 has only 200 left
  EXPECT_FALSE(c.Allocate(two).ok());
  EXPECT_EQ(c.node(1).gpu_free_milli[1], 1000);            // untouched
  EXPECT_FALSE(c.Allocate(Share(1, 1, 100, 40000)).ok());  // CPU
  EXPECT_FALSE(c.Allocate(Share(7, 0, 100, 0)).ok());      // no such node
}

TEST(ClusterStateTest, FitsHonoursModelsCpuAndGpus) {
  ClusterState c = TwoNodes();
  GpuModelId t4 = *c.models().Intern("T4");
  ASSERT_TRUE(c.AddNode({"t", 16000, 65536, 1, t4, 0, false}).ok());
  Request r = Request::WholeGpus(2, 1000, 100);
  EXPECT_TRUE(c.Fits(0, r));
  EXPECT_TRUE(c.Fits(1, r));
  EXPECT_FALSE(c.Fits(2, r));
  r.allowed_models = GpuModelTable::Bit(t4);
  EXPECT_FALSE(c.Fits(0, r));
  EXPECT_FALSE(c.AnyNodeCouldEverFit(r));  // the only T4 node has one GPU
  r.num_gpu = 1;
  EXPECT_TRUE(c.Fits(2, r));
  EXPECT_TRUE(c.AnyNodeCouldEverFit(r));
  Request big = Request::CpuOnly(65000, 0);
  EXPECT_FALSE(c.AnyNodeCouldEverFit(big));
  Request nine = Request::WholeGpus(9, 0, 0);
  EXPECT_FALSE(c.AnyNodeCouldEverFit(nine));
}

TEST(ClusterStateTest, BestEffortOversubscriptionIsCappedAndOffByDefault) {
  ClusterState c = TwoNodes();
  Request be = Request::CpuOnly(40000, 0);
  be.best_effort = true;
  EXPECT_FALSE(c.Fits(1, be));
  EXPECT_FALSE(c.SetBestEffortOversubscription(1600).ok());
  ASSERT_TRUE(c.SetBestEffortOversubscription(1500).ok());
  EXPECT_TRUE(c.Fits(1, be));
  Request normal = Request::CpuOnly(40000, 0);
  EXPECT_FALSE(c.Fits(1, normal));
  uint8_t none[1] = {};
  ASSERT_TRUE(c.Allocate(MakePlacement(be, 1, none)).ok());
  EXPECT_EQ(c.node(1).free_cpu_milli, -8000);
  // A regular request now sees no CPU at all.
  EXPECT_FALSE(c.Fits(1, Request::CpuOnly(1, 0)));
}

TEST(ClusterStateTest, MigSlicesAreAllocatableUnits) {
  ClusterState c;
  GpuModelId a100 = *c.models().Intern("A100");
  ASSERT_TRUE(c.AddNode({"m", 64000, 262144, 2, a100, 81920, true}).ok());
  Request r3 = Request::Mig(MigProfile::k3g, 1000, 100);
  Request r4 = Request::Mig(MigProfile::k4g, 1000, 100);
  EXPECT_TRUE(c.Fits(0, r3));
  EXPECT_FALSE(c.Fits(0, Request::WholeGpus(1, 0, 0)));  // MIG GPUs serve MIG requests only
  uint8_t g0[1] = {0};
  ASSERT_TRUE(c.Allocate(MakePlacement(r4, 0, g0)).ok());
  ASSERT_TRUE(c.Allocate(MakePlacement(r3, 0, g0)).ok());
  EXPECT_EQ(c.node(0).gpu_free_slices[0], 0);
  EXPECT_FALSE(c.Allocate(MakePlacement(r3, 0, g0)).ok());
  EXPECT_EQ(c.allocated_gpu_milli(), 1000);
  ASSERT_TRUE(c.Release(MakePlacement(r3, 0, g0)).ok());
  ASSERT_TRUE(c.Release(MakePlacement(r4, 0, g0)).ok());
  EXPECT_EQ(c.allocated_gpu_milli(), 0);
  EXPECT_EQ(c.node(0).full_free_gpus, 2);
}

}  // namespace
}  // namespace stoker::scheduler
