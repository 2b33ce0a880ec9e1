// Job-end records in the real cluster: the JS1 summary in AdminComment while the job runs,
// and the jobcomp/script hook (scripts/slurm-jobcomp.sh, configured by the fixture) spooling
// the finished job for the cost ledger.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "cluster_util.h"
#include "slurm/client.h"
#include "slurm/jobstats.h"

namespace stoker::slurm {
namespace {

using testing::kConf;
using testing::kDir;
using testing::Sh;
using testing::WaitFor;

TEST(SlurmJobStatsCluster, SummaryLandsInAdminCommentAndJobEndReachesTheSpool) {
  CommandSlurmClient client({kConf, "", std::chrono::seconds(30)});
  const uint32_t id = static_cast<uint32_t>(std::stoul(
      Sh("cd " + kDir + " && sbatch --parsable -o /dev/null --gres=gpu:2 --wrap 'sleep 8'")));
  auto find = [&]() -> SlurmJob {
    auto jobs = client.Jobs();
    if (jobs.ok()) {
      for (const SlurmJob& j : *jobs) {
        if (j.id == id) return j;
      }
    }
    return {};
  };
  ASSERT_TRUE(WaitFor([&] { return find().Running(); }));
  const SlurmJob job = find();
  ASSERT_EQ(job.gpu_indices.size(), 1u);
  JobStatsCollector c({3.0, "USD", 0});
  for (int32_t idx : job.gpu_indices[0]) {
    GpuSample s;
    s.id.index = static_cast<uint32_t>(idx);
    s.util_gpu_pct = Field<uint32_t>::Of(50);
    s.memory_total_bytes = Field<uint64_t>::Of(uint64_t{80} << 30);
    s.memory_used_bytes = Field<uint64_t>::Of(uint64_t{4} << 30);
    GpuProcess p;
    p.job.kind = JobRef::Kind::kSlurm;
    p.job.id = std::to_string(id);
    s.processes.push_back(p);
    c.Observe(job.nodes[0], s);
  }
  const int64_t now = job.start_time + 2;
  ASSERT_EQ(c.Publish(client, {job}, now), 1);
  const SlurmJob after = find();
  ASSERT_EQ(after.admin_comment.rfind("JS1:", 0), 0u) << after.admin_comment;
  auto decoded = DecodeJS1(after.admin_comment);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(*decoded, c.Summary(job, now));
  EXPECT_EQ((*decoded)["gpus"], 2);
  EXPECT_EQ((*decoded)["nodes"][job.nodes[0]]["gpu_utilization"].size(), 2u);

  // The job ends: slurmctld runs the jobcomp hook, which spools the record.
  const std::string spool = kDir + "/jobcomp";
  ASSERT_TRUE(
      WaitFor([&] { return std::ifstream(spool + "/" + std::to_string(id) + ".env").good(); },
              std::chrono::seconds(40)));
  int bad = 0;
  std::vector<JobCompRecord> recs = ReadJobCompSpool(spool, &bad);
  EXPECT_EQ(bad, 0);
  const JobCompRecord* mine = nullptr;
  for (const auto& r : recs) {
    if (r.job == id) mine = &r;
  }
  ASSERT_NE(mine, nullptr);
  EXPECT_EQ(mine->state, "COMPLETED");
  EXPECT_EQ(mine->nodes, job.nodes);
  EXPECT_GE(mine->elapsed_s(), 7);
  EXPECT_GT(JobCost(*mine, 2, 3.0), 0.0);
  // Slurm 22.05 refuses AdminComment on a finished job, which is why the summary is written
  // while the job runs.
  EXPECT_FALSE(client.SetAdminComment(id, "JS1:late").ok());
}

}  // namespace
}  // namespace stoker::slurm
