// Stoker's default placement policy: its principles on small clusters, and the issue-3 target
// that it allocates more GPUs than the published FGD on real traces.
#include <gtest/gtest.h>

#include <array>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "scheduler/registry.h"
#include "sim/packing.h"
#include "sim/packing_trace.h"

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

// The issue-3 target on real traces (the full 10-seed table is in docs/scheduling.md): more GPU
// allocation than the published FGD mean at 100 % and 130 % arrived, on the default workload and
// a GPU-sharing one. Two seeds keep it to a few seconds; the margin (0.4-0.6 points) is far
// larger than the spread between seeds (about 0.05).
TEST(StokerPolicyTest, BeatsPublishedFgdOnOpenbTraces) {
  const std::string openb = std::string(STOKER_SHARED_DIR) + "/traces/openb/";
  std::map<std::string, std::vector<double>> published;  // workload -> gpu_alloc_pct by step/10
  {
    std::ifstream in(openb + "reference_results.csv");
    ASSERT_TRUE(in.good()) << "missing " << openb << "reference_results.csv";
    std::string line;
    while (std::getline(in, line)) {
      std::stringstream ss(line);
      std::string workload, policy, metric, n, v;
      std::getline(ss, workload, ',');
      std::getline(ss, policy, ',');
      std::getline(ss, metric, ',');
      std::getline(ss, n, ',');
      if (policy != "06-FGD" || metric != "gpu_alloc_pct") continue;
      std::vector<double>& values = published[workload];
      while (std::getline(ss, v, ',')) values.push_back(std::stod(v));
    }
  }
  auto cluster = sim::LoadOpenbNodes(openb + "openb_node_list_gpu_node.csv");
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  for (const std::string workload : {"default", "gpushare40"}) {
    const std::vector<double>& fgd = published["openb_pod_list_" + workload];
    ASSERT_EQ(fgd.size(), 14u) << workload;
    auto pods =
        sim::LoadOpenbPods(openb + "openb_pod_list_" + workload + ".csv", cluster->models());
    ASSERT_TRUE(pods.ok()) << pods.status().ToString();
    const TypicalShapes typical = ComputeTypicalShapes(pods->pods, 95);
    std::vector<sim::PackingCurve> runs;
    for (uint64_t seed : {42, 43}) {
      auto run = sim::RunPacking(*cluster, pods->pods, typical, {"stoker", seed, 1300});
      ASSERT_TRUE(run.ok()) << run.status().ToString();
      runs.push_back(*run);
    }
    const sim::PackingCurve mean = sim::MeanCurve(runs);
    for (int step : {100, 130}) {
      EXPECT_GT(mean.alloc_pct[step], fgd[step / 10]) << workload << " at " << step << " % arrived";
    }
  }
}

}  // namespace
}  // namespace stoker::scheduler
