// The scheduler extender as `stoker server` serves it, over real HTTPS: kube-scheduler's
// extender configuration can only authenticate with a TLS client certificate (tlsConfig with
// certFile/keyFile, the server verified with caFile), so the test makes a CA, a server
// certificate and client certificates with openssl, and calls the routes the way
// HTTPExtender.send does (POST, Content-Type application/json, the ExtenderArgs body).
//
// The cluster view comes from real heartbeats through the server (agents' samples with pod
// claims and processes no pod owns), the node states from the server (a drained node).
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "http/listener.h"
#include "integration/k8s_extender_service.h"
#include "k8s/extender_types.h"
#include "k8s_samples.h"
#include "server/api.h"
#include "server/server.h"
#include "store/store.h"

namespace stoker::k8s {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;
using server::Principal;
using server::Role;

int Sh(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()); }

// CA, server certificate (SAN 127.0.0.1), and client certificates: kube-scheduler and intruder
// from the CA, stranger from a CA the server does not trust.
void MakeCertificates(const std::string& d) {
  auto ca = [&](const std::string& name) {
    ASSERT_EQ(Sh("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days "
                 "1 -subj /CN=" +
                 name + " -keyout " + d + "/" + name + ".key -out " + d + "/" + name + ".pem"),
              0)
        << "openssl is needed (scripts/install-deps.sh)";
  };
  auto leaf = [&](const std::string& name, const std::string& cn, const std::string& issuer,
                  const std::string& ext) {
    ASSERT_EQ(Sh("openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=" +
                 cn + " -keyout " + d + "/" + name + ".key -out " + d + "/" + name + ".csr"),
              0);
    const std::string extfile = d + "/" + name + ".ext";
    std::ofstream(extfile) << ext << "\n";
    ASSERT_EQ(Sh("openssl x509 -req -in " + d + "/" + name + ".csr -CA " + d + "/" + issuer +
                 ".pem -CAkey " + d + "/" + issuer + ".key -CAcreateserial -days 1 -out " + d +
                 "/" + name + ".pem -extfile " + extfile),
              0);
  };
  ca("ca");
  ca("otherca");
  leaf("server", "stoker-server", "ca", "subjectAltName=IP:127.0.0.1");
  leaf("scheduler", "kube-scheduler", "ca", "extendedKeyUsage=clientAuth");
  leaf("intruder", "intruder", "ca", "extendedKeyUsage=clientAuth");
  leaf("stranger", "kube-scheduler", "otherca", "extendedKeyUsage=clientAuth");
}

class ExtenderServer : public ::testing::Test {
 protected:
  // The certificates are made once for the suite (P-256 keys: quick to make, unlike RSA ones).
  static void SetUpTestSuite() {
    // A refused client certificate: with TLS 1.3 the client's handshake completes before the
    // server checks the certificate and closes, so the client's next write meets a closed
    // socket. stoker ignores SIGPIPE in every command (cli::Main); the test process does too,
    // so that write fails with EPIPE as it does in stoker.
    std::signal(SIGPIPE, SIG_IGN);
    dir_ = (fs::temp_directory_path() / ("stoker_k8s_ext_" + std::to_string(::getpid()))).string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    MakeCertificates(dir_);
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  void SetUp() override {
    ASSERT_TRUE(fs::exists(dir_ + "/server.pem")) << "the certificates could not be made";
    const std::string data = dir_ + "/data";
    fs::remove_all(data);
    fs::create_directories(data);
    store_ = store::OpenSqliteStore(data + "/stoker.db", {.synchronous_full = false}).value();
    server::ServerOptions so;
    so.data_dir = data;
    so.client_certificates["kube-scheduler"] = Principal{"kube-scheduler", Role::kScheduler};
    server_ = server::Server::Create(store_.get(), &clock_, so).value();
    api_ = std::make_unique<server::Api>(server_.get());
    ext_ = std::make_unique<integration::KubernetesExtender>(server_.get(), &clock_);
    server_->AddObserver(ext_.get());
    api_->AddExtension(ext_.get());
    const Principal root{"root", Role::kAdmin};
    user_token_ = *server_->CreateToken(root, Role::kUser, "alice");
    // gpu-a: two idle GPUs; gpu-b: GPU 0 holds 70 GiB for a process no pod owns, GPU 1 is
    // held whole by a pod; gpu-c: idle but drained.
    for (const char* name : {"gpu-a", "gpu-b", "gpu-c"}) {
      server::NodeInventory inv;
      inv.name = name;
      inv.cpu_milli = 64000;
      inv.memory_mib = 256 * 1024;
      for (uint32_t i = 0; i < 2; ++i) {
        inv.gpus.push_back(server::GpuInfo{i,
                                           "GPU-" + std::string(name) + "-" + std::to_string(i),
                                           "NVIDIA H100 80GB HBM3",
                                           81920,
                                           false,
                                           {}});
      }
      ASSERT_TRUE(server_->RegisterNode(root, inv).ok());
      std::vector<GpuSample> samples = testing::IdleNode(name, 2, clock_.WallNow());
      if (std::string(name) == "gpu-b") {
        testing::AddProcess(samples[0], 4242, 70 * testing::kGiB);
        testing::AddWholeClaim(samples[1], "ml/holder");
      }
      server::Heartbeat hb;
      hb.gpus = samples;
      ASSERT_TRUE(server_->Heartbeat(root, name, hb).ok());
    }
    ASSERT_TRUE(server_->SetDrained(root, "gpu-c", true).ok());
    ext_->RefreshNodeStates();
    http::ListenerOptions ho;
    ho.host = "127.0.0.1";
    ho.port = 0;
    ho.tls_cert = dir_ + "/server.pem";
    ho.tls_key = dir_ + "/server.key";
    ho.tls_client_ca = dir_ + "/ca.pem";
    http_ = std::make_unique<http::Listener>(api_.get(), ho);
    ASSERT_TRUE(http_->Start().ok());
  }
  void TearDown() override {
    if (http_) http_->Stop();
    http_.reset();
    ext_.reset();
    api_.reset();
    server_.reset();
    store_.reset();
  }

  // A client as kube-scheduler's HTTPExtender is one: verifies the server by the CA, presents
  // the named client certificate ("" for none).
  std::unique_ptr<httplib::SSLClient> Client(const std::string& cert) {
    auto c = cert.empty() ? std::make_unique<httplib::SSLClient>("127.0.0.1", http_->port())
                          : std::make_unique<httplib::SSLClient>("127.0.0.1", http_->port(),
                                                                 dir_ + "/" + cert + ".pem",
                                                                 dir_ + "/" + cert + ".key");
    c->set_ca_cert_path(dir_ + "/ca.pem");
    c->enable_server_certificate_verification(true);
    c->set_connection_timeout(10);
    c->set_read_timeout(10);
    return c;
  }

  static std::string Args(const std::string& limits) {
    return R"({"Pod":{"metadata":{"name":"train-0","namespace":"ml","uid":"u1"},"spec":)"
           R"({"containers":[{"name":"train","resources":{"limits":)" +
           limits + R"(,"requests":)" + limits +
           R"(}}]}},"Nodes":null,"NodeNames":["gpu-a","gpu-b","gpu-c","gpu-z"]})";
  }

  ManualClock clock_;
  static std::string dir_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<server::Server> server_;
  std::unique_ptr<server::Api> api_;
  std::unique_ptr<integration::KubernetesExtender> ext_;
  std::unique_ptr<http::Listener> http_;
  std::string user_token_;
};

std::string ExtenderServer::dir_;

TEST_F(ExtenderServer, KubeSchedulersClientCertificateFiltersAndPrioritizes) {
  auto c = Client("scheduler");
  auto who = c->Get("/api/v1/whoami");
  ASSERT_TRUE(who) << httplib::to_string(who.error());
  EXPECT_EQ(json::parse(who->body), (json{{"name", "kube-scheduler"}, {"role", "scheduler"}}));

  auto r =
      c->Post("/api/v1/k8s/extender/filter", Args(R"({"stoker.io/gpu":"2"})"), "application/json");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  ASSERT_EQ(r->status, 200) << r->body;
  const json got = json::parse(r->body);
  EXPECT_EQ(got["NodeNames"], json::array({"gpu-a"})) << r->body;
  EXPECT_TRUE(got["Nodes"].is_null());
  EXPECT_EQ(got["Error"], "");
  // gpu-b: the process no pod owns keeps GPU 0 busy; the pod holding GPU 1 could be preempted,
  // but two GPUs would still not be free: unresolvable. gpu-c is drained; gpu-z unknown.
  EXPECT_NE(got["FailedAndUnresolvableNodes"]["gpu-b"].get<std::string>().find(
                "70.0 GiB of it held by processes no pod owns"),
            std::string::npos)
      << r->body;
  EXPECT_EQ(got["FailedAndUnresolvableNodes"]["gpu-c"], "stoker: drained in Stoker");
  EXPECT_EQ(got["FailedAndUnresolvableNodes"]["gpu-z"],
            "stoker: no Stoker agent reports this node");

  auto p = c->Post("/api/v1/k8s/extender/prioritize", Args(R"({"stoker.io/gpu-milli":"250"})"),
                   "application/json");
  ASSERT_TRUE(p) << httplib::to_string(p.error());
  ASSERT_EQ(p->status, 200) << p->body;
  auto list = ParseHostPriorityList(p->body);
  ASSERT_TRUE(list.ok()) << p->body;
  ASSERT_EQ(list->size(), 4u);
  for (const HostPriority& h : *list) {
    EXPECT_GE(h.score, kMinExtenderPriority);
    EXPECT_LE(h.score, kMaxExtenderPriority);
    if (h.host == "gpu-a") {
      EXPECT_EQ(h.score, kMaxExtenderPriority) << p->body;
    }
    if (h.host == "gpu-c" || h.host == "gpu-z") {
      EXPECT_EQ(h.score, 0) << p->body;
    }
  }

  // The server's /metrics counts the calls.
  auto m = c->Get("/metrics");
  ASSERT_TRUE(m) << httplib::to_string(m.error());
  EXPECT_EQ(m->status, 403);  // the scheduler role reads nothing else
  httplib::Headers bearer = {{"Authorization", "Bearer " + user_token_}};
  m = c->Get("/metrics", bearer);
  ASSERT_TRUE(m) << httplib::to_string(m.error());
  EXPECT_NE(m->body.find("stoker_k8s_extender_requests_total{verb=\"filter\"} 1"),
            std::string::npos);
  EXPECT_NE(m->body.find("stoker_k8s_extender_filtered_nodes_total{result=\"unresolvable\"} 3"),
            std::string::npos);
}

TEST_F(ExtenderServer, OnlyAMappedCertificateFromTheTrustedCaGetsIn) {
  const std::string body = Args(R"({"stoker.io/gpu":"1"})");
  // No certificate, no token.
  auto r = Client("")->Post("/api/v1/k8s/extender/filter", body, "application/json");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 401);
  // Signed by the CA, but its CN is not mapped to a role.
  r = Client("intruder")->Post("/api/v1/k8s/extender/filter", body, "application/json");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 401);
  EXPECT_NE(r->body.find("CN 'intruder' is not mapped"), std::string::npos) << r->body;
  // The right CN from a CA the server does not trust: the handshake fails.
  r = Client("stranger")->Post("/api/v1/k8s/extender/filter", body, "application/json");
  EXPECT_FALSE(r && r->status == 200);
  // A user's token: authenticated, but not a role of these routes.
  r = Client("")->Post("/api/v1/k8s/extender/filter", {{"Authorization", "Bearer " + user_token_}},
                       body, "application/json");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 403);
}

TEST_F(ExtenderServer, UnreadableBodiesAreAnsweredAsKubeSchedulerReadsErrors) {
  auto c = Client("scheduler");
  // Filter: 200 with the reason in Error (kube-scheduler logs it and fails the pod's cycle).
  auto r = c->Post("/api/v1/k8s/extender/filter", R"({"Pod":{"spec":{}},"NodeNames":["gpu-a"]})",
                   "application/json");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 200);
  const json got = json::parse(r->body);
  EXPECT_EQ(got["Error"], "stoker: Pod.metadata: required object");
  EXPECT_TRUE(got["NodeNames"].is_null());
  // Prioritize has no error field: a 400 naming the problem.
  r = c->Post("/api/v1/k8s/extender/prioritize", "{", "application/json");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(r->body.find("body: not valid JSON"), std::string::npos) << r->body;
}

// The extender's zone tracker is fed by every heartbeat of every server: many heartbeats with
// ever new pods, busy then idle, leave no per-pod entry and no pending transition behind.
TEST(ExtenderZoneTracker, ManyHeartbeatsDoNotGrowIt) {
  ManualClock clock;
  integration::KubernetesExtender ext(nullptr, &clock);
  for (int i = 0; i < 500; ++i) {
    clock.Advance(std::chrono::seconds(10));
    std::vector<GpuSample> samples = testing::IdleNode("gpu-a", 2, clock.WallNow());
    samples[0].util_gpu_pct = Field<uint32_t>::Of((i / 20) % 2 == 0 ? 95 : 0);
    testing::AddWholeClaim(samples[0], "ml/pod-" + std::to_string(i));
    ext.OnHeartbeat("gpu-a", samples, clock.WallNow());
  }
  const auto size = ext.ZoneTrackerSizeForTest();
  EXPECT_EQ(size.jobs, 0u);
  EXPECT_EQ(size.transitions, 0u);
}

// A 10-second report: the GPUs' memory changes from second to second; the node's view is the
// last second's, and its zone saw every second.
std::vector<server::SampleTick> TenSeconds(ManualClock& clock, bool busy) {
  std::vector<server::SampleTick> ticks;
  for (int k = 0; k < 10; ++k) {
    clock.Advance(std::chrono::seconds(1));
    std::vector<GpuSample> samples = testing::IdleNode("gpu-a", 2, clock.WallNow());
    samples[0].util_gpu_pct = Field<uint32_t>::Of(busy ? 80 : 0);
    testing::AddProcess(samples[0], 4242, static_cast<uint64_t>(k) * 8 * testing::kGiB);
    ticks.push_back(server::SampleTick{clock.WallNow(), std::move(samples)});
  }
  return ticks;
}

std::string OneNodeArgs(const std::string& limits) {
  return R"({"Pod":{"metadata":{"name":"p","namespace":"ml","uid":"u1"},"spec":)"
         R"({"containers":[{"name":"c","resources":{"limits":)" +
         limits + R"(,"requests":)" + limits + R"(}}]}},"Nodes":null,"NodeNames":["gpu-a"]})";
}

TEST(ExtenderReport, TheViewIsTheReportsLastSecond) {
  ManualClock clock;
  integration::KubernetesExtender ext(nullptr, &clock);
  ext.OnReport("gpu-a", TenSeconds(clock, /*busy=*/true));
  // The last second: GPU 0 holds 72 GiB for a process no pod owns, GPU 1 is free. A pod that
  // needs two whole GPUs does not fit; the reason names the last second's memory.
  const json two = json::parse(ext.Filter(OneNodeArgs(R"({"stoker.io/gpu":"2"})")).body);
  EXPECT_TRUE(two["NodeNames"].empty()) << two.dump();
  EXPECT_NE(two.dump().find("72.0 GiB of it held by processes no pod owns"), std::string::npos)
      << two.dump();
  const json one = json::parse(ext.Filter(OneNodeArgs(R"({"stoker.io/gpu":"1"})")).body);
  EXPECT_EQ(one["NodeNames"], json::array({"gpu-a"})) << one.dump();
}

// Where Kubernetes is not configured (`stoker server --k8s-extender off`, the default without a
// scheduler certificate or pod reclaim), reports cost the extender nothing and its verbs say
// that it is off.
TEST(ExtenderReport, OffTakesNoReportsAndSaysSo) {
  ManualClock clock;
  integration::KubernetesOptions off;
  off.enabled = false;
  integration::KubernetesExtender ext(nullptr, &clock, off);
  EXPECT_FALSE(ext.enabled());
  ext.OnReport("gpu-a", TenSeconds(clock, true));
  ext.OnHeartbeat("gpu-a", testing::IdleNode("gpu-a", 2, clock.WallNow()), clock.WallNow());
  EXPECT_EQ(ext.ZoneTrackerSizeForTest().transitions, 0u);
  const http::Response f = ext.Filter(OneNodeArgs(R"({"stoker.io/gpu":"1"})"));
  ASSERT_EQ(f.status, 200) << f.body;
  const json got = json::parse(f.body);
  EXPECT_TRUE(got["NodeNames"].empty() || got["NodeNames"].is_null()) << f.body;
  EXPECT_NE(got["Error"].get<std::string>().find("the scheduler extender is off on this server"),
            std::string::npos)
      << f.body;
  const http::Response p = ext.Prioritize(OneNodeArgs(R"({"stoker.io/gpu":"1"})"));
  EXPECT_EQ(p.status, 409) << p.body;
  EXPECT_NE(p.body.find("--k8s-extender on"), std::string::npos) << p.body;
  EXPECT_NE(ext.Metrics(server::Principal{"root", server::Role::kAdmin})
                .find("stoker_k8s_extender_request_errors_total{verb=\"filter\"} 1"),
            std::string::npos);
}

}  // namespace
}  // namespace stoker::k8s
