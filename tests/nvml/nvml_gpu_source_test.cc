// NvmlGpuSource against the fake NVML libraries, loaded through the real dlopen path.
#include "nvml/nvml_gpu_source.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "fakenvml/fake_control.h"
#include "nvml/nvml_abi.h"

namespace stoker::nvml {
namespace {

using fakenvml::FakeLibraryBuildPath;
using fakenvml::FakeNvmlControl;
using fakenvml::FakeVariant;
using ::testing::HasSubstr;

constexpr uint64_t kMiB = 1024ULL * 1024ULL;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

std::string BuiltinText(const std::string& name) {
  return ReadFile(std::string(STOKER_SOURCE_DIR) + "/scenarios/" + name + ".yaml");
}

// A fake library instance with a scenario, and the adapter opened on the same library path.
struct Node {
  std::unique_ptr<FakeNvmlControl> control;
  std::unique_ptr<GpuSource> source;
};

Node OpenNode(const std::string& yaml, FakeVariant variant = FakeVariant::kFull) {
  Node node;
  const std::string path = FakeLibraryBuildPath(variant);
  auto control = FakeNvmlControl::Open(path);
  EXPECT_TRUE(control.ok()) << control.status().ToString();
  if (!control.ok()) return node;
  node.control = std::move(control).value();
  const Status set = node.control->SetScenario(yaml, "test.yaml");
  EXPECT_TRUE(set.ok()) << set.ToString();
  auto source = OpenNvmlGpuSource(NvmlOptions{path});
  EXPECT_TRUE(source.ok()) << source.status().ToString();
  if (!source.ok()) return node;
  node.source = std::move(source).value();
  node.control->SetTime(1.0);
  return node;
}

GpuSample MustSample(GpuSource& source, uint32_t index) {
  GpuSample s;
  const Status st = source.Sample(index, &s);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return s;
}

TEST(NvmlGpuSourceTest, H100NodeIdentitiesAndReadings) {
  Node node = OpenNode(BuiltinText("h100-mig-node"));
  ASSERT_TRUE(node.source);
  GpuSource& src = *node.source;
  EXPECT_FALSE(src.simulated());
  EXPECT_THAT(src.Describe(), HasSubstr("12.550.54.15"));
  EXPECT_THAT(src.Describe(), HasSubstr("550.54.15"));
  ASSERT_EQ(src.DeviceCount(), 8u);

  const GpuSample g0 = MustSample(src, 0);
  EXPECT_EQ(g0.health, GpuHealth::kOk);
  EXPECT_EQ(g0.id.index, 0u);
  EXPECT_EQ(g0.id.name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(g0.id.uuid, "GPU-5e3f1c2a-0000-4c1e-9a6e-8d1f00000000");
  EXPECT_EQ(g0.id.pci_bus_id, "00000000:18:00.0");
  EXPECT_EQ(g0.id.minor, Field<uint32_t>::Of(0));
  EXPECT_EQ(g0.id.architecture, Field<uint32_t>::Of(NVML_DEVICE_ARCH_HOPPER));
  EXPECT_EQ(g0.memory_total_bytes, Field<uint64_t>::Of(81559 * kMiB));
  EXPECT_EQ(g0.memory_reserved_bytes, Field<uint64_t>::Of(530 * kMiB));
  EXPECT_EQ(g0.memory_used_bytes, Field<uint64_t>::Of(71230 * kMiB));
  EXPECT_EQ(g0.memory_free_bytes, Field<uint64_t>::Of((81559 - 530 - 71230) * kMiB));
  ASSERT_TRUE(g0.util_gpu_pct.has_value());
  EXPECT_NEAR(g0.util_gpu_pct.value(), 96, 1);
  EXPECT_TRUE(g0.util_mem_pct.has_value());
  ASSERT_TRUE(g0.power_mw.has_value());
  EXPECT_NEAR(g0.power_mw.value(), 655000, 1000);
  EXPECT_EQ(g0.power_limit_mw, Field<uint32_t>::Of(700000));
  ASSERT_TRUE(g0.energy_mj.has_value());
  EXPECT_GE(g0.energy_mj.value(), 912345678u);
  EXPECT_EQ(g0.sm_clock_mhz, Field<uint32_t>::Of(1980));
  EXPECT_EQ(g0.sm_clock_max_mhz, Field<uint32_t>::Of(1980));
  EXPECT_EQ(g0.mem_clock_max_mhz, Field<uint32_t>::Of(2619));
  EXPECT_EQ(g0.clock_event_reasons, Field<uint64_t>::Of(0));
  EXPECT_EQ(g0.ecc_corrected_total, Field<uint64_t>::Of(0));
  EXPECT_EQ(g0.remapped_rows_correctable, Field<uint32_t>::Of(0));
  EXPECT_EQ(g0.remapping_pending, Field<bool>::Of(false));
  // Hopper: PCIe rates come from GPM (no 20 ms throughput windows), so they need an interval.
  EXPECT_EQ(g0.pcie_tx_kbps.state(), FieldState::kUnset);
  ASSERT_TRUE(g0.nvlink_tx_bytes_total.has_value());
  // 21000 MiB/s for 1 s over 18 links, summed back: ~21000 MiB (integer KiB per link).
  EXPECT_NEAR(static_cast<double>(g0.nvlink_tx_bytes_total.value()) / kMiB, 21000, 1);
  EXPECT_EQ(g0.mig_enabled, Field<bool>::Of(false));
  EXPECT_TRUE(g0.mig_instances.empty());

  ASSERT_EQ(g0.processes.size(), 1u);
  EXPECT_EQ(g0.processes[0].pid, 41201u);
  EXPECT_EQ(g0.processes[0].name, "python3");
  EXPECT_EQ(g0.processes[0].used_memory_bytes, Field<uint64_t>::Of(71230 * kMiB));
  EXPECT_EQ(g0.processes[0].gpu_instance_id, UINT32_MAX);
  ASSERT_TRUE(g0.processes[0].sm_util_pct.has_value());
  EXPECT_NEAR(g0.processes[0].sm_util_pct.value(), 95, 1);

  // The first sample has no GPM interval yet: unset, not 0.
  EXPECT_EQ(g0.gpm.sm_active.state(), FieldState::kUnset);
  EXPECT_EQ(g0.gpm.tensor_active.state(), FieldState::kUnset);

  // Every GPU has a distinct identity.
  std::set<std::string> uuids;
  for (uint32_t i = 0; i < 8; ++i) uuids.insert(MustSample(src, i).id.uuid);
  EXPECT_EQ(uuids.size(), 8u);
}

TEST(NvmlGpuSourceTest, GpmNeedsTwoSamplesThenReportsRatios) {
  Node node = OpenNode(BuiltinText("h100-mig-node"));
  ASSERT_TRUE(node.source);
  node.control->SetTime(0);
  GpuSample s = MustSample(*node.source, 0);
  EXPECT_EQ(s.gpm.sm_active.state(), FieldState::kUnset);
  node.control->SetTime(2);
  ASSERT_TRUE(node.source->Sample(0, &s).ok());
  ASSERT_TRUE(s.gpm.sm_active.has_value());
  EXPECT_NEAR(s.gpm.sm_active.value(), 0.82, 0.01);
  EXPECT_NEAR(s.gpm.sm_occupancy.value(), 0.41, 0.01);
  EXPECT_NEAR(s.gpm.tensor_active.value(), 0.71, 0.01);
  EXPECT_NEAR(s.gpm.dram_bw_util.value(), 0.55, 0.01);
  ASSERT_TRUE(s.pcie_tx_kbps.has_value());
  EXPECT_NEAR(s.pcie_tx_kbps.value(), 96.0 * 5000, 2000);  // the scenario's default: util x 5000
  ASSERT_TRUE(s.pcie_rx_kbps.has_value());
  EXPECT_NEAR(s.pcie_rx_kbps.value(), 96.0 * 8000, 3000);

  // GPU 5: busy by utilisation, almost no tensor work.
  GpuSample g5 = MustSample(*node.source, 5);
  node.control->SetTime(4);
  ASSERT_TRUE(node.source->Sample(5, &g5).ok());
  EXPECT_GT(g5.util_gpu_pct.value_or(0), 50u);
  ASSERT_TRUE(g5.gpm.tensor_active.has_value());
  EXPECT_LT(g5.gpm.tensor_active.value(), 0.05);
}

TEST(NvmlGpuSourceTest, MigGpuReportsInstancesAndPerSliceGpm) {
  Node node = OpenNode(BuiltinText("h100-mig-node"));
  ASSERT_TRUE(node.source);
  node.control->SetTime(0);
  GpuSample s = MustSample(*node.source, 3);
  node.control->SetTime(1);
  ASSERT_TRUE(node.source->Sample(3, &s).ok());
  EXPECT_EQ(s.mig_enabled, Field<bool>::Of(true));
  // Not available on MIG-enabled GPUs: unsupported, never 0.
  EXPECT_EQ(s.util_gpu_pct.state(), FieldState::kUnsupported);
  ASSERT_EQ(s.mig_instances.size(), 3u);
  EXPECT_EQ(s.mig_instances[0].profile, "3g.40gb");
  EXPECT_EQ(s.mig_instances[0].slices, 3u);
  EXPECT_EQ(s.mig_instances[0].gpu_instance_id, 1u);
  EXPECT_EQ(s.mig_instances[0].compute_instance_id, 0u);
  EXPECT_EQ(s.mig_instances[0].uuid, "MIG-7a1b2c3d-0301-5e6f-8a9b-0c1d2e3f4a01");
  EXPECT_EQ(s.mig_instances[0].memory_total_bytes, Field<uint64_t>::Of(40ULL * 1024 * kMiB));
  EXPECT_EQ(s.mig_instances[0].memory_used_bytes, Field<uint64_t>::Of(35100 * kMiB));
  EXPECT_EQ(s.mig_instances[1].profile, "2g.20gb");
  EXPECT_EQ(s.mig_instances[2].profile, "1g.10gb");
  EXPECT_EQ(s.mig_instances[2].memory_used_bytes, Field<uint64_t>::Of(0));
  ASSERT_TRUE(s.mig_instances[0].gpm.sm_active.has_value());
  EXPECT_NEAR(s.mig_instances[0].gpm.sm_active.value(), 0.74, 0.01);
  EXPECT_NEAR(s.mig_instances[0].gpm.tensor_active.value(), 0.52, 0.01);
  EXPECT_EQ(s.mig_instances[2].gpm.sm_active, Field<double>::Of(0.0));

  ASSERT_EQ(s.processes.size(), 2u);
  EXPECT_EQ(s.processes[0].pid, 60877u);
  EXPECT_EQ(s.processes[0].gpu_instance_id, 1u);
  EXPECT_EQ(s.processes[0].compute_instance_id, 0u);
  EXPECT_EQ(s.processes[1].gpu_instance_id, 5u);
  EXPECT_EQ(s.processes[0].sm_util_pct.state(), FieldState::kUnsupported);
}

TEST(NvmlGpuSourceTest, LostGpuComesBackWithoutAffectingOthers) {
  Node node = OpenNode(BuiltinText("faulty-node"));
  ASSERT_TRUE(node.source);
  GpuSource& src = *node.source;
  ASSERT_EQ(src.DeviceCount(), 4u);
  node.control->SetTime(10);
  GpuSample s = MustSample(src, 1);
  EXPECT_EQ(s.health, GpuHealth::kOk);
  EXPECT_TRUE(s.util_gpu_pct.has_value());

  node.control->SetTime(25);  // lost window 20..50
  ASSERT_TRUE(src.Sample(1, &s).ok());
  EXPECT_EQ(s.health, GpuHealth::kLost);
  EXPECT_EQ(s.id.uuid, "GPU-a1000000-0001-4b2c-8d3e-000000000001");
  EXPECT_EQ(s.util_gpu_pct.state(), FieldState::kUnset);
  EXPECT_EQ(s.memory_used_bytes.state(), FieldState::kUnset);
  EXPECT_TRUE(s.processes.empty());
  for (uint32_t other : {0u, 2u, 3u}) {
    const GpuSample o = MustSample(src, other);
    EXPECT_EQ(o.health, GpuHealth::kOk) << "GPU " << other;
    EXPECT_TRUE(o.memory_used_bytes.has_value()) << "GPU " << other;
  }
  node.control->SetTime(45);
  ASSERT_TRUE(src.Sample(1, &s).ok());
  EXPECT_EQ(s.health, GpuHealth::kLost);

  node.control->SetTime(55);  // back: the adapter needs (and gets) a fresh handle
  ASSERT_TRUE(src.Sample(1, &s).ok());
  EXPECT_EQ(s.health, GpuHealth::kOk);
  EXPECT_TRUE(s.util_gpu_pct.has_value());
  ASSERT_EQ(s.processes.size(), 1u);
  EXPECT_EQ(s.processes[0].pid, 3102u);
}

TEST(NvmlGpuSourceTest, XidEventsArriveThroughTheEventSet) {
  Node node = OpenNode(BuiltinText("faulty-node"));
  ASSERT_TRUE(node.source);
  GpuSource& src = *node.source;
  node.control->SetTime(5);
  auto none = src.WaitEvents(std::chrono::milliseconds(10));
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_TRUE(none->empty());

  node.control->SetTime(21);
  auto fall = src.WaitEvents(std::chrono::milliseconds(10));
  ASSERT_TRUE(fall.ok());
  ASSERT_EQ(fall->size(), 1u);
  EXPECT_EQ((*fall)[0].type, GpuEvent::Type::kXid);
  EXPECT_EQ((*fall)[0].xid, 79u);
  EXPECT_EQ((*fall)[0].gpu_index, 1u);

  // A waiter blocked in WaitEvents is released when (manual) time passes the next XID.
  std::thread advance([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    node.control->SetTime(40);
  });
  auto mmu = src.WaitEvents(std::chrono::seconds(20));
  advance.join();
  ASSERT_TRUE(mmu.ok());
  ASSERT_EQ(mmu->size(), 1u);
  EXPECT_EQ((*mmu)[0].xid, 31u);
  EXPECT_EQ((*mmu)[0].gpu_index, 2u);
  EXPECT_EQ((*mmu)[0].uuid, "GPU-a1000000-0002-4b2c-8d3e-000000000002");

  // The scenario loops every 120 s: the next XID 79 comes at 140 s.
  node.control->SetTime(141);
  auto again = src.WaitEvents(std::chrono::milliseconds(10));
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(again->size(), 1u);
  EXPECT_EQ((*again)[0].xid, 79u);
}

TEST(NvmlGpuSourceTest, AmpereHasNoGpmAndUnsupportedFunctionsStayUnsupported) {
  Node node = OpenNode(BuiltinText("faulty-node"));
  ASSERT_TRUE(node.source);
  GpuSample s = MustSample(*node.source, 0);
  node.control->SetTime(3);
  ASSERT_TRUE(node.source->Sample(0, &s).ok());
  EXPECT_EQ(s.gpm.sm_active.state(), FieldState::kUnsupported);
  EXPECT_EQ(s.gpm.tensor_active.state(), FieldState::kUnsupported);
  EXPECT_EQ(s.id.architecture, Field<uint32_t>::Of(NVML_DEVICE_ARCH_AMPERE));

  GpuSample g3 = MustSample(*node.source, 3);
  EXPECT_EQ(g3.power_mw.state(), FieldState::kUnsupported);
  EXPECT_EQ(g3.energy_mj.state(), FieldState::kUnsupported);
  EXPECT_TRUE(g3.power_limit_mw.has_value());
  node.control->SetTime(40);
  ASSERT_TRUE(node.source->Sample(3, &g3).ok());
  EXPECT_EQ(g3.clock_event_reasons, Field<uint64_t>::Of(0x20));  // SW thermal slowdown

  GpuSample g2 = MustSample(*node.source, 2);
  EXPECT_EQ(g2.ecc_corrected_total, Field<uint64_t>::Of(17));
  EXPECT_EQ(g2.remapped_rows_correctable, Field<uint32_t>::Of(2));
}

constexpr const char* kLegacyScenario = R"(name: legacy
gpus:
  - model: NVIDIA A100-SXM4-40GB
    uuid: GPU-legacy-0
    pci_bus_id: "00000000:07:00.0"
    architecture: 7
    memory_total_mib: 40960
    memory_reserved_mib: 400
    power_limit_w: 400
    sm_clock_max_mhz: 1410
    mem_clock_max_mhz: 1215
    util: 50
    temperature_c: 55
    clock_event_reasons: 4
processes:
  - {pid: 101, gpu: 0, used_memory_mib: 1000}
  - {pid: 202, gpu: 0, used_memory_mib: 2000}
  - {pid: 303, gpu: 0, used_memory_mib: 3000}
)";

TEST(NvmlGpuSourceTest, LegacyLibraryFallsBackToV1MemoryAndPlainProcessList) {
  Node node = OpenNode(kLegacyScenario, FakeVariant::kLegacy);
  ASSERT_TRUE(node.source);
  GpuSample s = MustSample(*node.source, 0);
  EXPECT_EQ(s.health, GpuHealth::kOk);
  EXPECT_EQ(s.id.pci_bus_id, "00000000:07:00.0");  // via nvmlDeviceGetPciInfo_v2
  EXPECT_EQ(s.memory_total_bytes, Field<uint64_t>::Of(40960 * kMiB));
  // v1 memory: `used` includes reserved, and reserved itself is unknown.
  EXPECT_EQ(s.memory_used_bytes, Field<uint64_t>::Of((6000 + 400) * kMiB));
  EXPECT_EQ(s.memory_reserved_bytes.state(), FieldState::kUnsupported);
  EXPECT_EQ(s.temperature_c, Field<uint32_t>::Of(55));        // plain GetTemperature
  EXPECT_EQ(s.clock_event_reasons, Field<uint64_t>::Of(4));   // throttle-reasons name
  EXPECT_EQ(s.pcie_tx_kbps, Field<uint32_t>::Of(50 * 5000));  // no GPM: throughput call
  node.control->SetTime(3);
  ASSERT_TRUE(node.source->Sample(0, &s).ok());
  EXPECT_EQ(s.gpm.sm_active.state(), FieldState::kUnsupported);  // no GPM symbols at all
  // 16-byte entries decoded with a 16-byte stride.
  ASSERT_EQ(s.processes.size(), 3u);
  EXPECT_EQ(s.processes[0].pid, 101u);
  EXPECT_EQ(s.processes[1].pid, 202u);
  EXPECT_EQ(s.processes[2].pid, 303u);
  EXPECT_EQ(s.processes[2].used_memory_bytes, Field<uint64_t>::Of(3000 * kMiB));
  EXPECT_EQ(s.processes[2].gpu_instance_id, UINT32_MAX);
  // A scenario process without sm_util has no per-process samples: unset, not 0.
  EXPECT_EQ(s.processes[0].sm_util_pct.state(), FieldState::kUnset);
}

TEST(NvmlGpuSourceTest, R535DriverWideV3EntriesUseThe32ByteStride) {
  Node node = OpenNode(kLegacyScenario, FakeVariant::kR535);
  ASSERT_TRUE(node.source);
  const GpuSample s = MustSample(*node.source, 0);
  // Reading 32-byte entries with a 24-byte stride would scramble pids and memory.
  ASSERT_EQ(s.processes.size(), 3u);
  EXPECT_EQ(s.processes[1].pid, 202u);
  EXPECT_EQ(s.processes[1].used_memory_bytes, Field<uint64_t>::Of(2000 * kMiB));
  EXPECT_EQ(s.processes[2].pid, 303u);
  EXPECT_EQ(s.processes[2].used_memory_bytes, Field<uint64_t>::Of(3000 * kMiB));
  EXPECT_EQ(s.memory_reserved_bytes, Field<uint64_t>::Of(400 * kMiB));  // _v2 memory present
}

TEST(NvmlGpuSourceTest, ManyProcessesGrowTheBuffer) {
  std::string yaml = R"(name: many
gpus:
  - model: NVIDIA H100 80GB HBM3
    uuid: GPU-many
    pci_bus_id: "00000000:18:00.0"
    memory_total_mib: 81559
processes:
)";
  for (int i = 0; i < 150; ++i) {
    yaml += "  - {pid: " + std::to_string(1000 + i) +
            ", gpu: 0, used_memory_mib: " + std::to_string(100 + i) +
            ", sm_util: " + std::to_string(i % 100) + "}\n";
  }
  for (FakeVariant v : {FakeVariant::kFull, FakeVariant::kLegacy, FakeVariant::kR535}) {
    Node node = OpenNode(yaml, v);
    ASSERT_TRUE(node.source);
    const GpuSample s = MustSample(*node.source, 0);
    ASSERT_EQ(s.processes.size(), 150u);
    for (int i = 0; i < 150; ++i) {
      ASSERT_EQ(s.processes[i].pid, static_cast<uint32_t>(1000 + i));
      ASSERT_EQ(s.processes[i].used_memory_bytes,
                Field<uint64_t>::Of(static_cast<uint64_t>(100 + i) * kMiB));
    }
    EXPECT_EQ(s.processes[149].sm_util_pct, Field<uint32_t>::Of(49));
  }
}

TEST(NvmlGpuSourceTest, MissingLibraryIsAClearError) {
  auto source = OpenNvmlGpuSource(NvmlOptions{"/nonexistent/libnvidia-ml.so.1"});
  ASSERT_FALSE(source.ok());
  EXPECT_EQ(source.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(source.status().message(), HasSubstr("/nonexistent/libnvidia-ml.so.1"));
}

TEST(NvmlGpuSourceTest, ALibraryThatIsNotNvmlNamesTheMissingSymbol) {
  auto source = OpenNvmlGpuSource(NvmlOptions{"libz.so.1"});
  ASSERT_FALSE(source.ok());
  EXPECT_EQ(source.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(source.status().message(), HasSubstr("libz.so.1"));
  EXPECT_THAT(source.status().message(), HasSubstr("nvmlInit_v2"));
}

TEST(NvmlGpuSourceTest, InitFailureNamesTheCode) {
  // A private copy of the fake (a new file, so a fresh instance) with no scenario refuses
  // nvmlInit like a driver that is not loaded.
  const std::string copy = std::string(STOKER_BINARY_DIR) + "/nvml_test_noscenario.so";
  {
    std::ifstream in(FakeLibraryBuildPath(FakeVariant::kFull), std::ios::binary);
    std::ofstream out(copy, std::ios::binary | std::ios::trunc);
    out << in.rdbuf();
  }
  ::unsetenv("STOKER_FAKE_NVML_SCENARIO");
  auto source = OpenNvmlGpuSource(NvmlOptions{copy});
  ASSERT_FALSE(source.ok());
  EXPECT_EQ(source.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(source.status().message(), HasSubstr(copy));
  EXPECT_THAT(source.status().message(), HasSubstr("nvmlInit_v2 failed"));
  EXPECT_THAT(source.status().message(), HasSubstr("NVML_ERROR_DRIVER_NOT_LOADED (9)"));
  std::remove(copy.c_str());
}

TEST(NvmlGpuSourceTest, OutOfRangeIndexIsInvalidArgument) {
  Node node = OpenNode(BuiltinText("faulty-node"));
  ASSERT_TRUE(node.source);
  GpuSample s;
  EXPECT_EQ(node.source->Sample(4, &s).code(), StatusCode::kInvalidArgument);
}

TEST(NvmlGpuSourceTest, ConcurrentSamplingOfDifferentGpus) {
  Node node = OpenNode(BuiltinText("h100-mig-node"));
  ASSERT_TRUE(node.source);
  std::vector<std::thread> threads;
  std::vector<int> ok(8, 0);
  for (uint32_t i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      GpuSample s;
      for (int n = 0; n < 200; ++n) {
        if (node.source->Sample(i, &s).ok() && s.health == GpuHealth::kOk && s.id.index == i) {
          ++ok[i];
        }
      }
    });
  }
  std::thread clock([&] {
    for (int n = 0; n < 100; ++n) node.control->Advance(0.5);
  });
  for (auto& t : threads) t.join();
  clock.join();
  for (uint32_t i = 0; i < 8; ++i) EXPECT_EQ(ok[i], 200) << "GPU " << i;
}

}  // namespace
}  // namespace stoker::nvml
