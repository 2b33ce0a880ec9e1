// The `stoker` binary: `stoker smi` and `stoker agent` against the built-in fake-NVML scenarios.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

extern char** environ;

namespace {

const std::string kStoker = std::string(STOKER_BINARY_DIR) + "/bin/stoker";

struct CliRun {
  int rc = -1;
  std::string out;
};

CliRun RunStoker(const std::string& args) {
  CliRun r;
  FILE* p = popen((kStoker + " " + args + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  const int status = pclose(p);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST(AgentCliTest, SmiJsonOnSimulatedMigNode) {
  const CliRun r = RunStoker("smi --simulate h100-mig-node --json");
  ASSERT_EQ(r.rc, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["simulated"], true);
  EXPECT_EQ(j["hostname"], "gpu-h100-07");
  ASSERT_FALSE(j["gpus"].empty());
  size_t mig = 0;
  bool tensor_value = false;
  for (const auto& g : j["gpus"]) {
    mig += g["mig_instances"].size();
    EXPECT_EQ(g["fields"]["memory_total_bytes"]["state"], "value");
    tensor_value |= g["fields"]["tensor_active_ratio"]["state"] == "value";
  }
  EXPECT_GE(mig, 3u);
  EXPECT_TRUE(tensor_value) << "GPM ratios need the second sample smi takes";
}

TEST(AgentCliTest, SmiTableShowsSimulatedBannerAndJobs) {
  const CliRun r = RunStoker("smi --simulate h100-mig-node");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("SIMULATED"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("MIG 3g.40gb"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("stoker:42"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("alice"), std::string::npos) << r.out;
}

// The table's layout, byte for byte: the files are what `stoker smi` printed before the table
// moved onto the shared formatter (src/cli/table.h), and what it must keep printing.
TEST(AgentCliTest, SmiTableIsLaidOutAsBefore) {
  for (const std::string scenario : {"h100-mig-node", "faulty-node"}) {
    const CliRun r = RunStoker("smi --simulate " + scenario);
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_EQ(r.out, ReadFile(std::string(STOKER_SOURCE_DIR) + "/tests/agent/testdata/smi-" +
                              scenario + ".txt"))
        << scenario;
  }
}

TEST(AgentCliTest, SimulateListAndBadInput) {
  CliRun r = RunStoker("smi --simulate list");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("h100-mig-node"), std::string::npos);
  EXPECT_NE(r.out.find("faulty-node"), std::string::npos);
  r = RunStoker("smi --simulate no-such-scenario");
  EXPECT_EQ(r.rc, 4) << r.out;
  r = RunStoker("agent --simulate faulty-node --interval 50ms");
  EXPECT_EQ(r.rc, 2) << r.out;
  r = RunStoker("agent --simulate faulty-node --listen nonsense:port");
  EXPECT_EQ(r.rc, 2) << r.out;
  r = RunStoker("smi --nvml-lib /nonexistent/libnvidia-ml.so.1");
  EXPECT_EQ(r.rc, 3) << r.out;
}

TEST(AgentCliTest, AgentServesFaultyNodeMetrics) {
  const std::string log = ::testing::TempDir() + "/stoker_agent_cli_" + std::to_string(getpid());
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  std::vector<std::string> args = {kStoker,    "agent",       "--simulate", "faulty-node",
                                   "--listen", "127.0.0.1:0", "--interval", "200ms"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, kStoker.c_str(), &fa, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&fa);

  int port = 0;
  const std::regex re("listening on http://127\\.0\\.0\\.1:([0-9]+)/metrics");
  for (int i = 0; i < 200 && port == 0; ++i) {
    std::smatch m;
    const std::string text = ReadFile(log);
    if (std::regex_search(text, m, re)) port = std::stoi(m[1]);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_GT(port, 0) << ReadFile(log);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  httplib::Client client("127.0.0.1", port);
  auto metrics = client.Get("/metrics");
  auto health = client.Get("/healthz");
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_NE(metrics->body.find("stoker_agent_info{"), std::string::npos);
  EXPECT_NE(metrics->body.find("simulated=\"true\""), std::string::npos);
  EXPECT_NE(metrics->body.find("hostname=\"gpu-a100-03\""), std::string::npos);
  EXPECT_NE(metrics->body.find("jobid=\"88412\",user=\"frank\""), std::string::npos)
      << metrics->body;
  EXPECT_EQ(metrics->body.find("stoker_gpu_power_watts{gpu=\"3\""), std::string::npos);
  ASSERT_TRUE(health);
  EXPECT_EQ(nlohmann::json::parse(health->body)["simulated"], true);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << ReadFile(log);
  std::filesystem::remove(log);
}

}  // namespace
