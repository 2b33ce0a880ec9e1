// End to end through the real NVML adapter: the fake NVML library loaded with dlopen, playing
// the built-in scenarios, sampled, attributed, and scraped over HTTP.

#include <gtest/gtest.h>
#include <httplib.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "agent/agent_server.h"
#include "agent/scenario_process_info.h"
#include "fakenvml/fake_control.h"
#include "nvml/nvml_gpu_source.h"
#include "nvml/simulated.h"
#include "telemetry/attribution.h"
#include "telemetry/sampler.h"

namespace stoker::agent {
namespace {

using namespace std::chrono_literals;

bool Contains(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

std::string Scrape(const telemetry::Sampler& sampler, const std::string& hostname) {
  AgentServerOptions o;
  o.listen = ListenAddress{"127.0.0.1", 0};
  o.renderer.hostname = hostname;
  AgentServer server(&sampler, o);
  EXPECT_TRUE(server.Start().ok());
  httplib::Client client("127.0.0.1", server.port());
  auto res = client.Get("/metrics");
  EXPECT_TRUE(res);
  return res ? res->body : "";
}

TEST(AgentE2ETest, H100MigNodeIsSampledAttributedAndExported) {
  auto source = nvml::OpenSimulatedGpuSource("h100-mig-node");
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  auto scenario = nvml::LoadSimulatedScenario("h100-mig-node");
  ASSERT_TRUE(scenario.ok()) << scenario.status().ToString();
  ScenarioProcessInfo info(*scenario);
  ManualClock clock;
  telemetry::Attributor attributor(&info, &clock);
  telemetry::Sampler sampler(source->get(), &clock, &attributor, telemetry::SamplerOptions{});
  ASSERT_GT(sampler.gpu_count(), 0u);
  for (int round = 0; round < 2; ++round) {  // two rounds: GPM ratios need two samples
    for (uint32_t i = 0; i < sampler.gpu_count(); ++i) sampler.SampleOnce(i);
  }
  telemetry::TelemetrySnapshot snap;
  sampler.Snapshot(&snap);
  EXPECT_TRUE(snap.simulated);
  size_t mig = 0;
  std::set<std::string> jobs;
  for (const auto& g : snap.gpus) {
    ASSERT_TRUE(g.have_sample) << g.last_error;
    mig += g.sample.mig_instances.size();
    for (const GpuProcess& p : g.sample.processes) {
      if (p.job.known()) jobs.insert(std::string(JobKindName(p.job.kind)) + ":" + p.job.id);
    }
  }
  EXPECT_GE(mig, 3u);
  EXPECT_TRUE(jobs.count("stoker:42"));
  EXPECT_TRUE(jobs.count("slurm:1234"));
  EXPECT_TRUE(jobs.count("kubernetes:3f2a9c1e-5b7d-4e21-9a0c-7d8e1f2a3b4c"));

  const std::string body = Scrape(sampler, scenario->hostname);
  EXPECT_TRUE(Contains(body, "simulated=\"true\""));
  EXPECT_TRUE(Contains(body, "hostname=\"gpu-h100-07\""));
  EXPECT_TRUE(Contains(body, "mig_profile=\"3g.40gb\""));
  EXPECT_TRUE(Contains(body, "jobid=\"42\",user=\"alice\""));
  EXPECT_TRUE(Contains(body, "stoker_gpu_sm_active_ratio{"));
}

TEST(AgentE2ETest, FaultyNodeShowsLostGpuXidsAndUnsupportedPower) {
  // The fake library built in the tree, scripted through its control hooks, and the adapter
  // opened on the same path (one shared fake instance), exactly as for the real driver.
  const std::string lib = fakenvml::FakeLibraryBuildPath();
  auto control = fakenvml::FakeNvmlControl::Open(lib);
  ASSERT_TRUE(control.ok()) << control.status().ToString();
  std::ifstream yaml_file(std::string(STOKER_SOURCE_DIR) + "/scenarios/faulty-node.yaml");
  const std::string yaml((std::istreambuf_iterator<char>(yaml_file)),
                         std::istreambuf_iterator<char>());
  ASSERT_TRUE((*control)->SetScenario(yaml, "faulty-node.yaml").ok());
  auto source = nvml::OpenNvmlGpuSource(nvml::NvmlOptions{lib});
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  ManualClock clock;
  telemetry::Sampler sampler(source->get(), &clock, nullptr, telemetry::SamplerOptions{});
  ASSERT_EQ(sampler.gpu_count(), 4u);
  (*control)->SetTime(10);  // all healthy: the sampler learns every GPU's identity
  for (uint32_t i = 0; i < 4; ++i) sampler.SampleOnce(i);
  // Events are those after the event set's creation (the first WaitEvents), so create it at
  // t=10, then move to t=25: GPU 1 fell off the bus at t=20 (XID 79).
  ASSERT_TRUE((*source)->WaitEvents(1ms).ok());
  (*control)->SetTime(25);
  for (uint32_t i = 0; i < 4; ++i) sampler.SampleOnce(i);
  bool got79 = false;
  for (int i = 0; i < 20 && !got79; ++i) {
    auto events = (*source)->WaitEvents(50ms);
    ASSERT_TRUE(events.ok()) << events.status().ToString();
    for (const GpuEvent& e : *events) {
      sampler.RecordEvent(e);
      got79 |= e.xid == 79 && e.gpu_index == 1;
    }
  }
  ASSERT_TRUE(got79);
  telemetry::TelemetrySnapshot snap;
  sampler.Snapshot(&snap);
  EXPECT_EQ(snap.gpus[1].sample.health, GpuHealth::kLost);
  EXPECT_EQ(snap.gpus[0].sample.health, GpuHealth::kOk);
  EXPECT_EQ(snap.gpus[3].sample.power_mw.state(), FieldState::kUnsupported);
  EXPECT_EQ(snap.gpus[1].last_xid, 79u);

  const std::string body = Scrape(sampler, "gpu-a100-03");
  EXPECT_TRUE(Contains(body,
                       "pci_bus_id=\"00000000:0F:00.0\",model=\"NVIDIA A100-SXM4-80GB\","
                       "hostname=\"gpu-a100-03\",state=\"lost\"} 1\n"))
      << body;
  EXPECT_TRUE(Contains(body, ",xid=\"79\",grade=\"red\"} 1\n"));
  EXPECT_FALSE(Contains(body, "stoker_gpu_power_watts{gpu=\"3\""));
  EXPECT_TRUE(Contains(body, "stoker_gpu_power_watts{gpu=\"0\""));

  (*control)->SetTime(55);  // back on the bus
  sampler.SampleOnce(1);
  sampler.Snapshot(&snap);
  EXPECT_EQ(snap.gpus[1].sample.health, GpuHealth::kOk);
}

}  // namespace
}  // namespace stoker::agent
