// `stoker submit`: what a command line sends. The body is the protocol's codec of the job spec
// the flags make (protocol::JobSpecToJson); each row also holds the body the CLI sent before it
// used that codec (fields set by hand, the defaults left out), and the server must read the two
// as the same job spec.
#include "cli/submit.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "protocol/job.h"

namespace stoker::cli {
namespace {

using json = nlohmann::json;

// Reads `args` (after `stoker submit`) with the command's own flags.
SubmitFlags Parse(const std::vector<std::string>& args) {
  CLI::App app;
  SubmitFlags f;
  AddSubmitFlags(&app, &f);
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  app.parse(reversed);
  return f;
}

Result<protocol::JobSpec> SpecOf(const std::vector<std::string>& args) {
  return SubmitSpec(Parse(args), "/home/u");
}

struct Row {
  std::vector<std::string> args;
  const char* before;  // the body the CLI sent for these flags before the codec
};

const Row kRows[] = {
    {{"--", "true"}, R"({"command":["true"],"workdir":"/home/u"})"},
    {{"--gpus", "2", "--", "python", "train.py"},
     R"({"command":["python","train.py"],"gpus":2,"workdir":"/home/u"})"},
    {{"--gpus", "4", "--min-gpus", "2", "--", "x"},
     R"({"command":["x"],"gpus":4,"min_gpus":2,"workdir":"/home/u"})"},
    {{"--nodes", "2", "--gpus", "4", "--", "x"},
     R"({"command":["x"],"gpus":4,"nodes":2,"workdir":"/home/u"})"},
    {{"--nodes", "3", "--", "x"}, R"({"command":["x"],"nodes":3,"workdir":"/home/u"})"},
    {{"--total-gpus", "20", "--", "x"}, R"({"command":["x"],"total_gpus":20,"workdir":"/home/u"})"},
    {{"--gpu-milli", "250", "--gpu-mem", "16G", "--", "x"},
     R"({"command":["x"],"gpu_milli":250,"gpu_memory_mib":16384,"workdir":"/home/u"})"},
    {{"--mig", "1g.10gb", "--", "x"}, R"({"command":["x"],"mig":"1g.10gb","workdir":"/home/u"})"},
    {{"--gpus", "1", "--gpu-model", "A100", "--gpu-model", "H100", "--gpu-mem", "40960", "--", "x"},
     R"({"command":["x"],"gpu_memory_mib":40960,"gpu_models":["A100","H100"],"gpus":1,
        "workdir":"/home/u"})"},
    {{"--cpu", "0.5", "--mem", "4G", "--", "x"},
     R"({"command":["x"],"cpu_milli":500,"memory_mib":4096,"workdir":"/home/u"})"},
    {{"--cpu", "1", "--mem", "512", "--", "x"},
     R"({"command":["x"],"cpu_milli":1000,"memory_mib":512,"workdir":"/home/u"})"},
    {{"--cpu", "2.0004", "--mem", "0", "--", "x"},
     R"({"command":["x"],"cpu_milli":2000,"memory_mib":0,"workdir":"/home/u"})"},
    {{"--class", "cv", "--priority", "-5", "--preemptible", "--movable", "--name", "train", "--",
      "x"},
     R"({"class":"cv","command":["x"],"movable":true,"name":"train","preemptible":true,
        "priority":-5,"workdir":"/home/u"})"},
    {{"--workdir", "/data", "--env", "A=1", "--env", "B=x=y", "--env", "C=", "--on-node-loss",
      "fail", "--user", "alice", "--", "x", "--flag"},
     R"({"command":["x","--flag"],"env":{"A":"1","B":"x=y","C":""},"on_node_loss":"fail",
        "user":"alice","workdir":"/data"})"},
    {{"--env", "A=1", "--env", "A=2", "--on-node-loss", "requeue", "--", "x"},
     R"({"command":["x"],"env":{"A":"2"},"on_node_loss":"requeue","workdir":"/home/u"})"},
    // Zero counts are the defaults: the CLI left them out before.
    {{"--gpus", "0", "--min-gpus", "0", "--nodes", "0", "--total-gpus", "0", "--gpu-milli", "0",
      "--priority", "0", "--cpu", "0", "--", "x"},
     R"({"command":["x"],"workdir":"/home/u"})"},
};

TEST(Submit, EveryFlagSetSendsTheSpecTheServerReadFromTheOldBody) {
  for (const Row& row : kRows) {
    const std::string where = ::testing::PrintToString(row.args);
    auto spec = SpecOf(row.args);
    ASSERT_TRUE(spec.ok()) << where << ": " << spec.status().message();
    const json body = protocol::JobSpecToJson(*spec);
    // The server reads the body it is sent ...
    auto read = protocol::ParseJobSpec(body);
    ASSERT_TRUE(read.ok()) << where << ": " << read.status().message();
    EXPECT_EQ(protocol::JobSpecToJson(*read), body) << where;
    // ... as the job spec it read from the body the CLI sent before.
    auto before = protocol::ParseJobSpec(json::parse(row.before));
    ASSERT_TRUE(before.ok()) << where << ": " << before.status().message();
    EXPECT_EQ(protocol::JobSpecToJson(*before), body) << where;
  }
}

// What goes on the wire for the plainest submission, written out: the defaults the CLI left out
// before are now written, each the value the server takes when it is absent.
TEST(Submit, ThePlainestBodyWrittenOut) {
  auto spec = SpecOf({"--", "true"});
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(protocol::JobSpecToJson(*spec), json::parse(R"({
    "name": "", "command": ["true"], "env": {}, "workdir": "/home/u", "gpus": 0, "min_gpus": 0,
    "gpu_milli": 0, "gpu_memory_mib": 0, "gpu_models": [], "mig": "", "cpu_milli": 1000,
    "memory_mib": 512, "class": "", "priority": 0, "preemptible": false,
    "on_node_loss": "requeue"})"));
  auto gang = SpecOf({"--nodes", "2", "--gpus", "8", "--movable", "--user", "bob", "--", "x"});
  ASSERT_TRUE(gang.ok());
  const json body = protocol::JobSpecToJson(*gang);
  EXPECT_EQ(body["nodes"], 2);
  EXPECT_EQ(body["gpus"], 8);
  EXPECT_EQ(body["movable"], true);
  EXPECT_EQ(body["user"], "bob");
  EXPECT_FALSE(body.contains("total_gpus"));
}

std::string ErrorOf(const std::vector<std::string>& args) {
  auto spec = SpecOf(args);
  if (spec.ok()) return "ok";
  EXPECT_EQ(spec.status().code(), StatusCode::kInvalidArgument);
  return spec.status().message();
}

// The codec leaves out nodes and total_gpus below 1, so a negative --nodes would go out as an
// ordinary job (before the codec, -1 was sent and refused by the server by its field name; a
// negative --cpu was left out, the default). Every negative count is refused by the flag's name.
TEST(Submit, NegativeCountsAreRefusedByTheFlagsName) {
  EXPECT_EQ(ErrorOf({"--nodes", "-1", "--", "x"}), "--nodes: must not be negative, got -1");
  EXPECT_EQ(ErrorOf({"--nodes=-2", "--gpus", "4", "--", "x"}),
            "--nodes: must not be negative, got -2");
  EXPECT_EQ(ErrorOf({"--total-gpus", "-8", "--", "x"}),
            "--total-gpus: must not be negative, got -8");
  EXPECT_EQ(ErrorOf({"--gpus", "-1", "--", "x"}), "--gpus: must not be negative, got -1");
  EXPECT_EQ(ErrorOf({"--gpus", "2", "--min-gpus", "-1", "--", "x"}),
            "--min-gpus: must not be negative, got -1");
  EXPECT_EQ(ErrorOf({"--gpu-milli", "-500", "--", "x"}),
            "--gpu-milli: must not be negative, got -500");
  EXPECT_EQ(ErrorOf({"--cpu", "-0.5", "--", "x"}), "--cpu: must not be negative, got -0.5");
  // Negative priorities are priorities.
  EXPECT_EQ(ErrorOf({"--priority", "-1000", "--", "x"}), "ok");
}

TEST(Submit, CpuSizesAndEnvironmentErrorsNameTheFlag) {
  EXPECT_EQ(ErrorOf({"--cpu", "0.0004", "--", "x"}), "--cpu: at least 0.001 cores, got 0.0004");
  EXPECT_EQ(ErrorOf({"--cpu", "0.0005", "--", "x"}), "ok");  // rounds to 1 milli-CPU
  EXPECT_EQ(ErrorOf({"--cpu", "1000", "--", "x"}), "ok");
  EXPECT_EQ(ErrorOf({"--cpu", "1000.5", "--", "x"}), "--cpu: at most 1000 cores, got 1000.5");
  EXPECT_EQ(ErrorOf({"--cpu", "1e300", "--", "x"}), "--cpu: at most 1000 cores, got 1e+300");
  SubmitFlags nan;
  nan.command = {"x"};
  nan.cpu = std::numeric_limits<double>::quiet_NaN();
  auto r = SubmitSpec(nan, "/");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message().rfind("--cpu: must not be negative", 0), 0u);
  EXPECT_EQ(ErrorOf({"--mem", "4X", "--", "x"}).rfind("--mem: ", 0), 0u);
  EXPECT_EQ(ErrorOf({"--gpus", "1", "--gpu-mem", "-1G", "--", "x"}).rfind("--gpu-mem: ", 0), 0u);
  EXPECT_EQ(ErrorOf({"--env", "NOEQUALS", "--", "x"}), "--env: expected K=V, got 'NOEQUALS'");
  EXPECT_EQ(ErrorOf({"--env", "=v", "--", "x"}), "--env: expected K=V, got '=v'");
  // Refused by the flag's name before anything is sent (the server refused it before).
  EXPECT_EQ(ErrorOf({"--on-node-loss", "explode", "--", "x"}),
            "--on-node-loss: must be 'requeue' or 'fail', got 'explode'");
  EXPECT_EQ(ErrorOf({"--on-node-loss", "fail", "--", "x"}), "ok");
}

}  // namespace
}  // namespace stoker::cli
