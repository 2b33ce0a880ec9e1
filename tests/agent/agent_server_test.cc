#include "agent/agent_server.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>

#include "support/descriptors.h"
#include "support/fake_gpu_source.h"

namespace stoker::agent {
namespace {

using stoker::testing::FakeGpuSource;
using stoker::testing::MakeH100Sample;

class AgentServerTest : public ::testing::Test {
 protected:
  AgentServerTest()
      : source_({MakeH100Sample(0, 2), MakeH100Sample(1, 0)}),
        sampler_(&source_, &clock_, nullptr, telemetry::SamplerOptions{}) {}

  void StartServer() {
    sampler_.SampleOnce(0);
    sampler_.SampleOnce(1);
    AgentServerOptions o;
    o.listen = ListenAddress{"127.0.0.1", 0};
    o.renderer.hostname = "test-node";
    server_ = std::make_unique<AgentServer>(&sampler_, o);
    ASSERT_TRUE(server_->Start().ok());
    ASSERT_GT(server_->port(), 0);
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
    client_->set_read_timeout(5, 0);
  }

  ManualClock clock_;
  FakeGpuSource source_;
  telemetry::Sampler sampler_;
  std::unique_ptr<AgentServer> server_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(AgentServerTest, MetricsEndpointServesPrometheusText) {
  StartServer();
  auto res = client_->Get("/metrics");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_NE(res->body.find("stoker_gpu_up{gpu=\"1\""), std::string::npos);
  EXPECT_NE(res->body.find("hostname=\"test-node\""), std::string::npos);
  EXPECT_NE(res->body.find("stoker_host_load1"), std::string::npos);
}

TEST_F(AgentServerTest, HealthzReportsDegradedGpus) {
  GpuSample lost = MakeH100Sample(1, 0);
  lost.health = GpuHealth::kLost;
  source_.SetSample(1, lost);
  StartServer();
  auto res = client_->Get("/healthz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  const auto j = nlohmann::json::parse(res->body);
  EXPECT_EQ(j["status"], "degraded");
  EXPECT_EQ(j["nvml_available"], true);
  EXPECT_EQ(j["simulated"], false);
  EXPECT_EQ(j["gpus"][0]["health"], "ok");
  EXPECT_EQ(j["gpus"][1]["health"], "lost");
}

TEST_F(AgentServerTest, SnapshotEndpointServesJson) {
  StartServer();
  auto res = client_->Get("/api/v1/snapshot");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  const auto j = nlohmann::json::parse(res->body);
  ASSERT_EQ(j["gpus"].size(), 2u);
  EXPECT_EQ(j["gpus"][0]["processes"].size(), 2u);
  EXPECT_EQ(j["gpus"][0]["fields"]["power_mw"]["value"], 250000);
  EXPECT_EQ(j["hostname"], "test-node");
}

TEST_F(AgentServerTest, UnknownPathIs404AndStopIsIdempotent) {
  StartServer();
  auto res = client_->Get("/nope");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  server_->Stop();
  server_->Stop();
}

TEST_F(AgentServerTest, BusyPortIsUnavailable) {
  StartServer();
  AgentServerOptions o;
  o.listen = ListenAddress{"127.0.0.1", static_cast<uint16_t>(server_->port())};
  AgentServer second(&sampler_, o);
  const Status s = second.Start();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
}

// The exporter's listener and its connections (a scraper's idle keep-alive one included) are
// close-on-exec: the agent starts jobs.
TEST_F(AgentServerTest, EveryDescriptorIsCloseOnExec) {
  const std::set<int> before = stoker::testing::OpenDescriptors();
  StartServer();
  client_->set_keep_alive(true);
  ASSERT_TRUE(client_->Get("/metrics"));
  EXPECT_EQ(stoker::testing::InheritableSince(before), std::vector<std::string>{});
}

}  // namespace
}  // namespace stoker::agent
