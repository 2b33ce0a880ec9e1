#include "sim/packing_trace.h"

#include <gtest/gtest.h>

namespace stoker::sim {
namespace {

constexpr char kNodes[] =
    "sn,cpu_milli,memory_mib,gpu,model\n"
    "n0,64000,262144,2,P100\n"
    "n1,96000,786432,8,G2\n"
    "n2,32000,131072,0,\n";

constexpr char kPodHeader[] =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_"
    "time,scheduled_time\n";

scheduler::ClusterState Cluster() {
  auto c = ParseOpenbNodes(kNodes, "nodes.csv", false, nullptr);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return std::move(c).value();
}

TEST(OpenbNodesTest, ParsesNodesAndModels) {
  scheduler::ClusterState c = Cluster();
  ASSERT_EQ(c.num_nodes(), 3);
  EXPECT_EQ(c.total_gpus(), 10);
  EXPECT_EQ(c.models().Name(c.spec(1).gpu_model), "G2");
  EXPECT_EQ(c.spec(2).num_gpus, 0);
}

TEST(OpenbNodesTest, RejectsBadRowsWithFileAndLine) {
  auto bad = ParseOpenbNodes("sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,9,P100\n",
                             "nodes.csv", false, nullptr);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("nodes.csv:2"), std::string::npos)
      << bad.status().message();
  EXPECT_NE(bad.status().message().find("column 4 (gpu): value '9' out of range"),
            std::string::npos)
      << bad.status().message();
  auto no_model = ParseOpenbNodes("sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,\n",
                                  "n.csv", false, nullptr);
  EXPECT_FALSE(no_model.ok());
  auto header = ParseOpenbNodes("a,b\n", "n.csv", false, nullptr);
  EXPECT_FALSE(header.ok());
}

TEST(OpenbPodsTest, ParsesShapes) {
  scheduler::ClusterState c = Cluster();
  std::string text = std::string(kPodHeader) +
                     "p0,12000,16384,1,1000,,LS,Running,0,1,0\n"
                     "p1,6000,12288,1,460,G2|P100,BE,Running,0,1,0\n"
                     "p2,8000,30517,0,0,,BE,Running,0,1,0\n"
                     "p3,64000,1,8,1000,,LS,Running,0,1,0";  // no final newline
  auto pods = ParseOpenbPods(text, "/x/openb_pod_list_gpushare40.csv", c.models(), false);
  ASSERT_TRUE(pods.ok()) << pods.status().ToString();
  EXPECT_EQ(pods->workload, "gpushare40");
  ASSERT_EQ(pods->pods.size(), 4u);
  EXPECT_EQ(pods->pods[0].TotalGpuMilli(), 1000);
  EXPECT_TRUE(pods->pods[1].IsGpuShare());
  EXPECT_NE(pods->pods[1].allowed_models, 0u);
  EXPECT_TRUE(pods->pods[1].best_effort);
  EXPECT_TRUE(pods->pods[2].IsCpuOnly());
  EXPECT_EQ(pods->pods[3].num_gpu, 8);
}

struct BadRow {
  const char* row;
  const char* expect;  // substring of the error
};

TEST(OpenbPodsTest, BadRowsNameFileLineAndField) {
  scheduler::ClusterState c = Cluster();
  const BadRow cases[] = {
      {"p,,16384,1,1000,,LS,Running,0,1,0", "column 2 (cpu_milli): missing"},
      {"p,12000,16384,1", "expected 11 fields as in the header, got 4"},
      {"p,-5,16384,1,1000,,LS,Running,0,1,0", "column 2 (cpu_milli): negative"},
      {"p,12000,99999999999999999999999,1,1000,,LS,Running,0,1,0", "column 3 (memory_mib): value"},
      {"p,12000,16384,1,1000,H100,LS,Running,0,1,0", "column 6 (gpu_spec): "},
      {"p,12000,16384,1,1000,H100,LS,Running,0,1,0", "unknown GPU model 'H100'"},
      {"p,12000,16384,2,500,,LS,Running,0,1,0", "column 5 (gpu_milli): gpu_milli: a fractional"},
      {"p,12x,16384,1,1000,,LS,Running,0,1,0", "column 2 (cpu_milli): not an integer: '12x'"},
      {"p,12000,16384,1,1001,,LS,Running,0,1,0", "column 5 (gpu_milli): value"},
      {"p,12000,16384,1,1000,\"G2\",LS,Running,0,1,0", "column 6: quoted fields"},
  };
  for (const BadRow& b : cases) {
    std::string text = std::string(kPodHeader) + "ok,1000,1,0,0,,LS,Running,0,1,0\n" + b.row + "\n";
    auto pods = ParseOpenbPods(text, "pods.csv", c.models(), false);
    ASSERT_FALSE(pods.ok()) << b.row;
    EXPECT_NE(pods.status().message().find("pods.csv:3"), std::string::npos)
        << pods.status().message();
    EXPECT_NE(pods.status().message().find(b.expect), std::string::npos) << pods.status().message();
    auto skipped = ParseOpenbPods(text, "pods.csv", c.models(), true);
    ASSERT_TRUE(skipped.ok());
    EXPECT_EQ(skipped->skipped_rows, 1);
    EXPECT_EQ(skipped->pods.size(), 1u);
  }
}

// FGD's multi-GPU pod lists have only the first five columns: no GPU model constraint, no QoS.
TEST(OpenbPodsTest, FiveColumnListsMeanNoConstraint) {
  scheduler::ClusterState c = Cluster();
  auto pods = ParseOpenbPods(
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
      "openb-pod-0000,12000,16384,1,1000\n"
      "openb-pod-0001,6000,12288,1,460\n"
      "openb-pod-0002,88000,327680,8,1000\n"
      "openb-pod-0003,4000,8192,0,0\n",
      "x/openb_pod_list_multigpu20.csv", c.models(), false);
  ASSERT_TRUE(pods.ok()) << pods.status().ToString();
  EXPECT_EQ(pods->workload, "multigpu20");
  ASSERT_EQ(pods->pods.size(), 4u);
  for (const scheduler::Request& r : pods->pods) {
    EXPECT_EQ(r.allowed_models, 0u);
    EXPECT_FALSE(r.best_effort);
  }
  EXPECT_TRUE(pods->pods[1].IsGpuShare());
  EXPECT_EQ(pods->pods[2].num_gpu, 8);
  EXPECT_EQ(pods->names[2], "openb-pod-0002");
  // Column order does not matter; columns the simulator does not use are ignored.
  auto reordered = ParseOpenbPods(
      "gpu_milli,extra,num_gpu,name,memory_mib,cpu_milli,gpu_spec\n500,x,1,p,1024,2000,G2\n",
      "r.csv", c.models(), false);
  ASSERT_TRUE(reordered.ok()) << reordered.status().ToString();
  EXPECT_EQ(reordered->pods[0].gpu_milli, 500);
  EXPECT_EQ(reordered->pods[0].cpu_milli, 2000);
  EXPECT_NE(reordered->pods[0].allowed_models, 0u);
  // A missing required column is named, with the header that was found.
  auto missing =
      ParseOpenbPods("name,cpu_milli,memory_mib,num_gpu\np,1,1,0\n", "m.csv", c.models(), false);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("m.csv:1: header: missing column 'gpu_milli'"),
            std::string::npos)
      << missing.status().message();
}

TEST(OpenbPodsTest, MissingFileIsNotFound) {
  scheduler::GpuModelTable models;
  auto pods = LoadOpenbPods("/nonexistent/pods.csv", models);
  ASSERT_FALSE(pods.ok());
  EXPECT_EQ(pods.status().code(), StatusCode::kNotFound);
}

TEST(WorkloadNameTest, StripsPrefixAndExtension) {
  EXPECT_EQ(WorkloadNameFromPath("a/b/openb_pod_list_default.csv"), "default");
  EXPECT_EQ(WorkloadNameFromPath("mypods.csv"), "mypods");
}

}  // namespace
}  // namespace stoker::sim
