// `stoker device-plugin` and `stoker agent --kubelet-pod-resources` run in stoker-k8s, the
// program beside `stoker` that links gRPC (src/cli/kubelet.h): `stoker` replaces itself by it on
// the same command line, and says so clearly when it is missing.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "process_util.h"
#include "support/temp_dir.h"

namespace stoker::e2e {
namespace {
namespace fs = std::filesystem;

class KubeletProgramTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      WaitExit(pid_);
    }
  }
  std::string Log() const {
    std::ifstream in(dir_ + "/log");
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  // Waits until the log says `what`; returns the program the process runs then.
  std::string WaitForLog(const std::string& what) {
    for (int i = 0; i < 200 && Log().find(what) == std::string::npos; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::error_code ec;
    return fs::read_symlink("/proc/" + std::to_string(pid_) + "/exe", ec).filename().string();
  }

  stoker::testing::TempDir tmp_{"kubelet"};
  const std::string dir_ = tmp_.path();
  pid_t pid_ = -1;
};

TEST_F(KubeletProgramTest, DevicePluginRunsInTheProgramBesideStoker) {
  fs::create_directories(dir_ + "/plugins");
  pid_ = Spawn({STOKER_BIN, "device-plugin", "--simulate", "h100-mig-node", "--device-plugin-dir",
                dir_ + "/plugins", "--mps-pipe-dir", dir_ + "/pipe", "--mps-shm-dir", dir_ + "/shm",
                "--dev-root", dir_},
               {}, dir_ + "/log");
  // No kubelet here: the plugin serves its resources and retries the registration.
  EXPECT_EQ(WaitForLog("serving"), "stoker-k8s") << Log();
  EXPECT_NE(Log().find("stoker.io/gpu"), std::string::npos) << Log();
  ::kill(pid_, SIGTERM);
  EXPECT_EQ(WaitExit(pid_), 0) << Log();
  pid_ = -1;
}

TEST_F(KubeletProgramTest, AgentWithPodResourcesRunsInTheProgramBesideStoker) {
  const int port = FreePort();
  pid_ = Spawn({STOKER_BIN, "agent", "--simulate", "h100-mig-node", "--listen",
                "127.0.0.1:" + std::to_string(port), "--kubelet-pod-resources",
                dir_ + "/pod-resources.sock"},
               {}, dir_ + "/log");
  EXPECT_EQ(WaitForLog("PodResources"), "stoker-k8s") << Log();
  ::kill(pid_, SIGTERM);
  EXPECT_EQ(WaitExit(pid_), 0) << Log();
  pid_ = -1;
}

TEST_F(KubeletProgramTest, StokerAloneSaysTheProgramIsMissing) {
  // `stoker` and stoker-full (which runs these commands: src/cli/programs.h), without stoker-k8s.
  const std::string alone = dir_ + "/stoker";
  fs::copy_file(STOKER_BIN, alone);
  fs::permissions(alone, fs::perms::owner_all);
  fs::copy_file(STOKER_FULL_BIN, dir_ + "/stoker-full");
  fs::permissions(dir_ + "/stoker-full", fs::perms::owner_all);
  CmdResult r = e2e::Run(alone + " device-plugin --simulate h100-mig-node 2>&1");
  EXPECT_EQ(r.exit_code, 3) << r.out;  // unavailable
  EXPECT_NE(r.out.find("cannot run " + dir_ + "/stoker-k8s"), std::string::npos) << r.out;
  r = e2e::Run(alone + " agent --kubelet-pod-resources " + dir_ + "/pr.sock 2>&1");
  EXPECT_EQ(r.exit_code, 3) << r.out;
  EXPECT_NE(r.out.find("stoker agent: cannot run " + dir_ + "/stoker-k8s"), std::string::npos)
      << r.out;
  // Every other command works without it.
  EXPECT_EQ(e2e::Run(alone + " --version").exit_code, 0);
}

}  // namespace
}  // namespace stoker::e2e
