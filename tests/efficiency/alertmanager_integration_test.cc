// Starts a real prometheus-alertmanager (Debian package) on a loopback port with a temporary
// storage dir and config, fires an alert through the engine's webhook notifier, and reads it
// back from Alertmanager's API. Skipped (not failed) where the binary is not installed.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "efficiency/alerts.h"
#include "integration/http_poster.h"
#include "test_util.h"

namespace stoker::efficiency {
namespace {

using namespace std::chrono_literals;

constexpr const char* kBinary = "/usr/bin/prometheus-alertmanager";

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

class AlertmanagerProcess {
 public:
  bool Start() {
    dir_ = std::filesystem::temp_directory_path() /
           ("stoker-am-" + std::to_string(getpid()) + "-" + std::to_string(FreePort()));
    std::filesystem::create_directories(dir_ / "data");
    std::ofstream(dir_ / "alertmanager.yml")
        << std::ifstream(std::string(STOKER_SOURCE_DIR) + "/deploy/alertmanager/alertmanager.yml")
               .rdbuf();
    port_ = FreePort();
    const std::string config = "--config.file=" + (dir_ / "alertmanager.yml").string();
    const std::string storage = "--storage.path=" + (dir_ / "data").string();
    const std::string listen = "--web.listen-address=127.0.0.1:" + std::to_string(port_);
    pid_ = fork();
    if (pid_ == 0) {
      const std::string log = (dir_ / "am.log").string();
      freopen(log.c_str(), "w", stdout);
      freopen(log.c_str(), "a", stderr);
      execl(kBinary, kBinary, config.c_str(), storage.c_str(), listen.c_str(),
            "--cluster.listen-address=", static_cast<char*>(nullptr));
      _exit(127);
    }
    for (int i = 0; i < 100; ++i) {  // up to 10 s
      if (HttpGet(url() + "/-/ready", 1s).ok()) return true;
      std::this_thread::sleep_for(100ms);
    }
    return false;
  }
  ~AlertmanagerProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::string Log() const {
    std::ifstream in(dir_ / "am.log");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

 private:
  std::filesystem::path dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

TEST(AlertmanagerIntegrationTest, FiredAlertArrivesAndResolutionIsDelivered) {
  if (access(kBinary, X_OK) != 0)
    GTEST_SKIP() << kBinary << " not installed (scripts/install-deps.sh)";
  AlertmanagerProcess am;
  ASSERT_TRUE(am.Start()) << am.Log();

  AlertingConfig cfg;
  cfg.rules = BuiltinRules();
  AlertEngine engine(cfg, ActivityMetric::kAuto);
  WebhookPoster poster;
  AlertmanagerNotifier notifier(poster, am.url(), 4h + 15min);
  engine.AddNotifier(&notifier);

  // Real wall time: Alertmanager drops alerts whose endsAt lies in the past.
  const WallTime now = std::chrono::time_point_cast<Duration>(std::chrono::system_clock::now());
  auto lost = testing::Sample("GPU-it-1", now, 0, "job-42");
  lost.health = GpuHealth::kLost;
  engine.ObserveGpu(lost, {{"hostname", "node-a"}});
  std::vector<Status> errors;
  engine.Evaluate(now, &errors);
  ASSERT_TRUE(errors.empty()) << errors[0].ToString();

  auto body = HttpGet(am.url() + "/api/v2/alerts?active=true");
  ASSERT_TRUE(body.ok()) << body.status().ToString();
  auto alerts = nlohmann::json::parse(*body);
  ASSERT_EQ(alerts.size(), 1u) << *body;
  EXPECT_EQ(alerts[0]["labels"]["alertname"], "GpuLost");
  EXPECT_EQ(alerts[0]["labels"]["grade"], "red");
  EXPECT_EQ(alerts[0]["labels"]["uuid"], "GPU-it-1");
  EXPECT_EQ(alerts[0]["labels"]["hostname"], "node-a");
  EXPECT_EQ(alerts[0]["labels"]["job"], "job-42");
  EXPECT_EQ(alerts[0]["status"]["state"], "active");

  // The GPU comes back: the engine sends the resolution and Alertmanager stops listing it.
  // Alertmanager counts an alert resolved once its endsAt has passed, so the recovery sample
  // carries the current real time.
  std::this_thread::sleep_for(20ms);
  const WallTime later = std::chrono::time_point_cast<Duration>(std::chrono::system_clock::now());
  auto ok = testing::Sample("GPU-it-1", later, 50, "job-42");
  engine.ObserveGpu(ok, {{"hostname", "node-a"}});
  engine.Evaluate(later, &errors);
  ASSERT_TRUE(errors.empty()) << errors[0].ToString();
  body = HttpGet(am.url() + "/api/v2/alerts?active=true");
  ASSERT_TRUE(body.ok());
  EXPECT_EQ(nlohmann::json::parse(*body).size(), 0u) << *body;
}

TEST(AlertmanagerIntegrationTest, UnreachableAlertmanagerIsAnErrorNotACrash) {
  WebhookPoster poster(1s);
  AlertmanagerNotifier notifier(poster, "http://127.0.0.1:" + std::to_string(FreePort()), 1h);
  Alert a;
  a.labels = {{"alertname", "X"}};
  Status s = notifier.Notify({a}, testing::T0());
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace stoker::efficiency
