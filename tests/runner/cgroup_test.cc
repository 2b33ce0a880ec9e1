// Job cgroups on this machine's real cgroup v2 hierarchy: the whole tree killed on cancel, the
// GPU device filter on real device nodes, limits where the controllers are delegated. Each test
// says why it skips where the machine does not delegate cgroups to it.
#include "runner/cgroup.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "runner/runner.h"
#include "support/temp_dir.h"

namespace stoker::runner {
namespace {
namespace fs = std::filesystem;

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class CgroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    node_dir_ = "stoker-test-" + std::to_string(::getpid()) + "-" + name;
    support_ = ProbeCgroups("", node_dir_);
    if (!support_.enabled()) GTEST_SKIP() << "no delegated cgroup v2 here: " << support_.why_not;
    RunnerOptions o;
    o.state_dir = dir_;
    o.shim_argv = {STOKER_TEST_SHIM};
    o.users.allow_root = true;
    o.cgroups = support_;
    runner_ = std::make_unique<Runner>(o, &clock_);
  }
  void TearDown() override {
    runner_.reset();
    if (support_.enabled()) ::rmdir(support_.parent.c_str());
  }
  JobStatus WaitExit(const std::string& id) {
    for (int waited = 0; waited < 10000; waited += 20) {
      auto st = runner_->Get(id);
      if (st.ok() && st->phase == JobPhase::kExited) return *st;
      runner_->Poll();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ADD_FAILURE() << "job " << id << " did not exit";
    return {};
  }

  std::string node_dir_;
  CgroupSupport support_;
  stoker::testing::TempDir tmp_{"cgroup"};
  const std::string dir_ = tmp_.path() + "/state";  // the runner's; the tests' files beside it
  ManualClock clock_;
  std::unique_ptr<Runner> runner_;
};

TEST_F(CgroupTest, EveryProcessOfTheJobIsInItsCgroupAndDiesOnCancel) {
  if (!support_.kill) GTEST_SKIP() << support_.Describe();
  const std::string pid_file = dir_ + "_escaped.pid";
  LaunchSpec spec{.job_id = "7",
                  .argv = {"/bin/sh", "-c",
                           "setsid sh -c 'echo $$ > " + pid_file + "; exec sleep 96' & sleep 100"}};
  ASSERT_TRUE(runner_->Launch(spec).ok());
  const std::string cg = support_.parent + "/stoker-job-7.scope";
  for (int i = 0; i < 500 && Slurp(pid_file).empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const int escaped = std::stoi(Slurp(pid_file));
  // The job's processes can run before the shim has recorded the job's pid; until then Cancel
  // answers "still starting; retry" (the agent retries). Wait for the record.
  for (int i = 0; i < 500; ++i) {
    if (auto st = runner_->Get("7"); st.ok() && st->pid > 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // The escaped process is in the job's cgroup (the convention the agent attributes by).
  EXPECT_NE(Slurp("/proc/" + std::to_string(escaped) + "/cgroup").find("stoker-job-7.scope"),
            std::string::npos);
  EXPECT_GE(CgroupPids(cg).size(), 2u);
  ASSERT_TRUE(runner_->Cancel("7").ok());
  WaitExit("7");
  EXPECT_NE(::kill(escaped, 0), 0) << "process " << escaped << " outlived its job";
  EXPECT_FALSE(fs::exists(cg)) << "the job's cgroup is removed when it ends";
  fs::remove(pid_file);
}

TEST_F(CgroupTest, AJobCanOpenOnlyItsOwnGpus) {
  if (!support_.devices) GTEST_SKIP() << support_.Describe();
  // Device nodes with the NVIDIA driver's numbers. Without a driver, opening an allowed one fails
  // with ENXIO ("No such device or address"); the filter refuses the others with EPERM.
  const std::string dev = dir_ + "_dev";
  fs::create_directories(dev);
  for (auto [name, minor] : {std::pair{"nvidia0", 0}, {"nvidia1", 1}, {"nvidiactl", 255}}) {
    if (::mknod((dev + "/" + name).c_str(), S_IFCHR | 0666, makedev(195, minor)) != 0) {
      fs::remove_all(dev);
      GTEST_SKIP() << "cannot make device nodes here (mknod needs CAP_MKNOD)";
    }
  }
  const std::string probe = "for d in nvidia0 nvidia1 nvidiactl; do (: < " + dev +
                            "/$d) 2>&1 | sed \"s|^.*: |$d: |\"; done";
  LaunchSpec gpu1{.job_id = "g", .argv = {"/bin/sh", "-c", probe}};
  gpu1.cuda_visible_devices = "1";
  gpu1.gpu_minors = {1};
  LaunchSpec cpu{.job_id = "c", .argv = {"/bin/sh", "-c", probe}};
  ASSERT_TRUE(runner_->Launch(gpu1).ok());
  ASSERT_TRUE(runner_->Launch(cpu).ok());
  WaitExit("g");
  WaitExit("c");
  EXPECT_EQ(Slurp(runner_->JobDir("g") + "/stdout.log"),
            "nvidia0: Operation not permitted\nnvidia1: No such device or address\n"
            "nvidiactl: No such device or address\n");
  EXPECT_EQ(Slurp(runner_->JobDir("c") + "/stdout.log"),
            "nvidia0: Operation not permitted\nnvidia1: Operation not permitted\n"
            "nvidiactl: No such device or address\n");
  fs::remove_all(dev);
}

TEST_F(CgroupTest, LimitsAreWrittenWhereTheControllersAreDelegated) {
  if (!support_.cpu && !support_.memory) {
    GTEST_SKIP() << "neither the cpu nor the memory controller reaches job cgroups here: "
                 << support_.Describe();
  }
  LaunchSpec spec{.job_id = "l", .argv = {"/bin/sleep", "5"}, .cpu_milli = 1500, .memory_mib = 256};
  ASSERT_TRUE(runner_->Launch(spec).ok());
  const std::string cg = support_.parent + "/stoker-job-l.scope";
  if (support_.cpu) {
    EXPECT_EQ(Slurp(cg + "/cpu.max"), "150000 100000\n");
  }
  if (support_.memory) {
    EXPECT_EQ(Slurp(cg + "/memory.max"), std::to_string(256 << 20) + "\n");
  }
  ASSERT_TRUE(runner_->Cancel("l").ok());
  WaitExit("l");
}

TEST(CgroupProbe, OffAndNonCgroupDirectoriesAreSaidPlainly) {
  const CgroupSupport off = ProbeCgroups("off", "x");
  EXPECT_FALSE(off.enabled());
  EXPECT_EQ(off.Describe(), "no cgroups (disabled by configuration): process tracking only");
  const CgroupSupport tmp = ProbeCgroups(fs::temp_directory_path().string(), "x");
  EXPECT_FALSE(tmp.enabled());
  EXPECT_NE(tmp.why_not.find("is not a cgroup v2 directory"), std::string::npos) << tmp.why_not;
}

}  // namespace
}  // namespace stoker::runner
