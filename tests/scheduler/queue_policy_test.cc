#include "scheduler/queue/queue_policy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "scheduler/queue/job_queue.h"

namespace stoker::queue {
namespace {

JobView Job(JobId id, TimeMs submit, TimeMs duration, int gpus = 1) {
  JobView v;
  v.id = id;
  v.submit_ms = submit;
  v.duration_ms = duration;
  v.remaining_ms = duration;
  v.gpus = gpus;
  v.min_gpus = gpus;
  return v;
}

std::vector<JobId> Order(const QueuePolicy& p, std::vector<JobView> jobs) {
  JobQueue q(p);
  for (const auto& j : jobs) EXPECT_TRUE(q.Push(j));
  std::vector<JobId> out;
  for (const auto& e : q) out.push_back(e.key.id);
  return out;
}

TEST(QueuePolicy, FifoOrdersBySubmission) {
  FifoPolicy p;
  EXPECT_EQ(Order(p, {Job(1, 30, 1), Job(2, 10, 100), Job(3, 20, 5)}),
            (std::vector<JobId>{2, 3, 1}));
  EXPECT_FALSE(p.preemptive());
}

TEST(QueuePolicy, SjfOrdersByDurationThenSubmission) {
  SjfPolicy p;
  EXPECT_EQ(Order(p, {Job(1, 0, 50), Job(2, 10, 5), Job(3, 5, 50), Job(4, 1, 5)}),
            (std::vector<JobId>{4, 2, 1, 3}));
  EXPECT_FALSE(p.preemptive());
}

TEST(QueuePolicy, SrtfOrdersByRemaining) {
  SrtfPolicy p;
  JobView a = Job(1, 0, 100);
  a.remaining_ms = 3;  // long job nearly done
  EXPECT_EQ(Order(p, {a, Job(2, 1, 10)}), (std::vector<JobId>{1, 2}));
  EXPECT_TRUE(p.preemptive());
}

TEST(QueuePolicy, PriorityLargerFirstThenFifo) {
  PriorityPolicy p;
  JobView hi = Job(1, 50, 1);
  hi.priority = 5;
  JobView lo = Job(2, 0, 1);
  lo.priority = -1;
  EXPECT_EQ(Order(p, {lo, Job(3, 10, 1), hi, Job(4, 5, 1)}), (std::vector<JobId>{1, 4, 3, 2}));
}

TEST(QueuePolicy, LasDiscretisedQueues) {
  auto las = LasPolicy::Create({10, 100});
  ASSERT_TRUE(las.ok());
  const LasPolicy& p = **las;
  EXPECT_EQ(p.QueueIndex(0), 0);
  EXPECT_EQ(p.QueueIndex(9'999), 0);
  EXPECT_EQ(p.QueueIndex(10'000), 1);
  EXPECT_EQ(p.QueueIndex(100'000), 2);
  // Attained service decides the queue; FIFO inside a queue regardless of duration.
  JobView old_big = Job(1, 0, 1000, 4);
  old_big.attained_gpu_ms = 40'000;  // 4 GPUs x 10 s: queue 1
  JobView young = Job(2, 100, 5000);
  JobView younger = Job(3, 200, 1);
  EXPECT_EQ(Order(p, {old_big, younger, young}), (std::vector<JobId>{2, 3, 1}));
  // Next threshold for a job in queue 1 is 100 GPU-s; none past the last one.
  EXPECT_EQ(p.NextKeyChangeGpuMs(old_big), 100'000);
  old_big.attained_gpu_ms = 200'000;
  EXPECT_EQ(p.NextKeyChangeGpuMs(old_big), std::nullopt);
  EXPECT_FALSE(LasPolicy::Create({10, 10}).ok());
  EXPECT_FALSE(LasPolicy::Create({0}).ok());
}

TEST(QueuePolicy, Registry) {
  for (auto name : QueuePolicyNames()) {
    auto p = CreateQueuePolicy(name);
    ASSERT_TRUE(p.ok()) << name;
    EXPECT_EQ((*p)->Name(), name);
  }
  auto bad = CreateQueuePolicy("lifo");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("fifo"), std::string::npos);
}

TEST(JobQueue, PushRemoveContains) {
  FifoPolicy p;
  JobQueue q(p);
  EXPECT_TRUE(q.Push(Job(7, 1, 1)));
  EXPECT_FALSE(q.Push(Job(7, 1, 1)));
  EXPECT_TRUE(q.Contains(7));
  EXPECT_TRUE(q.Remove(7));
  EXPECT_FALSE(q.Remove(7));
  EXPECT_TRUE(q.empty());
}

// KeyOrder gives what a JobQueue gives when every job is pushed in turn and the queue walked:
// for every policy, jobs listed in id order or not, some listed twice with another view.
TEST(JobQueue, KeyOrderIsTheOrderOfAQueueTheJobsWerePushedInto) {
  std::mt19937 rng(7);
  for (const char* name : {"fifo", "sjf", "srtf", "las", "priority"}) {
    auto policy = CreateQueuePolicy(name);
    ASSERT_TRUE(policy.ok());
    for (int round = 0; round < 20; ++round) {
      std::vector<JobView> jobs;
      for (JobId id = 1; id <= 200; ++id) {
        JobView j;
        j.id = id;
        j.submit_ms = static_cast<TimeMs>(rng() % 50);  // ties broken by id
        j.duration_ms = j.remaining_ms = static_cast<TimeMs>(1 + rng() % 1000);
        j.attained_gpu_ms = static_cast<int64_t>(rng() % 5000);
        j.gpus = j.min_gpus = static_cast<int>(1 + rng() % 8);
        j.priority = static_cast<int>(rng() % 3);
        jobs.push_back(j);
      }
      if (round % 2 == 1) {  // out of id order, a tenth of the jobs listed again
        for (int k = 0; k < 20; ++k) {
          JobView again = jobs[rng() % jobs.size()];
          again.submit_ms = static_cast<TimeMs>(rng() % 50);
          again.priority = static_cast<int>(rng() % 3);
          jobs.push_back(again);
        }
        std::shuffle(jobs.begin(), jobs.end(), rng);
      }
      JobQueue q(**policy);
      for (const JobView& j : jobs) q.Push(j);
      std::vector<JobId> walked;
      for (const auto& e : q) walked.push_back(e.key.id);
      EXPECT_EQ(KeyOrder(**policy, jobs), walked) << name << ", round " << round;
      EXPECT_EQ(walked.size(), 200u);
    }
  }
}

TEST(PlanPreemption, ShorterWaitingJobDisplacesLongestRunning) {
  SrtfPolicy p;
  JobQueue waiting(p);
  waiting.Push(Job(10, 5, 20, 4));
  // 8 GPUs, both in use: job 1 (remaining 100) and job 2 (remaining 50).
  std::vector<RunningEntry> running = {{p.Key(Job(1, 0, 100, 4)), 1, 4},
                                       {p.Key(Job(2, 0, 50, 4)), 2, 4}};
  PreemptionPlan plan = PlanPreemption(running, waiting, 8);
  EXPECT_EQ(plan.preempt, (std::vector<JobId>{1}));
  EXPECT_EQ(plan.start, (std::vector<JobId>{10}));
}

TEST(PlanPreemption, NoPreemptionWhenWaitingJobsRankLower) {
  SrtfPolicy p;
  JobQueue waiting(p);
  waiting.Push(Job(10, 5, 500, 4));
  std::vector<RunningEntry> running = {{p.Key(Job(1, 0, 100, 4)), 1, 4},
                                       {p.Key(Job(2, 0, 50, 4)), 2, 4}};
  PreemptionPlan plan = PlanPreemption(running, waiting, 8);
  EXPECT_TRUE(plan.preempt.empty());
  EXPECT_TRUE(plan.start.empty());
}

TEST(PlanPreemption, SkipsWaitingJobsLargerThanQuota) {
  SrtfPolicy p;
  JobQueue waiting(p);
  waiting.Push(Job(10, 5, 1, 16));  // never fits in 8
  waiting.Push(Job(11, 6, 2, 2));
  std::vector<RunningEntry> running = {{p.Key(Job(1, 0, 100, 8)), 1, 8}};
  PreemptionPlan plan = PlanPreemption(running, waiting, 8);
  EXPECT_EQ(plan.preempt, (std::vector<JobId>{1}));
  EXPECT_EQ(plan.start, (std::vector<JobId>{11}));
}

}  // namespace
}  // namespace stoker::queue
