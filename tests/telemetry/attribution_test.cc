#include "telemetry/attribution.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace stoker::telemetry {
namespace {

using namespace std::chrono_literals;

constexpr char kPodUid[] = "0f2d3c4e-1234-4a5b-8c9d-0123456789ab";

TEST(ParseCgroupTest, StokerScopeOnCgroupV2) {
  const auto a = ParseCgroupFile("0::/system.slice/stoker.slice/stoker-job-42.scope\n");
  EXPECT_EQ(a.job.kind, JobRef::Kind::kStoker);
  EXPECT_EQ(a.job.id, "42");
}

TEST(ParseCgroupTest, StokerScopeNameRoundTrips) {
  EXPECT_EQ(StokerJobScopeName("j-7"), "stoker-job-j-7.scope");
  const auto a = ParseCgroupFile("0::/stoker.slice/" + StokerJobScopeName("train.v2_3") + "\n");
  EXPECT_EQ(a.job.kind, JobRef::Kind::kStoker);
  EXPECT_EQ(a.job.id, "train.v2_3");
  EXPECT_FALSE(IsValidStokerJobId(""));
  EXPECT_FALSE(IsValidStokerJobId("a/b"));
  EXPECT_FALSE(IsValidStokerJobId("a\"b"));
}

TEST(ParseCgroupTest, SlurmCgroupV1WithUid) {
  const auto a = ParseCgroupFile(
      "12:pids:/slurm/uid_1000/job_1234/step_0/task_0\n"
      "11:memory:/slurm/uid_1000/job_1234/step_0/task_0\n"
      "4:devices:/slurm/uid_1000/job_1234/step_0\n"
      "1:name=systemd:/system.slice/slurmd.service\n");
  EXPECT_EQ(a.job.kind, JobRef::Kind::kSlurm);
  EXPECT_EQ(a.job.id, "1234");
  EXPECT_EQ(a.job.step, "0");
  ASSERT_TRUE(a.uid.has_value());
  EXPECT_EQ(*a.uid, 1000u);
}

TEST(ParseCgroupTest, SlurmCgroupV1WithNodeNameInRoot) {
  const auto a = ParseCgroupFile("5:cpuset:/slurm_node017/uid_5001/job_99/step_batch\n");
  EXPECT_EQ(a.job.kind, JobRef::Kind::kSlurm);
  EXPECT_EQ(a.job.step, "batch");
  EXPECT_EQ(a.job.id, "99");
}

TEST(ParseCgroupTest, SlurmCgroupV2) {
  const auto a = ParseCgroupFile("0::/system.slice/slurmstepd.scope/job_4242/step_0/user/task_0\n");
  EXPECT_EQ(a.job.kind, JobRef::Kind::kSlurm);
  EXPECT_EQ(a.job.id, "4242");
  EXPECT_FALSE(a.uid.has_value());
}

TEST(ParseCgroupTest, JobDirectoryOutsideSlurmIsNotSlurm) {
  const auto a = ParseCgroupFile("0::/user.slice/job_12/task\n");
  EXPECT_EQ(a.job.kind, JobRef::Kind::kNone);
}

TEST(ParseCgroupTest, KubernetesCgroupfsDriver) {
  const auto a = ParseCgroupFile(std::string("11:memory:/kubepods/burstable/pod") + kPodUid +
                                 "/4f1c2d3e4f5a6b7c8d9e\n");
  EXPECT_EQ(a.job.kind, JobRef::Kind::kKubernetes);
  EXPECT_EQ(a.job.id, kPodUid);
  EXPECT_EQ(a.job.container, "4f1c2d3e4f5a6b7c8d9e");
}

TEST(ParseCgroupTest, KubernetesCgroupfsGuaranteedQos) {
  const auto a = ParseCgroupFile(std::string("0::/kubepods/pod") + kPodUid + "/abc123\n");
  EXPECT_EQ(a.job.kind, JobRef::Kind::kKubernetes);
  EXPECT_EQ(a.job.id, kPodUid);
}

TEST(ParseCgroupTest, KubernetesSystemdDriverContainerd) {
  const auto a = ParseCgroupFile(
      "0::/kubepods.slice/kubepods-burstable.slice/"
      "kubepods-burstable-pod0f2d3c4e_1234_4a5b_8c9d_0123456789ab.slice/"
      "cri-containerd-abcdef0123456789.scope\n");
  EXPECT_EQ(a.job.kind, JobRef::Kind::kKubernetes);
  EXPECT_EQ(a.job.id, kPodUid);
  EXPECT_EQ(a.job.container, "abcdef0123456789");
}

TEST(ParseCgroupTest, KubernetesSystemdDriverGuaranteedDockerAndCrio) {
  auto a = ParseCgroupFile(
      "0::/kubepods.slice/kubepods-pod0f2d3c4e_1234_4a5b_8c9d_0123456789ab.slice/"
      "docker-feed.scope\n");
  EXPECT_EQ(a.job.id, kPodUid);
  EXPECT_EQ(a.job.container, "feed");
  a = ParseCgroupFile(
      "0::/kubepods.slice/kubepods-besteffort.slice/"
      "kubepods-besteffort-pod0f2d3c4e_1234_4a5b_8c9d_0123456789ab.slice/crio-beef.scope\n");
  EXPECT_EQ(a.job.container, "beef");
}

TEST(ParseCgroupTest, StokerWinsOverOtherMatches) {
  const auto a =
      ParseCgroupFile("4:devices:/slurm/uid_1/job_5/step_0\n0::/system.slice/stoker-job-9.scope\n");
  EXPECT_EQ(a.job.kind, JobRef::Kind::kStoker);
  EXPECT_EQ(a.job.id, "9");
}

TEST(ParseCgroupTest, PlainSessionsAndGarbageHaveNoJob) {
  for (const char* text :
       {"0::/user.slice/user-1000.slice/session-3.scope\n", "", "::::\n\n:", "no colons at all",
        "0::/kubepods/podshort/x\n", "0::/stoker-job-.scope\n", "0::/slurm/job_/step\n"}) {
    EXPECT_EQ(ParseCgroupFile(text).job.kind, JobRef::Kind::kNone) << text;
  }
}

TEST(FindEnvVarTest, FindsExactNamesOnly) {
  const char raw[] = "PATH=/bin\0SLURM_JOB_ID_X=1\0SLURM_JOB_ID=77\0EMPTY=\0";
  const std::string block(raw, sizeof(raw) - 1);
  EXPECT_EQ(FindEnvVar(block, "SLURM_JOB_ID").value_or(""), "77");
  EXPECT_EQ(FindEnvVar(block, "EMPTY").value_or("x"), "");
  EXPECT_FALSE(FindEnvVar(block, "PATH_X").has_value());
  EXPECT_FALSE(FindEnvVar(block, "SLURM").has_value());
}

class FakeProcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::path(::testing::TempDir()) /
            ("stoker_proc_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(root_);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  void WriteProc(uint32_t pid, const std::string& comm, const std::string& cgroup,
                 const std::string& environ, uint32_t uid) {
    const auto dir = root_ / std::to_string(pid);
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "comm") << comm << "\n";
    std::ofstream(dir / "cgroup") << cgroup;
    std::ofstream(dir / "environ", std::ios::binary) << environ;
    std::ofstream(dir / "status") << "Name:\t" << comm << "\nUid:\t" << uid << "\t" << uid << "\t"
                                  << uid << "\t" << uid << "\n";
  }
  std::filesystem::path root_;
};

TEST_F(FakeProcTest, CgroupThenEnvironmentThenNothing) {
  WriteProc(10, "python", "0::/system.slice/slurmstepd.scope/job_55/step_0\n", "", 0);
  WriteProc(11, "trainer", "0::/user.slice\n", std::string("A=1\0STOKER_JOB_ID=j-3\0", 22), 0);
  WriteProc(12, "bash", "0::/user.slice\n", std::string("SLURM_JOB_ID=8\0", 15), 0);
  WriteProc(13, "idle", "0::/user.slice\n", "", 0);
  // An srun step's process: its step from the environment; a made-up job id is not a job.
  WriteProc(15, "srun-task", "0::/user.slice\n",
            std::string("SLURM_JOB_ID=8\0SLURM_STEP_ID=2\0", 31), 0);
  WriteProc(16, "odd", "0::/user.slice\n", std::string("SLURM_JOB_ID=8;rm\0", 18), 0);
  ProcfsProcessInfo info(root_.string());
  ManualClock clock;
  Attributor attributor(&info, &clock);

  GpuSample s;
  for (uint32_t pid : {10u, 11u, 12u, 13u, 14u, 15u, 16u}) {
    s.processes.push_back(GpuProcess{.pid = pid});
  }
  attributor.Attribute(&s);
  EXPECT_EQ(s.processes[0].job.kind, JobRef::Kind::kSlurm);
  EXPECT_EQ(s.processes[0].job.id, "55");
  EXPECT_EQ(s.processes[0].job.step, "0");
  EXPECT_EQ(s.processes[0].name, "python");
  EXPECT_EQ(s.processes[0].job.user, info.UserName(0));
  EXPECT_EQ(s.processes[1].job.kind, JobRef::Kind::kStoker);
  EXPECT_EQ(s.processes[1].job.id, "j-3");
  EXPECT_EQ(s.processes[2].job.kind, JobRef::Kind::kSlurm);
  EXPECT_EQ(s.processes[2].job.id, "8");
  EXPECT_EQ(s.processes[2].job.step, "") << "the batch script's processes carry no step id";
  EXPECT_EQ(s.processes[5].job.id, "8");
  EXPECT_EQ(s.processes[5].job.step, "2");
  EXPECT_FALSE(s.processes[6].job.known());
  EXPECT_FALSE(s.processes[3].job.known());
  EXPECT_FALSE(s.processes[4].job.known());  // no such process
  EXPECT_EQ(s.processes[4].name, "");
}

TEST_F(FakeProcTest, CachesPerPidAndPrunesAfterTtl) {
  WriteProc(20, "a", "0::/stoker-job-1.scope\n", "", 0);
  ProcfsProcessInfo info(root_.string());
  ManualClock clock;
  Attributor attributor(&info, &clock, 10s);
  EXPECT_EQ(attributor.AttributePid(20).id, "1");
  // The cache answers even after the process directory changes...
  WriteProc(20, "a", "0::/stoker-job-2.scope\n", "", 0);
  EXPECT_EQ(attributor.AttributePid(20).id, "1");
  EXPECT_EQ(attributor.cache_size(), 1u);
  // ...until the entry goes unused for longer than the ttl.
  clock.Advance(11s);
  attributor.Prune();
  EXPECT_EQ(attributor.cache_size(), 0u);
  EXPECT_EQ(attributor.AttributePid(20).id, "2");
}

TEST(ProcfsProcessInfoTest, ReadsOwnProcess) {
  ProcfsProcessInfo info;
  auto facts = info.Lookup(static_cast<uint32_t>(::getpid()));
  ASSERT_TRUE(facts.ok()) << facts.status().ToString();
  EXPECT_FALSE(facts->name.empty());
  ASSERT_TRUE(facts->uid.has_value());
  EXPECT_EQ(*facts->uid, static_cast<uint32_t>(::getuid()));
  EXPECT_FALSE(facts->cgroup.empty());
  EXPECT_EQ(info.UserName(4000000000u), "4000000000");
}

}  // namespace
}  // namespace stoker::telemetry
