// JS1 summaries and the jobcomp spool.
#include "slurm/jobstats.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace stoker::slurm {
namespace {

GpuSample Sample(uint32_t index, const std::string& job, uint32_t util, uint64_t used,
                 uint64_t energy_mj) {
  GpuSample s;
  s.id.index = index;
  s.id.uuid = "GPU-" + std::to_string(index);
  s.util_gpu_pct = Field<uint32_t>::Of(util);
  s.memory_total_bytes = Field<uint64_t>::Of(uint64_t{80} << 30);
  s.memory_used_bytes = Field<uint64_t>::Of(used);
  s.energy_mj = Field<uint64_t>::Of(energy_mj);
  s.gpm.sm_active = Field<double>::Of(util / 200.0);
  s.gpm.tensor_active = Field<double>::Of(0.1);
  GpuProcess p;
  p.pid = 1;
  p.job.kind = JobRef::Kind::kSlurm;
  p.job.id = job;
  s.processes.push_back(p);
  return s;
}

TEST(SlurmJobStats, JS1RoundTripsAndHasTheJobstatsShape) {
  JobStatsCollector c({2.5, "USD", 60});
  c.Observe("g1", Sample(0, "12", 80, uint64_t{10} << 30, 1'000'000));
  c.Observe("g1", Sample(0, "12", 40, uint64_t{20} << 30, 4'000'000));
  c.Observe("g1", Sample(1, "12", 0, uint64_t{1} << 30, 0));
  c.Observe("g1", Sample(2, "99", 100, 0, 0));  // another job's GPU
  SlurmJob j;
  j.id = 12;
  j.cpus = 4;
  j.nodes = {"g1"};
  j.start_time = 1000;
  const nlohmann::json s = c.Summary(j, 1000 + 3600);
  EXPECT_EQ(s["gpus"], 2);
  EXPECT_EQ(s["total_time"], 3600);
  const auto& n = s["nodes"]["g1"];
  EXPECT_EQ(n["cpus"], 4);
  EXPECT_EQ(n["gpu_utilization"]["0"], 60.0);
  EXPECT_EQ(n["gpu_utilization"]["1"], 0.0);
  EXPECT_EQ(n["gpu_used_memory"]["0"], uint64_t{20} << 30);
  EXPECT_EQ(n["gpu_total_memory"]["1"], uint64_t{80} << 30);
  EXPECT_EQ(n["gpu_sm_active"]["0"], 30.0);
  EXPECT_EQ(n["gpu_tensor_active"]["0"], 10.0);
  EXPECT_EQ(n["gpu_energy_joules"]["0"], 3000);
  EXPECT_EQ(s["cost"], 5.0);  // 2 GPUs x 1 h x 2.5
  auto text = EncodeJS1(s);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(text->rfind("JS1:", 0), 0u);
  EXPECT_EQ(text->find('\n'), std::string::npos);
  auto back = DecodeJS1(*text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, s);
}

TEST(SlurmJobStats, MalformedJS1IsRefusedWithReason) {
  auto good = EncodeJS1({{"gpus", 1}}).value();
  struct Case {
    std::string text, expect;
  };
  for (const Case& c : std::vector<Case>{
           {"", "prefix"},
           {"JS2:abcd", "prefix"},
           {"JS1:abc", "base64 length"},
           {"JS1:@@@@", "invalid base64"},
           {"JS1:aGVsbG8h", "gzip"},                   // "hello!" is not gzip
           {good.substr(0, good.size() - 8), "gzip"},  // truncated stream
       }) {
    auto r = DecodeJS1(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << r.status().ToString();
  }
  // A gzip bomb (2 MiB of zeros) is refused by size.
  auto bomb = EncodeJS1(nlohmann::json{{"x", std::string(size_t{2} << 20, '0')}}).value();
  auto r = DecodeJS1(bomb);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("exceeds 1 MiB"), std::string::npos);
}

std::string Block(const std::vector<std::string>& kv) {
  std::string b;
  for (const auto& s : kv) b += s + '\0';
  return b;
}

TEST(SlurmJobComp, ParsesTheHookEnvironmentAndNamesBadFields) {
  auto r = ParseJobCompEnv(Block({"JOBID=42", "UID=1000", "USERNAME=alice", "START=100", "END=7300",
                                  "JOBSTATE=COMPLETED", "PARTITION=gpu", "NODES=g[1-2]"}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->job, 42u);
  EXPECT_EQ(r->user, "alice");
  EXPECT_EQ(r->nodes, (std::vector<std::string>{"g1", "g2"}));
  EXPECT_EQ(r->elapsed_s(), 7200);
  EXPECT_DOUBLE_EQ(JobCost(*r, 4, 2.0), 16.0);
  auto bad = ParseJobCompEnv(Block({"JOBID=x1", "UID=0"}));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "jobcomp: JOBID: 'x1' is not an integer");
  auto zero = ParseJobCompEnv(Block({"JOBID=0", "UID=0"}));
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.status().message(), "jobcomp: JOBID: '0' is out of range 1..4294967295");
  auto missing = ParseJobCompEnv(Block({"JOBID=3", "UID=0", "START=1", "END=2"}));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("JOBSTATE is missing"), std::string::npos);
}

TEST(SlurmJobComp, SpoolKeepsBadFilesAside) {
  const std::string dir = ::testing::TempDir() + "jobcomp-spool-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/5.env", std::ios::binary)
      << Block({"JOBID=5", "UID=0", "START=1", "END=61", "JOBSTATE=COMPLETED"});
  std::ofstream(dir + "/6.env", std::ios::binary) << Block({"JOBID=six"});
  std::ofstream(dir + "/.7.tmp", std::ios::binary) << "partial";
  int bad = 0;
  auto recs = ReadJobCompSpool(dir, &bad);
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0].job, 5u);
  EXPECT_EQ(bad, 1);
  EXPECT_FALSE(std::filesystem::exists(dir + "/5.env"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/6.env.bad"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/.7.tmp"));  // in-flight files are not read
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace stoker::slurm
