#include "runner/runner.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "support/enum_tables.h"
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

class RunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // These tests may run as root (CI does): jobs then run as root, which a runner refuses
    // unless its policy allows it (RootJobsAreRefusedByDefault).
    runner_ = std::make_unique<Runner>(RunnerOptions{.state_dir = dir_,
                                                     .shim_argv = {STOKER_TEST_SHIM},
                                                     .grace = std::chrono::seconds(5),
                                                     .users = {.allow_root = true}},
                                       &clock_);
  }
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

  stoker::testing::TempDir tmp_{"runner"};
  // The runner's state folder (the runner creates it); the tests' own files go beside it, in
  // tmp_, so that nothing is left behind.
  const std::string dir_ = tmp_.path() + "/state";
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

TEST_F(RunnerTest, MigUuidAndNoDevicesForACpuOnlyJob) {
  LaunchSpec a{.job_id = "a", .argv = {"/bin/sh", "-c", "echo ${CUDA_VISIBLE_DEVICES-unset}"}};
  a.cuda_visible_devices = "MIG-1234";
  // A CPU-only job sees no GPU: CUDA_VISIBLE_DEVICES is set, empty, and its own value loses.
  LaunchSpec b{.job_id = "b",
               .argv = {"/bin/sh", "-c", "echo \"[${CUDA_VISIBLE_DEVICES-unset}]\""}};
  b.env = {{"CUDA_VISIBLE_DEVICES", "0,1,2,3,4,5,6,7"}};
  ASSERT_TRUE(runner_->Launch(a).ok());
  ASSERT_TRUE(runner_->Launch(b).ok());
  WaitExit("a");
  WaitExit("b");
  EXPECT_EQ(Slurp(runner_->JobDir("a") + "/stdout.log"), "MIG-1234\n");
  EXPECT_EQ(Slurp(runner_->JobDir("b") + "/stdout.log"), "[]\n");
}

TEST_F(RunnerTest, JobStartsWithOnlyStdinStdoutStderrOpen) {
  // Descriptors this process holds without close-on-exec (a listener, as the API's was) must
  // not reach the job.
  const int leaked = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(leaked, 3);
  const int leaked_file = ::open("/dev/null", O_RDONLY);
  ASSERT_GE(leaked_file, 3);
  LaunchSpec spec{.job_id = "fds", .argv = {"/bin/sh", "-c", "ls -l /proc/$$/fd"}};
  ASSERT_TRUE(runner_->Launch(spec).ok());
  WaitExit("fds");
  ::close(leaked);
  ::close(leaked_file);
  std::istringstream out(Slurp(runner_->JobDir("fds") + "/stdout.log"));
  std::map<int, std::string> fds;
  std::string line;
  while (std::getline(out, line)) {
    const size_t arrow = line.find(" -> ");
    if (arrow == std::string::npos) continue;  // "total 0"
    const size_t name = line.rfind(' ', arrow - 1);
    fds[std::stoi(line.substr(name + 1, arrow - name - 1))] = line.substr(arrow + 4);
  }
  ASSERT_EQ(fds.size(), 3u) << Slurp(runner_->JobDir("fds") + "/stdout.log");
  EXPECT_EQ(fds[0], "/dev/null");
  EXPECT_EQ(fds[1], fs::canonical(runner_->JobDir("fds") + "/stdout.log").string());
  EXPECT_EQ(fds[2], fs::canonical(runner_->JobDir("fds") + "/stderr.log").string());
}

TEST_F(RunnerTest, JobsGetACleanDocumentedEnvironment) {
  ::setenv("STOKER_TEST_LEAK", "from the agent", 1);
  LaunchSpec spec{.job_id = "env", .argv = {"/usr/bin/env"}};
  spec.env = {{"FOO", "bar"}};
  ASSERT_TRUE(runner_->Launch(spec).ok());
  WaitExit("env");
  ::unsetenv("STOKER_TEST_LEAK");
  std::map<std::string, std::string> env;
  std::istringstream out(Slurp(runner_->JobDir("env") + "/stdout.log"));
  std::string line;
  while (std::getline(out, line)) {
    const size_t eq = line.find('=');
    if (eq != std::string::npos) env[line.substr(0, eq)] = line.substr(eq + 1);
  }
  EXPECT_EQ(env["PATH"], std::string(kJobPath));
  EXPECT_EQ(env["FOO"], "bar");
  EXPECT_EQ(env["STOKER_JOB_ID"], "env");
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "");
  EXPECT_EQ(env.count("STOKER_TEST_LEAK"), 0u);
  std::set<std::string> names;
  for (const auto& [k, v] : env) names.insert(k);
  EXPECT_EQ(names, (std::set<std::string>{"CUDA_VISIBLE_DEVICES", "FOO", "HOME", "LANG", "LOGNAME",
                                          "PATH", "SHELL", "STOKER_JOB_ID", "USER"}));
}

TEST_F(RunnerTest, NulBytesAreRefused) {
  LaunchSpec spec{.job_id = "nul", .argv = {"/bin/true"}};
  spec.workdir = std::string("/tmp\0/../root", 13);
  EXPECT_EQ(runner_->Launch(spec).code(), StatusCode::kInvalidArgument);
  spec.workdir = "";
  spec.argv = {std::string("/bin/tr\0ue", 10)};
  EXPECT_EQ(runner_->Launch(spec).code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(fs::exists(runner_->JobDir("nul")));
}

TEST(RunnerPolicy, RootJobsAreRefusedByDefault) {
  if (::geteuid() != 0) GTEST_SKIP() << "only a root runner switches users";
  const stoker::testing::TempDir tmp("runner_policy");
  const std::string dir = tmp.path() + "/state";
  ManualClock clock;
  Runner runner(dir, {STOKER_TEST_SHIM}, &clock);
  for (const std::string user : {"root", ""}) {
    const Status s = runner.Launch({.job_id = "r", .argv = {"/bin/true"}, .user = user});
    EXPECT_EQ(s.code(), StatusCode::kPermissionDenied) << user;
    EXPECT_NE(s.message().find("root"), std::string::npos) << s.ToString();
  }
  // A system account (daemon is uid 1 on Debian) is refused unless named.
  EXPECT_EQ(runner.Launch({.job_id = "d", .argv = {"/bin/true"}, .user = "daemon"}).code(),
            StatusCode::kPermissionDenied);
  EXPECT_FALSE(fs::exists(dir + "/r"));
  Runner allowing(
      RunnerOptions{
          .state_dir = dir, .shim_argv = {STOKER_TEST_SHIM}, .users = {.allow = {"daemon"}}},
      &clock);
  EXPECT_TRUE(allowing.Launch({.job_id = "d", .argv = {"/bin/true"}, .user = "daemon"}).ok());
  EXPECT_EQ(allowing.Launch({.job_id = "r", .argv = {"/bin/true"}, .user = "root"}).code(),
            StatusCode::kPermissionDenied);
  // The daemon's job is still being written by its shim: let it end before cleaning up.
  for (int i = 0; i < 500 && allowing.Get("d")->phase != JobPhase::kExited; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
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

// `setsid sh -c 'exec sleep N' &` leaves the job's process group and session; cancel must stop
// it anyway (through the job's cgroup, or the shim's subreaper tracking without one).
TEST_F(RunnerTest, CancelStopsProcessesThatLeftTheGroup) {
  const std::string pid_file = dir_ + "_escaped.pid";
  LaunchSpec spec{.job_id = "e",
                  .argv = {"/bin/sh", "-c",
                           "setsid sh -c 'echo $$ > " + pid_file + "; exec sleep 97' & sleep 100"}};
  ASSERT_TRUE(runner_->Launch(spec).ok());
  WaitRunning("e");
  for (int i = 0; i < 500 && Slurp(pid_file).empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const int escaped = std::stoi(Slurp(pid_file));
  ASSERT_EQ(::kill(escaped, 0), 0);
  ASSERT_NE(::getpgid(escaped), WaitRunning("e").pid) << "the test's process left the group";
  ASSERT_TRUE(runner_->Cancel("e").ok());
  JobStatus st = WaitExit("e");
  EXPECT_EQ(st.signal, SIGTERM);
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    gone = ::kill(escaped, 0) != 0;
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(gone) << "process " << escaped << " outlived its cancelled job";
  fs::remove(pid_file);
}

// A job's main process ends; what it left running in the background is stopped with it.
TEST_F(RunnerTest, ProcessesLeftBehindEndWithTheJob) {
  const std::string pid_file = dir_ + "_daemon.pid";
  LaunchSpec spec{.job_id = "d",
                  .argv = {"/bin/sh", "-c",
                           "setsid sh -c 'echo $$ > " + pid_file + "; exec sleep 98' & sleep 0.2"}};
  ASSERT_TRUE(runner_->Launch(spec).ok());
  JobStatus st = WaitExit("d");
  EXPECT_EQ(st.exit_code, 0);
  const int daemon = std::stoi(Slurp(pid_file));
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    gone = ::kill(daemon, 0) != 0;
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(gone) << "process " << daemon << " outlived its job";
  fs::remove(pid_file);
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

TEST(EnumNames, TheJobPhaseTableRoundTrips) { stoker::testing::ExpectRoundTrip(kJobPhaseNames); }

}  // namespace
}  // namespace stoker::runner
