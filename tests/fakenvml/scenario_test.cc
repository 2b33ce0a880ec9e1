#include "fakenvml/scenario.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace stoker::fakenvml {
namespace {

using ::testing::HasSubstr;

constexpr const char* kMinimal = R"(name: t
gpus:
  - model: NVIDIA H100 80GB HBM3
    uuid: GPU-0
    pci_bus_id: "00000000:18:00.0"
    memory_total_mib: 81559
)";

std::string ErrorOf(const std::string& yaml) {
  Result<Scenario> sc = ParseScenario(yaml, "bad.yaml");
  EXPECT_FALSE(sc.ok()) << "parsed unexpectedly:\n" << yaml;
  return sc.ok() ? std::string() : sc.status().message();
}

TEST(TimelineTest, LinearStepAndIntegral) {
  Timeline lin{Timeline::Interp::kLinear, {{0, 0}, {10, 100}}};
  EXPECT_DOUBLE_EQ(lin.At(-1), 0);
  EXPECT_DOUBLE_EQ(lin.At(5), 50);
  EXPECT_DOUBLE_EQ(lin.At(20), 100);
  EXPECT_DOUBLE_EQ(lin.Integral(0, 10), 500);
  EXPECT_DOUBLE_EQ(lin.Integral(0, 20), 500 + 1000);
  Timeline step{Timeline::Interp::kStep, {{0, 10}, {5, 20}}};
  EXPECT_DOUBLE_EQ(step.At(4.99), 10);
  EXPECT_DOUBLE_EQ(step.At(5), 20);
  EXPECT_DOUBLE_EQ(step.Integral(0, 10), 50 + 100);
  EXPECT_DOUBLE_EQ(step.Max(), 20);
}

TEST(ScenarioTest, MinimalScenarioGetsDefaults) {
  Result<Scenario> sc = ParseScenario(kMinimal, "min.yaml");
  ASSERT_TRUE(sc.ok()) << sc.status().ToString();
  ASSERT_EQ(sc->gpus.size(), 1u);
  EXPECT_EQ(sc->gpus[0].uuid, "GPU-0");
  EXPECT_EQ(sc->gpus[0].architecture, 9u);
  EXPECT_EQ(sc->source, "min.yaml");
}

TEST(ScenarioTest, JsonIsAccepted) {
  Result<Scenario> sc = ParseScenario(
      R"({"name": "j", "gpus": [{"model": "A100", "uuid": "GPU-1", "pci_bus_id": "0:1:0.0",
          "memory_total_mib": 40960, "architecture": 7, "util": [[0, 5], [10, 50]]}]})",
      "j.json");
  ASSERT_TRUE(sc.ok()) << sc.status().ToString();
  EXPECT_DOUBLE_EQ(sc->gpus[0].util.At(5), 27.5);
}

TEST(ScenarioTest, BuiltinScenariosParse) {
  for (const char* name : {"h100-mig-node", "faulty-node"}) {
    const std::string path = std::string(STOKER_SOURCE_DIR) + "/scenarios/" + name + ".yaml";
    Result<Scenario> sc = LoadScenarioFile(path);
    ASSERT_TRUE(sc.ok()) << sc.status().ToString();
    EXPECT_EQ(sc->name, name);
    EXPECT_FALSE(sc->description.empty());
  }
  Result<Scenario> h100 =
      LoadScenarioFile(std::string(STOKER_SOURCE_DIR) + "/scenarios/h100-mig-node.yaml");
  ASSERT_TRUE(h100.ok());
  ASSERT_EQ(h100->gpus.size(), 8u);
  // Merge keys (<<: *h100) carry the shared fields; overrides win.
  EXPECT_EQ(h100->gpus[7].model, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(h100->gpus[7].minor, 7u);
  EXPECT_EQ(h100->gpus[3].mig_instances.size(), 3u);
  EXPECT_EQ(h100->gpus[3].mig_instances[0].profile, "3g.40gb");
  EXPECT_EQ(h100->gpus[3].mig_instances[0].slices, 3u);
}

TEST(ScenarioTest, MissingFileIsNotFound) {
  Result<Scenario> sc = LoadScenarioFile("/nonexistent/scenario.yaml");
  ASSERT_FALSE(sc.ok());
  EXPECT_EQ(sc.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(sc.status().message(), HasSubstr("/nonexistent/scenario.yaml"));
}

TEST(ScenarioErrorTest, DuplicateUuid) {
  const std::string msg = ErrorOf(std::string(kMinimal) + R"(  - model: X
    uuid: GPU-0
    pci_bus_id: "00000000:19:00.0"
    memory_total_mib: 1000
)");
  EXPECT_THAT(msg, HasSubstr("bad.yaml:8:"));
  EXPECT_THAT(msg, HasSubstr("gpus[1].uuid"));
  EXPECT_THAT(msg, HasSubstr("duplicate UUID"));
}

TEST(ScenarioErrorTest, MigInstancesWithoutMig) {
  const std::string msg = ErrorOf(std::string(kMinimal) + R"(    mig:
      instances:
        - {profile: 1g.10gb, gi: 1, uuid: MIG-1}
)");
  EXPECT_THAT(msg, HasSubstr("bad.yaml:9:"));
  EXPECT_THAT(msg, HasSubstr("gpus[0].mig.instances"));
  EXPECT_THAT(msg, HasSubstr("mig.enabled is not true"));
}

TEST(ScenarioErrorTest, MemoryUsedAboveTotal) {
  const std::string msg =
      ErrorOf(std::string(kMinimal) + "    mem_used_mib: [[0, 10], [5, 90000]]\n");
  EXPECT_THAT(msg, HasSubstr("bad.yaml:7:"));
  EXPECT_THAT(msg, HasSubstr("gpus[0].mem_used_mib"));
  EXPECT_THAT(msg, HasSubstr("exceeds memory_total_mib"));
}

TEST(ScenarioErrorTest, ProcessesAboveTotal) {
  const std::string msg = ErrorOf(std::string(kMinimal) + R"(processes:
  - {pid: 1, gpu: 0, used_memory_mib: 50000}
  - {pid: 2, gpu: 0, used_memory_mib: 50000}
)");
  EXPECT_THAT(msg, HasSubstr("bad.yaml:9:"));
  EXPECT_THAT(msg, HasSubstr("processes[1].used_memory_mib"));
}

TEST(ScenarioErrorTest, ProcessOnMissingGpu) {
  const std::string msg = ErrorOf(std::string(kMinimal) + R"(processes:
  - pid: 7
    gpu: 3
)");
  EXPECT_THAT(msg, HasSubstr("bad.yaml:9:10"));
  EXPECT_THAT(msg, HasSubstr("processes[0].gpu"));
  EXPECT_THAT(msg, HasSubstr("no GPU with index 3"));
}

TEST(ScenarioErrorTest, LostWindowBackwards) {
  const std::string msg = ErrorOf(std::string(kMinimal) + "    lost: [{from: 50, to: 20}]\n");
  EXPECT_THAT(msg, HasSubstr("bad.yaml:7:"));
  EXPECT_THAT(msg, HasSubstr("gpus[0].lost[0].to"));
}

TEST(ScenarioErrorTest, UnknownMigProfile) {
  const std::string msg = ErrorOf(std::string(kMinimal) + R"(    mig:
      enabled: true
      instances:
        - profile: 5g.33gb
          gi: 1
          uuid: MIG-1
)");
  EXPECT_THAT(msg, HasSubstr("bad.yaml:10:"));
  EXPECT_THAT(msg, HasSubstr("gpus[0].mig.instances[0].profile"));
  EXPECT_THAT(msg, HasSubstr("unknown MIG profile '5g.33gb'"));
}

TEST(ScenarioErrorTest, TooManySlices) {
  const std::string msg = ErrorOf(std::string(kMinimal) + R"(    mig:
      enabled: true
      instances:
        - {profile: 4g.40gb, gi: 1, uuid: MIG-1}
        - {profile: 4g.40gb, gi: 2, uuid: MIG-2}
)");
  EXPECT_THAT(msg, HasSubstr("gpus[0].mig.instances[1]"));
  EXPECT_THAT(msg, HasSubstr("more than 7 slices"));
}

TEST(ScenarioErrorTest, MigProcessNeedsInstance) {
  const std::string msg = ErrorOf(std::string(kMinimal) + R"(    mig:
      enabled: true
      instances:
        - {profile: 1g.10gb, gi: 1, uuid: MIG-1}
processes:
  - {pid: 1, gpu: 0, gi: 2}
)");
  EXPECT_THAT(msg, HasSubstr("bad.yaml:12:"));
  EXPECT_THAT(msg, HasSubstr("processes[0].gi"));
}

TEST(ScenarioErrorTest, UnknownFieldIsATypo) {
  const std::string msg = ErrorOf(std::string(kMinimal) + "    utl: 50\n");
  EXPECT_THAT(msg, HasSubstr("bad.yaml:7:5"));
  EXPECT_THAT(msg, HasSubstr("gpus[0].utl: unknown field"));
}

TEST(ScenarioErrorTest, BadNumberAndRange) {
  EXPECT_THAT(ErrorOf(std::string(kMinimal) + "    util: lots\n"),
              HasSubstr("gpus[0].util: expected a number, got 'lots'"));
  EXPECT_THAT(ErrorOf(std::string(kMinimal) + "    util: 130\n"),
              HasSubstr("gpus[0].util: value 130 out of range"));
  EXPECT_THAT(ErrorOf(std::string(kMinimal) + "    util: [[10, 5], [2, 6]]\n"),
              HasSubstr("goes backwards"));
  EXPECT_THAT(ErrorOf(std::string(kMinimal) + "    minor: -1\n"),
              HasSubstr("gpus[0].minor: expected a non-negative integer"));
}

TEST(ScenarioErrorTest, MissingRequiredField) {
  const std::string msg = ErrorOf("name: t\ngpus:\n  - model: X\n    uuid: GPU-1\n");
  EXPECT_THAT(msg, HasSubstr("bad.yaml:3:"));
  EXPECT_THAT(msg, HasSubstr("gpus[0].pci_bus_id: required field is missing"));
}

TEST(ScenarioErrorTest, JsonScenarioErrorsNameLineColumnAndPath) {
  const std::string json = R"({"name": "t", "gpus": [
  {"model": "X", "uuid": "GPU-1", "pci_bus_id": "0", "memory_total_mib": "lots"}]})";
  const size_t col = json.find("\"lots\"") - json.rfind('\n', json.find("\"lots\""));
  Result<Scenario> sc = ParseScenario(json, "s.json");
  ASSERT_FALSE(sc.ok());
  EXPECT_EQ(sc.status().message(),
            "s.json:2:" + std::to_string(col) +
                ": gpus[0].memory_total_mib: expected a non-negative integer in range, got "
                "'lots'");
  sc = ParseScenario(R"({"name": "t", "gpus": [{"model": "X", "uuid": "GPU-1", "pci": 0}]})",
                     "s.json");
  ASSERT_FALSE(sc.ok());
  EXPECT_THAT(sc.status().message(), HasSubstr("s.json:1:56: gpus[0].pci: unknown field"));
}

TEST(ScenarioErrorTest, SyntaxErrorHasLine) {
  const std::string msg = ErrorOf("name: t\ngpus: [\n  {model: X,\n");
  EXPECT_THAT(msg, HasSubstr("bad.yaml:"));
  EXPECT_THAT(msg, HasSubstr("not valid YAML"));
}

TEST(ScenarioErrorTest, EventOnMissingGpuAndBadXid) {
  EXPECT_THAT(ErrorOf(std::string(kMinimal) + "events:\n  - {t: 1, gpu: 2, xid: 79}\n"),
              HasSubstr("events[0].gpu"));
  EXPECT_THAT(ErrorOf(std::string(kMinimal) + "events:\n  - {t: 1, gpu: 0}\n"),
              HasSubstr("events[0].xid: required field is missing"));
}

TEST(ScenarioErrorTest, NotAMapping) {
  EXPECT_THAT(ErrorOf("- 1\n- 2\n"), HasSubstr("bad.yaml:1:1: (top level)"));
  EXPECT_THAT(ErrorOf(""), HasSubstr("bad.yaml"));
}

}  // namespace
}  // namespace stoker::fakenvml
