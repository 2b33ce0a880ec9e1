// The example inference service on the real data set (Debian's dataset-fashion-mnist, which
// scripts/install-deps.sh installs): loading, training, accuracy, the GEMM path, the weights
// file, and the HTTP service over a real socket with good and bad requests.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "inference/dataset.h"
#include "inference/gpu_mlp.h"
#include "inference/mlp.h"
#include "inference/service.h"

namespace stoker::inference {
namespace {

using nlohmann::json;

const Dataset& TrainSet() {
  static const Dataset d = [] {
    Result<Dataset> r = LoadFashionMnist(kDefaultDataDir, "train", 12000);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(*r) : Dataset{};
  }();
  return d;
}

const Dataset& TestSet() {
  static const Dataset d = [] {
    Result<Dataset> r = LoadFashionMnist(kDefaultDataDir, "t10k");
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(*r) : Dataset{};
  }();
  return d;
}

const Mlp& Trained() {
  static const Mlp m = [] {
    Mlp m(64);
    m.Train(TrainSet(), TrainOptions{.epochs = 2});
    return m;
  }();
  return m;
}

TEST(FashionMnist, LoadsTheDebianPackage) {
  ASSERT_EQ(TestSet().size(), 10000u);
  EXPECT_EQ(TestSet().images.size(), 10000u * kPixels);
  std::vector<int> per_class(kClasses, 0);
  for (uint8_t l : TestSet().labels) ++per_class[l];
  for (int c : per_class) EXPECT_EQ(c, 1000);  // the test set is balanced
  float lo = 1, hi = 0;
  for (float v : TestSet().images) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  EXPECT_EQ(lo, 0.0f);
  EXPECT_EQ(hi, 1.0f);
  EXPECT_EQ(LoadFashionMnist("/nonexistent", "t10k").status().code(), StatusCode::kNotFound);
}

TEST(Mlp, TrainedModelClassifiesTheTestSet) {
  Mlp untrained(64);
  EXPECT_LT(untrained.Accuracy(TestSet()), 0.2);
  const double acc = Trained().Accuracy(TestSet());
  EXPECT_GT(acc, 0.80) << "test accuracy " << acc;  // a linear model reaches ~0.84
}

TEST(Mlp, BatchedForwardEqualsOneRowAtATime) {
  const size_t n = 37;
  std::vector<float> batched(n * kClasses), single(kClasses), scratch;
  Trained().Forward(TestSet().images.data(), n, batched.data(), &scratch);
  for (size_t i = 0; i < n; ++i) {
    Trained().Forward(&TestSet().images[i * kPixels], 1, single.data(), &scratch);
    for (size_t j = 0; j < kClasses; ++j) {
      EXPECT_NEAR(batched[i * kClasses + j], single[j], 1e-4f);
    }
  }
}

TEST(Mlp, WeightsFileRoundTripsAndDamageIsRefused) {
  const auto dir = std::filesystem::temp_directory_path() / "stoker_mlp_test";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "w.bin").string();
  ASSERT_TRUE(Trained().Save(path).ok());
  Result<Mlp> back = Mlp::Load(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->w1(), Trained().w1());
  EXPECT_EQ(back->b2(), Trained().b2());
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 4);
  EXPECT_NE(Mlp::Load(path).status().message().find("truncated"), std::string::npos);
  std::ofstream(path) << "not weights";
  EXPECT_NE(Mlp::Load(path).status().message().find("not a Stoker MLP"), std::string::npos);
  EXPECT_EQ(Mlp::Load((dir / "absent").string()).status().code(), StatusCode::kNotFound);
}

TEST(GpuMlp, SaysWhyWhenItCannotRun) {
  std::string why;
  const bool available = GpuMlp::Available(&why);
  EXPECT_FALSE(why.empty());
  Result<std::unique_ptr<GpuMlp>> g = GpuMlp::Create(Trained());
  if (!available) {
    EXPECT_EQ(g.status().code(), StatusCode::kUnavailable);
    return;
  }
  // With a device (scripts/gpu-check.sh runs this there): the GPU agrees with the CPU.
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  const size_t n = 300;
  std::vector<float> cpu(n * kClasses), gpu(n * kClasses), scratch;
  Trained().Forward(TestSet().images.data(), n, cpu.data(), &scratch);
  ASSERT_TRUE((*g)->Forward(TestSet().images.data(), n, gpu.data()).ok());
  for (size_t i = 0; i < cpu.size(); ++i) EXPECT_NEAR(cpu[i], gpu[i], 1e-3f);
}

std::string Body(const std::vector<size_t>& rows, size_t width = kPixels) {
  json in = json::array();
  for (size_t r : rows) {
    in.push_back(std::vector<float>(
        TestSet().images.begin() + static_cast<std::ptrdiff_t>(r * kPixels),
        TestSet().images.begin() + static_cast<std::ptrdiff_t>(r * kPixels + width)));
  }
  return json{{"inputs", in}}.dump();
}

class ServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServiceOptions o;
    o.batching.max_batch_size = 32;
    o.batching.max_queue_delay = std::chrono::microseconds(500);
    o.max_rows = 16;
    o.device = ServiceOptions::Device::kCpu;
    o.test_accuracy = 0.5;
    auto s = InferenceService::Create(Trained(), o, &clock_);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    service_ = std::move(*s);
    http::ListenerOptions ho;
    ho.port = 0;
    ho.max_body_bytes = 1 << 20;
    server_ = std::make_unique<http::Listener>(service_.get(), ho);
    ASSERT_TRUE(server_->Start().ok());
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
  }
  void TearDown() override {
    server_->Stop();
    service_->Shutdown();
  }
  // Sends `request` on a fresh connection and returns what the server answers.
  std::string RawExchange(const std::string& request) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(server_->port()));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    std::string got;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
        ::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(request.size())) {
      char buf[4096];
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n > 0) got.assign(buf, static_cast<size_t>(n));
    }
    ::close(fd);
    return got;
  }
  httplib::Result Post(const std::string& body) {
    return client_->Post("/v1/predict", body, "application/json");
  }

  SystemClock clock_;
  std::unique_ptr<InferenceService> service_;
  std::unique_ptr<http::Listener> server_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(ServiceTest, PredictsOverHttpLikeTheModel) {
  httplib::Result r = Post(Body({0, 1, 2}));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  json j = json::parse(r->body);
  ASSERT_EQ(j["predictions"].size(), 3u);
  std::vector<float> logits(kClasses), scratch;
  for (size_t i = 0; i < 3; ++i) {
    Trained().Forward(&TestSet().images[i * kPixels], 1, logits.data(), &scratch);
    const size_t want = ArgMax(logits.data(), kClasses);
    EXPECT_EQ(j["predictions"][i]["class"].get<size_t>(), want);
    EXPECT_EQ(j["predictions"][i]["label"].get<std::string>(), kClassNames[want]);
  }
}

TEST_F(ServiceTest, ConcurrentClientsAreBatchedAndAllAnswered) {
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      httplib::Client c("127.0.0.1", server_->port());
      for (int i = 0; i < 10; ++i) {
        auto r = c.Post("/v1/predict", Body({static_cast<size_t>(t * 10 + i)}), "application/json");
        if (r && r->status == 200) ok.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok.load(), 80);
  auto m = client_->Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find("stoker_infer_batch_requests_total{model=\"fashion-mnist-mlp\"} 80"),
            std::string::npos)
      << m->body;
  EXPECT_NE(m->body.find("stoker_infer_model_test_accuracy"), std::string::npos);
}

TEST_F(ServiceTest, BadRequestsGetClear4xx) {
  struct Case {
    std::string body;
    int status;
    std::string says;
  };
  std::string nan_body = Body({0});
  nan_body.replace(nan_body.find("0.0"), 3, "NaN");
  std::string string_body = Body({0});
  string_body.replace(string_body.find("0.0"), 3, "\"x\"");
  std::string huge_body = Body({0});
  huge_body.replace(huge_body.find("0.0"), 3, "1e300");
  const std::vector<Case> cases = {
      {"{", 400, "not valid JSON"},
      {"[1,2]", 400, "must be a JSON object"},
      {"{}", 400, "inputs: required"},
      {R"({"inputs": []})", 400, "at least one row"},
      {Body({0}, 783), 400, "inputs[0]: expected 784 values (28 x 28), got 783"},
      {R"({"inputs": [5]})", 400, "inputs[0]: must be an array"},
      {nan_body, 400, "NaN and Infinity are not JSON numbers"},
      {string_body, 400, "not a number"},
      {huge_body, 400, "not a finite value"},
      {Body(std::vector<size_t>(17, 0)), 413, "17 rows exceed the limit of 16"},
      {R"({"inputs": [[0]], "extra": 1})", 400, "unknown field 'extra'"},
  };
  for (const Case& c : cases) {
    httplib::Result r = Post(c.body);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, c.status) << c.says << ": " << r->body;
    EXPECT_NE(r->body.find(c.says), std::string::npos) << r->body;
  }
  std::string timeout = Body({0});
  timeout.insert(timeout.size() - 1, ",\"timeout_ms\": 0");
  auto r = Post(timeout);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(r->body.find("timeout_ms"), std::string::npos);
  // Oversize bodies are refused by the HTTP layer from Content-Length, before they are read.
  EXPECT_NE(RawExchange("POST /v1/predict HTTP/1.1\r\nHost: t\r\nContent-Type: "
                        "application/json\r\nContent-Length: 2097152\r\n\r\n")
                .find("413"),
            std::string::npos);
  auto wrong = client_->Get("/v1/predict");
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 405);
  auto health = client_->Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(json::parse(health->body)["device"], "cpu");
}

}  // namespace
}  // namespace stoker::inference
