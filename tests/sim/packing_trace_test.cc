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
  EXPECT_NE(bad.status().message().find("gpu"), std::string::npos);
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
      {"p,,16384,1,1000,,LS", "cpu_milli: missing"},
      {"p,12000,16384,1", "expected at least 6 fields"},
      {"p,-5,16384,1,1000,,LS", "cpu_milli: negative"},
      {"p,12000,99999999999999999999999,1,1000,,LS", "memory_mib: value"},
      {"p,12000,16384,1,1000,H100,LS", "unknown GPU model 'H100'"},
      {"p,12000,16384,2,500,,LS", "gpu_milli"},
      {"p,12x,16384,1,1000,,LS", "not an integer"},
      {"p,12000,16384,1,1001,,LS", "gpu_milli: value"},
  };
  for (const BadRow& b : cases) {
    std::string text = std::string(kPodHeader) + "ok,1000,1,0,0,,LS\n" + b.row + "\n";
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
