// Idle reclaim for pods: the efficiency engine's decision and evidence, the eviction as an HTTP
// request to a fake Kubernetes API server (httplib on a loopback port) that answers as the API
// server does: 201 with a Status object, 429 when a PodDisruptionBudget forbids it, 404 when
// the pod is gone. The request is checked byte for byte.
#include "k8s/pod_reclaim.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <fstream>
#include <mutex>
#include <thread>

#include "k8s_samples.h"

namespace stoker::k8s {
namespace {
using namespace std::chrono_literals;

struct Seen {
  std::string method, path, content_type, authorization, body;
};

class FakeApiServer {
 public:
  FakeApiServer() {
    server_.Post(R"(/api/v1/namespaces/([^/]+)/pods/([^/]+)/eviction)", [this](
                                                                            const httplib::Request&
                                                                                req,
                                                                            httplib::Response&
                                                                                res) {
      {
        std::lock_guard lock(mu_);
        seen_.push_back({req.method, req.path, req.get_header_value("Content-Type"),
                         req.get_header_value("Authorization"), req.body});
      }
      const std::string pod = req.matches[2];
      if (pod == "guarded") {
        res.status = 429;
        res.set_content(
            R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",)"
            R"("message":"Cannot evict pod as it would violate the pod's disruption budget.",)"
            R"("reason":"TooManyRequests","code":429})",
            "application/json");
      } else if (pod == "gone") {
        res.status = 404;
        res.set_content(R"({"kind":"Status","apiVersion":"v1","status":"Failure",)"
                        R"("message":"pods \"gone\" not found","reason":"NotFound","code":404})",
                        "application/json");
      } else {
        res.status = 201;
        res.set_content(
            R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success","code":201})",
            "application/json");
      }
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ~FakeApiServer() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<Seen> seen() {
    std::lock_guard lock(mu_);
    return seen_;
  }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::vector<Seen> seen_;
};

TEST(Eviction, TheRequestIsTheEvictionSubresourcePost) {
  EXPECT_EQ(EvictionPath("ml", "train-0"), "/api/v1/namespaces/ml/pods/train-0/eviction");
  EXPECT_EQ(EvictionBody("ml", "train-0"), R"({"apiVersion":"policy/v1","kind":"Eviction",)"
                                           R"("metadata":{"name":"train-0","namespace":"ml"}})");
  FakeApiServer api;
  auto evictor = NewKubeApiEvictor({api.url(), "sa-token", "", 5s});
  EXPECT_TRUE(evictor->Evict("ml", "train-0").ok());
  const Status guarded = evictor->Evict("ml", "guarded");
  EXPECT_EQ(guarded.code(), StatusCode::kUnavailable);
  EXPECT_NE(guarded.message().find("would violate the pod's disruption budget"), std::string::npos);
  EXPECT_EQ(evictor->Evict("ml", "gone").code(), StatusCode::kNotFound);
  const std::vector<Seen> seen = api.seen();
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0].method, "POST");
  EXPECT_EQ(seen[0].path, "/api/v1/namespaces/ml/pods/train-0/eviction");
  EXPECT_EQ(seen[0].content_type, "application/json");
  EXPECT_EQ(seen[0].authorization, "Bearer sa-token");
  EXPECT_EQ(seen[0].body, EvictionBody("ml", "train-0"));
  EXPECT_EQ(EvictionStatus(403, R"({"message":"forbidden: cannot create pods/eviction"})").code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(EvictionStatus(500, "oops").code(), StatusCode::kInternal);
  // Names that are not DNS-1123 names never reach the API (they come from agents' claims).
  for (const auto& [ns, pod] :
       std::vector<std::pair<std::string, std::string>>{{"ml", "../../../secrets"},
                                                        {"ml", "a/b"},
                                                        {"ml", "x?dryRun=All"},
                                                        {"ML", "x"},
                                                        {"", "x"},
                                                        {"ml", ""},
                                                        {"ml", std::string(254, 'a')},
                                                        {"kube-system/x", "y"}}) {
    const Status st = evictor->Evict(ns, pod);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << ns << " " << pod;
    const std::string named =
        ns != "ml" ? "namespace name: '" + ns + "'" : "pod name: '" + pod + "'";
    EXPECT_NE(st.message().find(named), std::string::npos) << st.message();
  }
  EXPECT_EQ(api.seen().size(), 3u);
  // Nobody listening: Unavailable, not a crash.
  auto nowhere = NewKubeApiEvictor({"http://127.0.0.1:1", "", "", 1s});
  EXPECT_EQ(nowhere->Evict("ml", "x").code(), StatusCode::kUnavailable);
}

// The token file is read at each eviction: the kubelet rotates projected tokens.
TEST(Eviction, TheTokenFileIsReadAgainAtEachEviction) {
  FakeApiServer api;
  const std::string file = ::testing::TempDir() + "/pod_reclaim_token";
  std::ofstream(file) << "first\n";
  KubeApiConfig c{api.url(), "", "", 5s};
  c.token_file = file;
  auto evictor = NewKubeApiEvictor(c);
  EXPECT_TRUE(evictor->Evict("ml", "train-0").ok());
  std::ofstream(file) << "rotated\n";
  EXPECT_TRUE(evictor->Evict("ml", "train-0").ok());
  const std::vector<Seen> seen = api.seen();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].authorization, "Bearer first");
  EXPECT_EQ(seen[1].authorization, "Bearer rotated");
}

// Samples every 30 s for `minutes`: GPU 0 held by ml/idle and idle, GPU 1 held by ml/busy at 80 %,
// GPU 2 held by ml/guarded and idle.
std::vector<GpuSample> Samples(WallTime at) {
  std::vector<GpuSample> s = testing::IdleNode("n", 3, at);
  testing::AddWholeClaim(s[0], "ml/idle");
  testing::AddWholeClaim(s[1], "ml/busy");
  testing::AddWholeClaim(s[2], "ml/guarded");
  s[1].util_gpu_pct = Field<uint32_t>::Of(80);
  return s;
}

TEST(PodReclaim, AnIdlePodIsWarnedThenEvictedWithItsEvidence) {
  FakeApiServer api;
  auto evictor = NewKubeApiEvictor({api.url(), "sa-token", "", 5s});
  efficiency::IdleReclaimPolicy policy;
  policy.warn_after = 2min;
  policy.act_after = 4min;
  policy.exempt_interactive = false;
  PodReclaim reclaim(policy, efficiency::ActivityMetric::kGpuUtil, evictor.get());
  const WallTime t0 = WallTime(std::chrono::seconds(1'767'225'600));
  std::vector<efficiency::ReclaimRecord> records;
  for (int k = 0; k <= 10; ++k) {  // five minutes
    const WallTime at = t0 + std::chrono::seconds(30 * k);
    reclaim.Observe("n", Samples(at));
    for (auto& r : reclaim.Evaluate(at)) records.push_back(r);
  }
  EXPECT_EQ(reclaim.pods(), 3u);
  std::map<std::string, std::vector<efficiency::ReclaimAction>> by_pod;
  for (const auto& r : records) by_pod[r.job].push_back(r.action);
  EXPECT_EQ(by_pod.count("ml/busy"), 0u);
  ASSERT_EQ(by_pod["ml/idle"].size(), 2u);
  EXPECT_EQ(by_pod["ml/idle"][0], efficiency::ReclaimAction::kWarn);
  EXPECT_EQ(by_pod["ml/idle"][1], efficiency::ReclaimAction::kRequeue);
  for (const auto& r : records) {
    if (r.job == "ml/idle" && r.action == efficiency::ReclaimAction::kRequeue) {
      EXPECT_TRUE(r.result.ok()) << r.result.ToString();
      EXPECT_EQ(r.evidence.idle_gpus, 1);
      EXPECT_GE(r.evidence.samples, 8);
      EXPECT_EQ(r.evidence.max_activity_milli, 0);
      EXPECT_EQ(r.user, "ml");
    }
    if (r.job == "ml/guarded" && r.action == efficiency::ReclaimAction::kRequeue) {
      EXPECT_EQ(r.result.code(), StatusCode::kUnavailable);
    }
  }
  std::set<std::string> evicted;
  for (const Seen& s : api.seen()) evicted.insert(s.path);
  EXPECT_EQ(evicted, (std::set<std::string>{"/api/v1/namespaces/ml/pods/idle/eviction",
                                            "/api/v1/namespaces/ml/pods/guarded/eviction"}));
}

TEST(PodReclaim, WithoutAnApiItOnlyRecords) {
  efficiency::IdleReclaimPolicy policy;
  policy.warn_after = 1min;
  policy.act_after = 2min;
  policy.exempt_interactive = false;
  PodReclaim reclaim(policy, efficiency::ActivityMetric::kGpuUtil, nullptr);
  const WallTime t0 = WallTime(std::chrono::seconds(1'767'225'600));
  for (int k = 0; k <= 8; ++k) {
    reclaim.Observe("n", Samples(t0 + std::chrono::seconds(30 * k)));
    (void)reclaim.Evaluate(t0 + std::chrono::seconds(30 * k));
  }
  ASSERT_FALSE(reclaim.log().empty());
  for (const auto& r : reclaim.log()) EXPECT_TRUE(r.dry_run);
}

}  // namespace
}  // namespace stoker::k8s
