// The --simulate path: the embedded fake library, written to a memfd and dlopen()ed.
#include "nvml/simulated.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "fakenvml/fake_control.h"

namespace stoker::nvml {
namespace {

using ::testing::HasSubstr;

TEST(SimulatedTest, BuiltinScenariosAreListedWithDescriptions) {
  const std::vector<BuiltinScenario> builtins = BuiltinScenarios();
  std::vector<std::string> names;
  for (const BuiltinScenario& b : builtins) {
    names.push_back(b.name);
    EXPECT_FALSE(b.description.empty()) << b.name;
    EXPECT_THAT(b.description, ::testing::Not(HasSubstr("invalid"))) << b.name;
  }
  EXPECT_THAT(names, ::testing::IsSupersetOf({"h100-mig-node", "faulty-node"}));
}

TEST(SimulatedTest, EmbeddedLibraryPlaysABuiltinScenario) {
  auto source = OpenSimulatedGpuSource("h100-mig-node");
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  GpuSource& src = **source;
  EXPECT_TRUE(src.simulated());
  EXPECT_THAT(src.Describe(), HasSubstr("simulated"));
  EXPECT_THAT(src.Describe(), HasSubstr("h100-mig-node"));
  ASSERT_EQ(src.DeviceCount(), 8u);
  GpuSample s;
  ASSERT_TRUE(src.Sample(3, &s).ok());
  EXPECT_EQ(s.health, GpuHealth::kOk);
  EXPECT_EQ(s.mig_instances.size(), 3u);
  auto events = src.WaitEvents(std::chrono::milliseconds(1));
  ASSERT_TRUE(events.ok()) << events.status().ToString();
}

TEST(SimulatedTest, TwoSimulatedSourcesAreIndependent) {
  auto a = OpenSimulatedGpuSource("h100-mig-node");
  auto b = OpenSimulatedGpuSource("faulty-node");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ((*a)->DeviceCount(), 8u);
  EXPECT_EQ((*b)->DeviceCount(), 4u);
}

TEST(SimulatedTest, LibraryOverrideFromTheEnvironment) {
  const std::string legacy = fakenvml::FakeLibraryBuildPath(fakenvml::FakeVariant::kLegacy);
  ::setenv(kFakeNvmlLibEnv, legacy.c_str(), 1);
  auto a = OpenSimulatedGpuSource("faulty-node");
  auto b = OpenSimulatedGpuSource("h100-mig-node");
  ::unsetenv(kFakeNvmlLibEnv);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_THAT((*a)->Describe(), HasSubstr(legacy));
  // Each source still gets its own instance of the overriding library.
  EXPECT_EQ((*a)->DeviceCount(), 4u);
  EXPECT_EQ((*b)->DeviceCount(), 8u);
  GpuSample s;
  ASSERT_TRUE((*a)->Sample(0, &s).ok());
  EXPECT_EQ(s.memory_reserved_bytes.state(), FieldState::kUnsupported);  // legacy: v1 memory only

  ::setenv(kFakeNvmlLibEnv, "/nonexistent/fake.so", 1);
  auto missing = OpenSimulatedGpuSource("faulty-node");
  ::unsetenv(kFakeNvmlLibEnv);
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("/nonexistent/fake.so"));
}

TEST(SimulatedTest, ScenarioFileAndErrors) {
  const std::string path = std::string(STOKER_BINARY_DIR) + "/simulated_test_scenario.yaml";
  {
    std::ofstream out(path);
    out << "name: file\ngpus:\n  - {model: X, uuid: GPU-f, pci_bus_id: \"0:1:0.0\", "
           "memory_total_mib: 1024, architecture: 8}\n";
  }
  auto ok = OpenSimulatedGpuSource(path);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ((*ok)->DeviceCount(), 1u);
  auto loaded = LoadSimulatedScenario(path);
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->name, "file");

  {
    std::ofstream out(path);
    out << "name: broken\ngpus:\n  - {model: X, uuid: GPU-f, pci_bus_id: \"0:1:0.0\", "
           "memory_total_mib: 1024, util: 300}\n";
  }
  auto bad = OpenSimulatedGpuSource(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr(path + ":3:"));
  EXPECT_THAT(bad.status().message(), HasSubstr("gpus[0].util"));
  std::remove(path.c_str());

  auto missing = OpenSimulatedGpuSource("no-such-scenario");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("h100-mig-node"));
}

}  // namespace
}  // namespace stoker::nvml
