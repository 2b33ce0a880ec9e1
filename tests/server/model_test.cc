#include "server/model.h"

#include <gtest/gtest.h>

namespace stoker::server {
namespace {

std::string ErrorOf(const std::string& body) {
  auto r = ParseJobSpec(json::parse(body));
  EXPECT_FALSE(r.ok()) << body;
  return r.ok() ? "" : r.status().message();
}

TEST(JobSpec, ValidSpecRoundTrips) {
  auto r = ParseJobSpec(json::parse(R"({"command":["python","train.py"],"gpus":2,"min_gpus":1,
      "cpu_milli":4000,"memory_mib":8192,"env":{"A":"b"},"workdir":"/tmp","class":"cv",
      "priority":5,"preemptible":true,"on_node_loss":"fail","gpu_models":["H100"]})"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->gpus, 2);
  EXPECT_EQ(r->min_gpus, 1);
  EXPECT_EQ(r->env.at("A"), "b");
  auto again = ParseJobSpec(JobSpecToJson(*r));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(JobSpecToJson(*again), JobSpecToJson(*r));
}

TEST(JobSpec, ErrorsNameTheField) {
  EXPECT_EQ(ErrorOf(R"({})"), "command: required (argv array)");
  EXPECT_EQ(ErrorOf(R"({"command":[]})").rfind("command:", 0), 0u);
  EXPECT_EQ(ErrorOf(R"({"command":["x"],"gpus":9})"), "gpus: must be in 0..8");
  EXPECT_EQ(ErrorOf(R"({"command":["x"],"gpus":"2"})"), "gpus: must be an integer");
  EXPECT_EQ(ErrorOf(R"({"command":["x"],"gpu_milli":1000})"), "gpu_milli: must be in 0..999");
  EXPECT_EQ(ErrorOf(R"({"command":["x"],"gpus":1,"gpu_milli":300})").rfind("gpu_milli:", 0), 0u);
  EXPECT_EQ(ErrorOf(R"({"command":["x"],"mig":"9g.1gb"})").rfind("mig:", 0), 0u);
  EXPECT_EQ(ErrorOf(R"({"command":["x"],"cpu_milli":0})"), "cpu_milli: must be in 1..1000000");
  EXPECT_EQ(ErrorOf(R"({"command":["x"],"on_node_loss":"explode"})").rfind("on_node_loss:", 0), 0u);
  EXPECT_EQ(ErrorOf(R"({"command":["x"],"workdir":"rel"})"), "workdir: must be an absolute path");
  EXPECT_EQ(ErrorOf(R"({"command":["x"],"env":{"1BAD":"v"}})"), "env.1BAD: invalid variable name");
  EXPECT_EQ(ErrorOf(R"({"command":["x"],"gpus":1,"min_gpus":2})"), "min_gpus: must not exceed gpus");
  EXPECT_EQ(ErrorOf(R"({"command":["x"],"colour":"red"})"), "colour: unknown field");
  EXPECT_EQ(ErrorOf(R"({"command":["x"],"priority":18446744073709551615})"),
            "priority: must be in -1000..1000");
  EXPECT_EQ(ErrorOf(R"([1,2])"), "job: body must be a JSON object");
}

TEST(JobJson, FullJobRoundTrips) {
  Job j;
  j.id = 9;
  j.user = "alice";
  j.spec.command = {"sleep", "1"};
  j.state = JobState::kRunning;
  Assignment a;
  a.node = "n1";
  a.gpu_indices = {0, 3};
  a.gpu_milli = 1000;
  a.cuda_visible_devices = "0,3";
  a.shares = {{0, 1000}, {3, 1000}};
  j.assignment = a;
  j.exit_code = 4;
  auto back = JobFromJson(JobToJson(j));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(JobToJson(*back), JobToJson(j));
}

TEST(Heartbeat, RoundTripAndValidation) {
  Heartbeat h;
  JobReport r;
  r.id = 3;
  r.phase = "exited";
  r.exit_code = 1;
  r.stdout_data = "hi";
  h.jobs.push_back(r);
  auto back = ParseHeartbeat(HeartbeatToJson(h));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->jobs[0].exit_code, 1);
  EXPECT_EQ(back->jobs[0].stdout_data, "hi");
  auto bad = ParseHeartbeat(json::parse(R"({"jobs":[{"id":1,"phase":"dancing"}]})"));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().rfind("jobs[0].phase", 0), 0u);
}

}  // namespace
}  // namespace stoker::server
