// The pass over a cluster the caller keeps (PassInput::kept): the walk the dynamic simulator
// runs. Strict order, skipping, elastic gangs, and EASY backfill behind a reservation.

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "scheduler/pass/pass.h"
#include "scheduler/queue/queue_policy.h"
#include "scheduler/registry.h"

namespace stoker::pass {
namespace {

class KeptClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto model = cluster_.models().Intern("gpu");
    ASSERT_TRUE(model.ok());
    for (int n = 0; n < 2; ++n) {
      scheduler::NodeSpec spec;
      spec.name = "node-" + std::to_string(n);
      spec.cpu_milli = 64'000;
      spec.memory_mib = 1 << 20;
      spec.num_gpus = 4;
      spec.gpu_model = *model;
      ASSERT_TRUE(cluster_.AddNode(spec).ok());
    }
    auto policy = scheduler::CreatePlacementPolicy("stoker", scheduler::PolicyConfig{});
    ASSERT_TRUE(policy.ok());
    pass_ = std::make_unique<SchedulingPass>(std::move(*policy));
    auto fifo = queue::CreateQueuePolicy("fifo");
    ASSERT_TRUE(fifo.ok());
    fifo_ = std::move(*fifo);
    // A running job holds all of node-0.
    running_.node = 0;
    running_.num_gpus = 4;
    for (uint8_t g = 0; g < 4; ++g) running_.gpus[g] = scheduler::GpuShare{g, 1000, 0};
    ASSERT_TRUE(cluster_.Allocate(running_).ok());
  }

  void AddJob(int32_t gpus, int32_t min_gpus, int64_t work_gpu_ms) {
    JobView v;
    v.id = static_cast<int64_t>(jobs_.size());
    v.gpus = gpus;
    v.min_gpus = min_gpus;
    v.work_gpu_ms = work_gpu_ms;
    jobs_.push_back(v);
  }

  Decision Run(KeptCluster kept) {
    kept.cluster = &cluster_;
    kept.gpus_per_node = 4;
    kept.jobs = jobs_;
    PassInput in;
    in.kept = &kept;
    return pass_->Run(in, *fifo_, PassOptions{});
  }

  scheduler::ClusterState cluster_;
  std::unique_ptr<SchedulingPass> pass_;
  std::unique_ptr<queue::QueuePolicy> fifo_;
  scheduler::Placement running_;
  std::vector<JobView> jobs_;
};

TEST_F(KeptClusterTest, StrictOrderStopsAtTheFirstJobThatDoesNotFitAndSkipGoesOn) {
  AddJob(8, 8, 800);  // needs both nodes: node-0 is busy
  AddJob(2, 2, 200);
  const std::vector<int64_t> order{0, 1};
  KeptCluster strict;
  strict.order = order;
  strict.blocked = Blocked::kStop;
  Decision d = Run(strict);
  ASSERT_TRUE(d.status.ok()) << d.status.ToString();
  EXPECT_TRUE(d.actions.empty());
  ASSERT_TRUE(d.blocked.has_value());
  EXPECT_EQ(*d.blocked, 0);
  EXPECT_EQ(cluster_.allocated_gpu_milli(), 4000);

  KeptCluster skip;
  skip.order = order;
  skip.blocked = Blocked::kSkip;
  d = Run(skip);
  ASSERT_TRUE(d.status.ok()) << d.status.ToString();
  EXPECT_FALSE(d.blocked.has_value());
  ASSERT_EQ(d.actions.size(), 1u);
  EXPECT_EQ(d.actions[0].kind, Action::Kind::kAssign);
  EXPECT_EQ(d.actions[0].job, 1);
  EXPECT_EQ(d.actions[0].gpus, 2);
  ASSERT_EQ(d.actions[0].placed.size(), 1u);
  EXPECT_EQ(d.actions[0].placed[0].node, 1);  // what it places stays allocated on the cluster
  EXPECT_EQ(cluster_.allocated_gpu_milli(), 6000);
}

TEST_F(KeptClusterTest, ElasticGangTakesWhatIsFreeDownToItsMinimum) {
  AddJob(8, 2, 800);
  const std::vector<int64_t> order{0};
  KeptCluster kept;
  kept.order = order;
  Decision d = Run(kept);
  ASSERT_TRUE(d.status.ok()) << d.status.ToString();
  ASSERT_EQ(d.actions.size(), 1u);
  EXPECT_EQ(d.actions[0].gpus, 4);
  EXPECT_EQ(cluster_.allocated_gpu_milli(), 8000);
}

TEST_F(KeptClusterTest, EasyBackfillStartsWhatDoesNotDelayTheReservation) {
  AddJob(8, 8, 800);        // 0: the blocked head, fits once the running job ends at 100
  AddJob(2, 2, 2 * 500);    // 1: ends at 500, after the reservation, and would delay the head
  AddJob(2, 2, 2 * 50);     // 2: ends at 50, before the reservation
  AddJob(1, 1, 1 * 10000);  // 3: long, also delays the head: placed, then given back
  queue::JobQueue q(*fifo_);
  for (const JobView& j : jobs_) {
    q.Push(queue::JobView{.id = static_cast<queue::JobId>(j.id),
                          .submit_ms = j.id,
                          .gpus = j.gpus,
                          .min_gpus = j.min_gpus});
  }
  KeptCluster kept;
  kept.queue = &q;
  kept.blocked = Blocked::kStop;
  Decision d = Run(kept);
  ASSERT_TRUE(d.blocked.has_value());
  EXPECT_EQ(*d.blocked, 0);

  const std::vector<scheduler::Placement> held{running_};
  KeptCluster backfill;
  backfill.queue = &q;
  backfill.blocked = Blocked::kBackfill;
  backfill.head = 0;
  backfill.now_ms = 0;
  backfill.running.push_back(RunningEnd{100, 99, &held});
  d = Run(backfill);
  ASSERT_TRUE(d.status.ok()) << d.status.ToString();
  ASSERT_TRUE(d.reserved_at_ms.has_value());
  EXPECT_EQ(*d.reserved_at_ms, 100);
  ASSERT_EQ(d.actions.size(), 1u);
  EXPECT_EQ(d.actions[0].job, 2);
  EXPECT_EQ(d.actions[0].gpus, 2);
  EXPECT_EQ(cluster_.allocated_gpu_milli(), 6000);  // the rejected long job was given back
}

}  // namespace
}  // namespace stoker::pass
