#include "runner/runner.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace stoker::runner {
namespace {
namespace fs = std::filesystem;

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class RunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() /
            ("stoker_runner_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    fs::remove_all(dir_);
    runner_ = std::make_unique<Runner>(dir_, std::vector<std::string>{STOKER_TEST_SHIM}, &clock_,
                                       std::chrono::seconds(5));
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Real processes take real time: poll (wall clock) until the job exits.
  JobStatus WaitExit(const std::string& id, int timeout_ms = 10000) {
    for (int waited = 0; waited < timeout_ms; waited += 20) {
      auto st = runner_->Get(id);
      if (st.ok() && st->phase == JobPhase::kExited) return *st;
      runner_->Poll();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ADD_FAILURE() << "job " << id << " did not exit";
    return {};
  }
  JobStatus WaitRunning(const std::string& id) {
    for (int waited = 0; waited < 10000; waited += 20) {
      auto st = runner_->Get(id);
      if (st.ok() && st->phase == JobPhase::kRunning) return *st;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ADD_FAILURE() << "job " << id << " did not start";
    return {};
  }

  std::string dir_;
  ManualClock clock_;
  std::unique_ptr<Runner> runner_;
};

TEST_F(RunnerTest, EnvironmentDevicesWorkdirAndLogs) {
  LaunchSpec spec;
  spec.job_id = "7";
  spec.argv = {"/bin/sh", "-c",
               "echo job=$STOKER_JOB_ID cuda=$CUDA_VISIBLE_DEVICES foo=$FOO pwd=$(pwd); "
               "echo oops >&2; exit 3"};
  spec.env = {{"FOO", "bar"}, {"STOKER_JOB_ID", "spoofed"}};
  spec.workdir = "/tmp";
  spec.cuda_visible_devices = "0,2";
  ASSERT_TRUE(runner_->Launch(spec).ok());
  JobStatus st = WaitExit("7");
  EXPECT_EQ(st.exit_code, 3);
  EXPECT_FALSE(st.signal.has_value());
  EXPECT_EQ(Slurp(runner_->JobDir("7") + "/stdout.log"), "job=7 cuda=0,2 foo=bar pwd=/tmp\n");
  EXPECT_EQ(Slurp(runner_->JobDir("7") + "/stderr.log"), "oops\n");
  EXPECT_EQ(runner_->Launch(spec).code(), StatusCode::kAlreadyExists);
  ASSERT_TRUE(runner_->Forget("7").ok());
  EXPECT_FALSE(fs::exists(runner_->JobDir("7")));
}

TEST_F(RunnerTest, MigUuidAndUnsetDevices) {
  LaunchSpec a{.job_id = "a", .argv = {"/bin/sh", "-c", "echo ${CUDA_VISIBLE_DEVICES-unset}"}};
  a.cuda_visible_devices = "MIG-1234";
  LaunchSpec b{.job_id = "b", .argv = {"/bin/sh", "-c", "echo ${CUDA_VISIBLE_DEVICES-unset}"}};
  ASSERT_TRUE(runner_->Launch(a).ok());
  ASSERT_TRUE(runner_->Launch(b).ok());
  WaitExit("a");
  WaitExit("b");
  EXPECT_EQ(Slurp(runner_->JobDir("a") + "/stdout.log"), "MIG-1234\n");
  EXPECT_EQ(Slurp(runner_->JobDir("b") + "/stdout.log"), "unset\n");
}

TEST_F(RunnerTest, ExecFailureIsReported) {
  LaunchSpec spec{.job_id = "x", .argv = {"/nonexistent/binary"}};
  ASSERT_TRUE(runner_->Launch(spec).ok());
  JobStatus st = WaitExit("x");
  EXPECT_EQ(st.exit_code, 127);
  EXPECT_NE(st.error.find("exec /nonexistent/binary"), std::string::npos) << st.error;
}

TEST_F(RunnerTest, BadWorkdirIsReported) {
  LaunchSpec spec{.job_id = "w", .argv = {"/bin/true"}, .workdir = "/does/not/exist"};
  ASSERT_TRUE(runner_->Launch(spec).ok());
  JobStatus st = WaitExit("w");
  EXPECT_EQ(st.exit_code, 127);
  EXPECT_NE(st.error.find("chdir"), std::string::npos) << st.error;
}

TEST_F(RunnerTest, CancelSendsTermToTheGroup) {
  LaunchSpec spec{.job_id = "c", .argv = {"/bin/sleep", "100"}};
  ASSERT_TRUE(runner_->Launch(spec).ok());
  WaitRunning("c");
  ASSERT_TRUE(runner_->Cancel("c").ok());
  JobStatus st = WaitExit("c");
  EXPECT_EQ(st.signal, SIGTERM);
}

TEST_F(RunnerTest, CancelWithItsOwnGraceWaitsThatLong) {
  // A preemption names its grace: the runner's default (5 s here) does not apply.
  const std::string ready = dir_ + "_ready";
  LaunchSpec spec{.job_id = "g",
                  .argv = {"/bin/sh", "-c", "trap '' TERM; echo 1 > " + ready + "; sleep 100"}};
  ASSERT_TRUE(runner_->Launch(spec).ok());
  WaitRunning("g");
  for (int i = 0; i < 500 && Slurp(ready).empty(); ++i) {  // the trap is set
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  fs::remove(ready);
  ASSERT_TRUE(runner_->Cancel("g", std::chrono::seconds(60)).ok());
  ASSERT_TRUE(runner_->Cancel("g").ok());  // a repeated cancel keeps the first deadline
  clock_.Advance(std::chrono::seconds(30));
  runner_->Poll();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_NE(runner_->Get("g")->phase, JobPhase::kExited) << "killed before its 60 s grace";
  clock_.Advance(std::chrono::seconds(31));
  runner_->Poll();
  EXPECT_EQ(WaitExit("g").signal, SIGKILL);
}

TEST_F(RunnerTest, CancelEscalatesToKillForTheWholeGroup) {
  // The job ignores SIGTERM (and so does its background child, which inherits the disposition).
  const std::string child_pid_file = dir_ + "_child.pid";
  LaunchSpec spec{.job_id = "k",
                  .argv = {"/bin/sh", "-c",
                           "trap '' TERM; sleep 100 & echo $! > " + child_pid_file + "; wait"}};
  ASSERT_TRUE(runner_->Launch(spec).ok());
  WaitRunning("k");
  for (int i = 0; i < 500 && Slurp(child_pid_file).empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const int child = std::stoi(Slurp(child_pid_file));
  ASSERT_TRUE(runner_->Cancel("k").ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  runner_->Poll();
  EXPECT_NE(runner_->Get("k")->phase, JobPhase::kExited) << "TERM is ignored; grace not over";
  clock_.Advance(std::chrono::seconds(6));
  runner_->Poll();  // grace over: SIGKILL to the group
  JobStatus st = WaitExit("k");
  EXPECT_EQ(st.signal, SIGKILL);
  // The background child was in the group and died too (it is not our child: kill(0) says ESRCH
  // once init reaped it).
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    gone = ::kill(child, 0) != 0;
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(gone);
  fs::remove(child_pid_file);
}

TEST_F(RunnerTest, StateSurvivesANewRunnerInstance) {
  LaunchSpec spec{.job_id = "s", .argv = {"/bin/sh", "-c", "sleep 0.3; exit 5"}};
  ASSERT_TRUE(runner_->Launch(spec).ok());
  // "Agent restart": drop the runner while the job runs; a new one finds the job and its end.
  runner_.reset();
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  runner_ = std::make_unique<Runner>(dir_, std::vector<std::string>{STOKER_TEST_SHIM}, &clock_);
  auto all = runner_->Poll();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].job_id, "s");
  JobStatus st = WaitExit("s");
  EXPECT_EQ(st.exit_code, 5);
}

TEST_F(RunnerTest, RejectsBadIds) {
  EXPECT_EQ(runner_->Launch({.job_id = "../x", .argv = {"/bin/true"}}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(runner_->Launch({.job_id = "ok"}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(runner_->Cancel("nope").code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace stoker::runner
