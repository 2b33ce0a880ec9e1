#include "sim/jobs_sim.h"

#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include "scheduler/queue/queue_policy.h"
#include "sim/jobs_partition.h"
#include "sim/jobs_report.h"
#include "sim/traces.h"
#include "support/trace_test.h"

namespace stoker::sim {
namespace {

constexpr SimMs kS = 1000;

SimJobSpec J(const std::string& name, SimMs submit_s, SimMs duration_s, int gpus,
             int priority = 0) {
  SimJobSpec s;
  s.name = name;
  s.submit_ms = submit_s * kS;
  s.duration_ms = duration_s * kS;
  s.gpus = gpus;
  s.priority = priority;
  return s;
}

// Checks the invariants of every run and records what happened.
class Recorder : public SimObserver {
 public:
  void OnJobEvent(SimMs now, JobEventKind kind, queue::JobId id, const JobsSim& sim) override {
    events.push_back({now, kind, id});
    EXPECT_LE(sim.allocated_gpus(), sim.total_gpus());
    EXPECT_EQ(sim.cluster().allocated_gpu_milli(), sim.allocated_gpus() * 1000);
    if (kind == JobEventKind::kStart) starts[id].push_back(now);
    if (kind == JobEventKind::kPreempt) ++preempts[id];
  }
  void OnAdvance(SimMs from, SimMs to, const JobsSim& sim) override {
    EXPECT_LT(from, to);
    EXPECT_LE(sim.allocated_gpus(), sim.total_gpus());
    int64_t held = 0;
    for (const SimJob& j : sim.jobs()) held += j.alloc_gpus;
    EXPECT_EQ(held, sim.allocated_gpus());
  }
  void OnReservation(SimMs now, queue::JobId id, SimMs at) override {
    EXPECT_GE(at, now);
    auto [it, inserted] = reservations.emplace(id, at);
    if (!inserted) it->second = std::min(it->second, at);
  }
  struct Ev {
    SimMs t;
    JobEventKind kind;
    queue::JobId id;
  };
  std::vector<Ev> events;
  std::map<queue::JobId, std::vector<SimMs>> starts;
  std::map<queue::JobId, int> preempts;
  std::map<queue::JobId, SimMs> reservations;  // earliest reservation seen per head job
};

struct Run {
  std::unique_ptr<JobsSim> sim;
  JobsSimReport report;
  Recorder rec;
};

std::unique_ptr<Run> Simulate(std::vector<SimJobSpec> jobs,
                              std::unique_ptr<queue::QueuePolicy> policy, ClusterShape cluster,
                              BackfillMode backfill = BackfillMode::kNone) {
  auto run = std::make_unique<Run>();
  JobsSimOptions opt;
  opt.cluster = cluster;
  opt.placement_policy = "bestfit";
  opt.backfill = backfill;
  auto sim = JobsSim::Create(std::move(jobs), std::move(policy), opt);
  EXPECT_TRUE(sim.ok()) << sim.status().ToString();
  if (!sim.ok()) return nullptr;
  run->sim = std::move(sim).value();
  run->sim->AddObserver(&run->rec);
  auto rep = run->sim->Run();
  EXPECT_TRUE(rep.ok()) << rep.status().ToString();
  if (rep.ok()) run->report = *rep;
  return run;
}

std::unique_ptr<Run> Simulate(std::vector<SimJobSpec> jobs, const std::string& queue,
                              ClusterShape cluster, BackfillMode backfill = BackfillMode::kNone) {
  auto policy = queue::CreateQueuePolicy(queue);
  EXPECT_TRUE(policy.ok());
  if (!policy.ok()) return nullptr;
  return Simulate(std::move(jobs), std::move(policy).value(), cluster, backfill);
}

SimMs StartOf(const Run& r, size_t i) { return r.sim->jobs()[i].first_start_ms; }
SimMs FinishOf(const Run& r, size_t i) { return r.sim->jobs()[i].finish_ms; }

TEST(JobsSim, FifoHeadOfLineBlocks) {
  // 1 node x 4 GPUs. A runs 100 s on 4 GPUs; B (4 GPUs) waits; C (1 GPU) arrives after B and
  // must wait behind it under strict FIFO.
  auto r = Simulate({J("A", 0, 100, 4), J("B", 1, 10, 4), J("C", 2, 10, 1)}, "fifo", {1, 4});
  ASSERT_TRUE(r);
  EXPECT_EQ(StartOf(*r, 1), 100 * kS);
  EXPECT_EQ(StartOf(*r, 2), 110 * kS);
  EXPECT_EQ(r->report.jobs_completed, 3);
  EXPECT_DOUBLE_EQ(r->report.makespan_s, 120.0);
  // JCTs 100, 109, 118 -> mean 109; queueing 0, 99, 108.
  EXPECT_DOUBLE_EQ(r->report.jct_s.mean, 109.0);
  EXPECT_DOUBLE_EQ(r->report.queue_delay_s.median, 99.0);
  // Used 4*100 + 4*10 + 1*10 GPU-s of 4*120 available.
  EXPECT_NEAR(r->report.idle_gpu_hours, (480.0 - 450.0) / 3600.0, 1e-9);
}

TEST(JobsSim, SjfRunsShortestWaitingJobFirst) {
  auto r = Simulate({J("A", 0, 100, 4), J("long", 1, 50, 4), J("short", 2, 5, 4)}, "sjf", {1, 4});
  ASSERT_TRUE(r);
  EXPECT_EQ(StartOf(*r, 2), 100 * kS);
  EXPECT_EQ(StartOf(*r, 1), 105 * kS);
  EXPECT_EQ(r->report.preemptions, 0);
}

TEST(JobsSim, SrtfPreemptsAndPreemptedJobKeepsItsProgress) {
  auto r = Simulate({J("long", 0, 100, 4), J("short", 10, 5, 4)}, "srtf", {1, 4});
  ASSERT_TRUE(r);
  EXPECT_EQ(StartOf(*r, 1), 10 * kS);
  EXPECT_EQ(FinishOf(*r, 1), 15 * kS);
  EXPECT_EQ(r->rec.preempts[0], 1);
  // 10 s done before the preemption, 90 s after the restart at 15 s.
  EXPECT_EQ(FinishOf(*r, 0), 105 * kS);
  EXPECT_EQ(r->sim->jobs()[0].attained_gpu_ms, 100 * kS * 4);
  EXPECT_DOUBLE_EQ(r->report.waiting_s.max, 5.0);
}

TEST(JobsSim, LasDemotesAndPreemptsOldJobs) {
  // Default thresholds: 3600 GPU-s, 36000 GPU-s. "old" (4 GPUs) crosses 3600 GPU-s at t = 900 s
  // and drops to queue 1; "new" (queue 0) arrives at 1000 s and takes the GPUs.
  auto r = Simulate({J("old", 0, 2000, 4), J("new", 1000, 100, 4)}, "las", {1, 4});
  ASSERT_TRUE(r);
  EXPECT_EQ(StartOf(*r, 1), 1000 * kS);
  EXPECT_EQ(r->rec.preempts[0], 1);
  EXPECT_EQ(FinishOf(*r, 0), 2100 * kS);
  // A job still in queue 0 is not preempted by a newcomer of the same queue (FIFO inside).
  auto r2 = Simulate({J("young", 0, 500, 4), J("new", 100, 100, 4)}, "las", {1, 4});
  ASSERT_TRUE(r2);
  EXPECT_EQ(r2->report.preemptions, 0);
  EXPECT_EQ(StartOf(*r2, 1), 500 * kS);
}

TEST(JobsSim, PriorityPreemptsLowerPriority) {
  auto r = Simulate({J("low", 0, 100, 4, 0), J("high", 10, 10, 4, 5), J("mid", 11, 10, 4, 1)},
                    "priority", {1, 4});
  ASSERT_TRUE(r);
  EXPECT_EQ(StartOf(*r, 1), 10 * kS);
  EXPECT_EQ(StartOf(*r, 2), 20 * kS);
  EXPECT_EQ(FinishOf(*r, 0), 120 * kS);
}

TEST(JobsSim, InfeasibleJobsAreReportedNotQueued) {
  auto r = Simulate({J("ok", 0, 10, 2), J("huge", 1, 10, 64), J("ok2", 2, 10, 8)}, "fifo", {2, 4});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->report.jobs_infeasible, 1);
  EXPECT_EQ(r->report.jobs_completed, 2);
  EXPECT_EQ(r->sim->jobs()[1].state, JobState::kInfeasible);
  // The 8-GPU job spans both 4-GPU nodes once the first job is done.
  EXPECT_EQ(StartOf(*r, 2), 10 * kS);
  EXPECT_EQ(r->sim->jobs()[2].placements.size(), 0u);  // released at the end
}

TEST(JobsSim, MultiNodeGangNeverSplitsAcrossTooFewNodes) {
  // 2 nodes x 4; a 1-GPU job on node 0 leaves 7 GPUs, but an 8-GPU gang needs both nodes whole.
  auto r = Simulate({J("small", 0, 50, 1), J("gang", 1, 10, 8)}, "fifo", {2, 4});
  ASSERT_TRUE(r);
  EXPECT_EQ(StartOf(*r, 1), 50 * kS);
}

TEST(JobsSim, EasyBackfillStartsShortJobsWithoutDelayingTheHead) {
  // 1 node x 4 GPUs. A holds 3 GPUs until 100 s. Head H needs 4 (reserved for 100 s). S (1 GPU,
  // 50 s) ends before the reservation and backfills; L (1 GPU, 500 s) would delay H and waits.
  auto r = Simulate({J("A", 0, 100, 3), J("H", 1, 10, 4), J("L", 2, 500, 1), J("S", 3, 50, 1)},
                    "fifo", {1, 4}, BackfillMode::kEasy);
  ASSERT_TRUE(r);
  EXPECT_EQ(StartOf(*r, 3), 3 * kS);    // backfilled
  EXPECT_EQ(StartOf(*r, 1), 100 * kS);  // head on time
  EXPECT_EQ(StartOf(*r, 2), 110 * kS);  // the long one after the head
  ASSERT_TRUE(r->rec.reservations.count(1));
  EXPECT_EQ(r->rec.reservations[1], 100 * kS);
  // Without backfill S waits behind H.
  auto strict = Simulate({J("A", 0, 100, 3), J("H", 1, 10, 4), J("L", 2, 500, 1), J("S", 3, 50, 1)},
                         "fifo", {1, 4});
  ASSERT_TRUE(strict);
  EXPECT_GT(StartOf(*strict, 3), 100 * kS);
}

TEST(JobsSim, EasyBackfillLongJobsOnSpareCapacity) {
  // 2 nodes x 4. A holds 4 GPUs of node 0 until 100 s; head H needs 6 GPUs (a whole node plus 2),
  // reserved at 100 s. L (2 GPUs, 1000 s) can run on node 1's spare GPUs beyond the reservation:
  // at 100 s node 0 is whole again and H still fits (4 on node 0 + 2 on node 1).
  auto r = Simulate({J("A", 0, 100, 4), J("H", 1, 10, 6), J("L", 2, 1000, 2), J("L2", 3, 1000, 1)},
                    "fifo", {2, 4}, BackfillMode::kEasy);
  ASSERT_TRUE(r);
  EXPECT_EQ(StartOf(*r, 2), 2 * kS);
  EXPECT_EQ(StartOf(*r, 1), 100 * kS);
  EXPECT_GT(StartOf(*r, 3), 100 * kS);  // a third long GPU on node 1 would have delayed H
}

// Every head job starts no later than the first reservation EASY made for it (FIFO: nothing can
// overtake the head, so a delay could only come from a backfilled job).
void ExpectReservationsHonoured(const Run& r) {
  ASSERT_FALSE(r.rec.reservations.empty());
  for (const auto& [id, at] : r.rec.reservations) {
    EXPECT_LE(r.sim->jobs()[id].first_start_ms, at) << "job " << r.sim->jobs()[id].spec.name;
  }
}

TEST(JobsSim, EasyNeverDelaysReservationOnItpSlice) {
  TraceLoadOptions o;
  o.limit = 400;
  STOKER_TRACE_OR_SKIP(path, "itp/cluster03.csv");
  auto trace = LoadTrace(path, TraceFormat::kItp, o);
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  auto r = Simulate(JobsFromTrace(*trace), "fifo", {8, 8}, BackfillMode::kEasy);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->report.jobs_completed + r->report.jobs_infeasible, 400);
  ExpectReservationsHonoured(*r);
  auto strict = Simulate(JobsFromTrace(*trace), "fifo", {8, 8});
  ASSERT_TRUE(strict);
  EXPECT_LT(r->report.queue_delay_s.mean, strict->report.queue_delay_s.mean);
}

TEST(JobsSim, ElasticJobStartsSmallerAndRunsLonger) {
  SimJobSpec e = J("elastic", 1, 100, 4);
  e.min_gpus = 2;
  auto r = Simulate({J("A", 0, 1000, 2), e}, "fifo", {1, 4});
  ASSERT_TRUE(r);
  EXPECT_EQ(StartOf(*r, 1), 1 * kS);
  EXPECT_EQ(FinishOf(*r, 1), 201 * kS);  // half the GPUs, twice the time
}

TEST(JobsSim, RejectsBadInput) {
  JobsSimOptions opt;
  opt.placement_policy = "bestfit";
  opt.cluster = {1, 16};
  EXPECT_FALSE(JobsSim::Create({}, std::make_unique<queue::FifoPolicy>(), opt).ok());
  opt.cluster = {1, 8};
  EXPECT_FALSE(JobsSim::Create({J("x", 0, 0, 1)}, std::make_unique<queue::FifoPolicy>(), opt).ok());
  SimJobSpec bad = J("x", 0, 1, 2);
  bad.min_gpus = 3;
  EXPECT_FALSE(JobsSim::Create({bad}, std::make_unique<queue::FifoPolicy>(), opt).ok());
  opt.placement_policy = "no-such-policy";
  EXPECT_EQ(JobsSim::Create({}, std::make_unique<queue::FifoPolicy>(), opt).status().code(),
            StatusCode::kNotFound);
}

// The 60-job Tiresias example end to end under every queue policy, on its own cluster (16x4,
// uncontended) and squeezed onto 2x4 GPUs (contended): every job completes, no GPU is
// over-allocated at any time (Recorder), JCT >= duration, and the policies differ as expected.
TEST(JobsSim, TiresiasSixtyJobsEndToEnd) {
  STOKER_TRACE_OR_SKIP(path, "tiresias/60_job.csv");
  auto trace = LoadTrace(path, TraceFormat::kTiresias);
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  ASSERT_TRUE(trace->cluster.has_value());
  for (const ClusterShape cluster : {*trace->cluster, ClusterShape{2, 4}}) {
    const bool contended = cluster.total_gpus() == 8;
    std::map<std::string, double> mean_jct;
    for (const std::string q : {"fifo", "sjf", "srtf", "las", "priority"}) {
      for (BackfillMode b : {BackfillMode::kNone, BackfillMode::kEasy}) {
        auto r = Simulate(JobsFromTrace(*trace), q, cluster, b);
        ASSERT_TRUE(r) << q;
        EXPECT_EQ(r->report.jobs_completed, 60) << q;
        EXPECT_EQ(r->report.jobs_infeasible, 0) << q;
        for (const SimJob& j : r->sim->jobs()) {
          ASSERT_EQ(j.state, JobState::kDone) << q << " " << j.spec.name;
          EXPECT_GE(j.finish_ms - j.spec.submit_ms, j.spec.duration_ms) << q << " " << j.spec.name;
          EXPECT_GE(j.first_start_ms, j.spec.submit_ms);
          EXPECT_EQ(j.attained_gpu_ms, j.spec.duration_ms * j.spec.gpus) << q << " " << j.spec.name;
        }
        EXPECT_GE(r->report.idle_gpu_hours, 0);
        EXPECT_LE(r->report.mean_allocation_pct, 100.0);
        if (b == BackfillMode::kNone) mean_jct[q] = r->report.jct_s.mean;
        if (contended && b == BackfillMode::kEasy && q == "fifo") ExpectReservationsHonoured(*r);
      }
    }
    if (contended) {
      EXPECT_LT(mean_jct["sjf"], mean_jct["fifo"]);
      EXPECT_LT(mean_jct["srtf"], mean_jct["fifo"]);
      // Every job stays below the default LAS thresholds (1 GPU-hour): LAS is FIFO without
      // head-of-line blocking (preemptive policies skip a job that does not fit).
      EXPECT_LT(mean_jct["las"], mean_jct["fifo"]);
      // With thresholds the jobs do cross, LAS preempts and beats FIFO.
      auto las = queue::LasPolicy::Create({200, 800});
      ASSERT_TRUE(las.ok());
      auto r = Simulate(JobsFromTrace(*trace), std::move(las).value(), cluster);
      ASSERT_TRUE(r);
      EXPECT_EQ(r->report.jobs_completed, 60);
      EXPECT_GT(r->report.preemptions, 0);
      EXPECT_LT(r->report.jct_s.mean, mean_jct["fifo"]);
    } else {
      // Nothing ever waits on 64 GPUs: every policy gives JCT == duration.
      EXPECT_DOUBLE_EQ(mean_jct["sjf"], mean_jct["fifo"]);
    }
  }
}

TEST(JobsReport, CsvJsonAndSvg) {
  auto r = Simulate({J("a", 0, 10, 1), J("huge", 0, 10, 99)}, "fifo", {1, 4});
  ASSERT_TRUE(r);
  std::ostringstream csv, json, svg, text;
  WriteJobsCsv({r->sim.get()}, csv);
  EXPECT_NE(csv.str().find("a,0.000,1,10.000,done,0.000,10.000,10.000,0.000,0.000,0"),
            std::string::npos)
      << csv.str();
  EXPECT_NE(csv.str().find("huge,0.000,99,10.000,infeasible"), std::string::npos);
  WriteReportJson(r->report, json);
  EXPECT_NE(json.str().find("\"infeasible\": 1"), std::string::npos) << json.str();
  WriteSvgPlot({r->sim.get()}, r->report, svg);
  EXPECT_EQ(svg.str().rfind("<svg", 0), 0u);
  EXPECT_NE(svg.str().find("</svg>"), std::string::npos);
  WriteReportText(r->report, text);
  EXPECT_NE(text.str().find("1 infeasible"), std::string::npos);
}

TEST(JobsPartition, EachGroupRunsOnItsOwnCluster) {
  std::istringstream vc("vc,node num\nA,1\nB,2\n");
  auto groups = ParseGroupClusters(vc, "vc.csv");
  ASSERT_TRUE(groups.ok()) << groups.status().ToString();
  std::istringstream csv(
      "timestamp,duration,num_gpus,gpu_time,cluster\n"
      "2017-10-01 00:00:00,100,4,400,A\n"
      "2017-10-01 00:00:10,100,4,400,A\n"
      "2017-10-01 00:00:10,100,8,800,B\n"
      "2017-10-01 00:00:20,100,1,100,C\n"
      "2017-12-01 00:00:00,100,1,100,A\n");
  auto trace = ParseTrace(csv, "p.csv", TraceFormat::kPhilly);
  ASSERT_TRUE(trace.ok());
  auto dropped = FilterTraceWindow(*trace, ParseUtcDateTime("2017-10-01").value(),
                                   ParseUtcDateTime("2017-11-30 23:59:00").value());
  ASSERT_TRUE(dropped.ok());
  EXPECT_EQ(*dropped, 1);
  JobsSimOptions opt;
  opt.placement_policy = "bestfit";
  auto run = RunPerGroup(*trace, *groups, 4, "fifo", opt);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->dropped_jobs, 1);  // group C has no cluster
  ASSERT_EQ(run->sims.size(), 2u);
  // A's second job waits for the first on A's single 4-GPU node although B has room.
  EXPECT_EQ(run->sims[0]->jobs()[1].first_start_ms, 100 * kS);
  std::vector<const JobsSim*> sims = {run->sims[0].get(), run->sims[1].get()};
  auto rep = SummariseRuns(sims);
  ASSERT_TRUE(rep.ok());
  EXPECT_EQ(rep->jobs_completed, 3);
  EXPECT_EQ(rep->total_gpus, 12);
  EXPECT_DOUBLE_EQ(rep->queue_delay_s.mean, 90.0 / 3);
  EXPECT_DOUBLE_EQ(rep->makespan_s, 200.0);
  // 400 + 400 + 800 GPU-s used out of 12 GPUs x 200 s.
  EXPECT_NEAR(rep->idle_gpu_hours, (2400.0 - 1600.0) / 3600.0, 1e-9);

  std::istringstream bad("vc,node num\nA,x\n");
  auto b = ParseGroupClusters(bad, "vc.csv");
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("vc.csv:2"), std::string::npos);
  std::istringstream itp("job_id,submission_time,duration,num_gpu\na,1,1,1\n");
  auto t = ParseTrace(itp, "i.csv", TraceFormat::kItp);
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(FilterTraceWindow(*t, int64_t{1}, std::nullopt).ok());
}

}  // namespace
}  // namespace stoker::sim
