// The observers (the efficiency engine, the dashboard's history) are told of job changes in the
// order the jobs changed: a heartbeat that starts and ends a job while a scheduling pass is still
// telling the observers that it placed that job is told after the pass, not before it (the
// observers would otherwise keep an ended job as placed, holding its GPU, for good). A pass large
// enough to tell its observers while it applies (more than Server::kPassPart decisions) has told
// every one of them every change when it returns.
#include <gtest/gtest.h>

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "scheduler/registry.h"
#include "server/server.h"
#include "test_util.h"

namespace stoker::server {
namespace {
using testing::Fixture;
using testing::Spec;

// Records what it is told: (job, state) in order.
class Log : public ServerObserver {
 public:
  void OnJobChanged(const Job& j) override {
    std::lock_guard lock(mu_);
    seen_.emplace_back(j.id, JobStateName(j.state));
  }
  std::vector<std::pair<int64_t, std::string>> Seen() const {
    std::lock_guard lock(mu_);
    return seen_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::pair<int64_t, std::string>> seen_;
};

// Holds the first news of a placed job until released (a slow observer, or a pass over a deep
// queue that takes long to tell).
class Gate : public ServerObserver {
 public:
  void OnJobChanged(const Job& j) override {
    if (j.state != JobState::kAssigned) return;
    std::unique_lock lock(mu_);
    if (used_) return;
    used_ = true;
    entered_ = true;
    cv_.notify_all();
    cv_.wait(lock, [&] { return released_; });
  }
  void WaitEntered() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return entered_; });
  }
  void Release() {
    {
      std::lock_guard lock(mu_);
      released_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool used_ = false, entered_ = false, released_ = false;
};

RunReport Report(const Job& j, protocol::RunPhase phase) {
  RunReport r;
  r.id = j.id;
  r.attempt = j.attempt();
  r.phase = phase;
  if (phase == protocol::RunPhase::kExited) {
    r.exit_code = 0;
    r.logs_complete = true;
  }
  return r;
}

// Enough 8-GPU nodes for `jobs` one-GPU jobs, and the jobs submitted: their ids, in order.
std::vector<int64_t> NodesAndQueue(Fixture& f, int jobs) {
  for (int n = 0; n < (jobs + 7) / 8; ++n) {
    EXPECT_TRUE(f.server->RegisterNode(f.admin, f.Node("n" + std::to_string(n), 8)).ok());
  }
  std::vector<int64_t> ids;
  for (int i = 0; i < jobs; ++i) {
    auto j = f.server->Submit(f.alice, Spec({"train"}, 1));
    EXPECT_TRUE(j.ok()) << j.status().ToString();
    if (j.ok()) ids.push_back(j->id);
  }
  return ids;
}

TEST(ObserverOrder, AJobEndedWhileThePassStillTellsOfItsPlacementReachesObserversEnded) {
  Fixture f("observer_order");
  ASSERT_TRUE(f.server->RegisterNode(f.agent, f.Node("n1", 1)).ok());
  Gate gate;
  Log log;
  f.server->AddObserver(&gate);
  f.server->AddObserver(&log);
  auto job = f.server->Submit(f.alice, Spec({"train"}, 1));
  ASSERT_TRUE(job.ok()) << job.status().ToString();

  std::thread pass([&] { EXPECT_EQ(f.server->RunSchedulingPass().placed, 1); });
  gate.WaitEntered();  // the pass has placed the job and is telling the observers
  const Job placed = f.server->GetJob(f.admin, job->id).value();
  ASSERT_EQ(placed.state, JobState::kAssigned);
  // The node starts the job and it exits at once (a command that fails to start, say): both
  // heartbeats are answered without waiting for the pass's observers.
  Heartbeat hb;
  hb.jobs = {Report(placed, protocol::RunPhase::kRunning)};
  ASSERT_TRUE(f.server->Heartbeat(f.agent, "n1", hb).ok());
  hb.jobs = {Report(placed, protocol::RunPhase::kExited)};
  ASSERT_TRUE(f.server->Heartbeat(f.agent, "n1", hb).ok());
  EXPECT_EQ(f.server->GetJob(f.admin, job->id)->state, JobState::kSucceeded);
  gate.Release();
  pass.join();

  const std::vector<std::pair<int64_t, std::string>> want = {
      {job->id, "queued"}, {job->id, "assigned"}, {job->id, "running"}, {job->id, "succeeded"}};
  EXPECT_EQ(log.Seen(), want);
}

TEST(ObserverOrder, ALargePassHasToldEveryObserverOfEveryChangeWhenItReturns) {
  Fixture f("observer_order_large");
  const int jobs = static_cast<int>(Server::kPassPart) + 100;
  Log first, second;
  f.server->AddObserver(&first);
  f.server->AddObserver(&second);
  const std::vector<int64_t> ids = NodesAndQueue(f, jobs);
  const std::set<int64_t> submitted(ids.begin(), ids.end());
  ASSERT_EQ(submitted.size(), static_cast<size_t>(jobs));
  const PassStats st = f.server->RunSchedulingPass();
  ASSERT_EQ(st.placed, jobs);
  for (const Log* log : {&first, &second}) {
    const auto seen = log->Seen();
    ASSERT_EQ(seen.size(), 2 * submitted.size());
    // Every submission first, then every placement, each job once.
    std::set<int64_t> queued, assigned;
    for (size_t k = 0; k < seen.size(); ++k) {
      const bool in_pass = k >= submitted.size();
      EXPECT_EQ(seen[k].second, in_pass ? "assigned" : "queued") << k;
      (in_pass ? assigned : queued).insert(seen[k].first);
    }
    EXPECT_EQ(queued, submitted);
    EXPECT_EQ(assigned, submitted);
  }
}

// Asks a real policy, and runs `hook` the first time it is asked for more than `after`
// placements in a pass (the pass has then handed its first part over: Server::kPassPart).
class HookedPolicy : public scheduler::PlacementPolicy {
 public:
  HookedPolicy(std::unique_ptr<scheduler::PlacementPolicy> inner, int after,
               std::function<void()>* hook)
      : inner_(std::move(inner)), after_(after), hook_(hook) {}
  std::string_view Name() const override { return inner_->Name(); }
  scheduler::PlacementResult Place(const scheduler::Request& r,
                                   const scheduler::ClusterState& cluster) override {
    if (++places_ == after_ + 1 && *hook_) (*hook_)();
    return inner_->Place(r, cluster);
  }
  void Observe(const scheduler::Request& r) override { inner_->Observe(r); }
  bool UsesUtilization() const override { return inner_->UsesUtilization(); }

 private:
  std::unique_ptr<scheduler::PlacementPolicy> inner_;
  const int after_;
  std::function<void()>* hook_;
  int places_ = 0;
};

// A large pass applies its decision part by part while it still decides: its first part is in
// place (and told) before it has decided the next, and a change made between two parts (here a
// cancel, made while the pass decides the second) is told to every observer between them and
// written between them: after a restart the cancelled job is cancelled and every other placed.
TEST(ObserverOrder, ALargePassAppliesItsFirstPartWhileItStillDecidesAndTellsWhatCameBetween) {
  std::function<void()> hook;
  const int part = static_cast<int>(Server::kPassPart);
  ServerOptions opts;
  opts.placement_policy = "bestfit";
  opts.make_placement =
      [&](std::string_view name) -> Result<std::unique_ptr<scheduler::PlacementPolicy>> {
    auto inner = scheduler::CreatePlacementPolicy(name, scheduler::PolicyConfig{});
    if (!inner.ok()) return inner.status();
    return std::unique_ptr<scheduler::PlacementPolicy>(
        std::make_unique<HookedPolicy>(std::move(*inner), part, &hook));
  };
  Fixture f("observer_order_parts", opts);
  const int jobs = part + 100;
  Log first, second;
  f.server->AddObserver(&first);
  f.server->AddObserver(&second);
  const std::vector<int64_t> submitted = NodesAndQueue(f, jobs);
  ASSERT_EQ(submitted.size(), static_cast<size_t>(jobs));
  // Deciding the first job of the second part: the first part (the first jobs, in FIFO order)
  // is applied already; its first job is cancelled.
  bool hooked = false;
  std::string cancelled_state;
  hook = [&] {
    hooked = true;
    EXPECT_EQ(f.server->GetJob(f.admin, submitted.front())->state, JobState::kAssigned);
    EXPECT_EQ(f.server->GetJob(f.admin, submitted.back())->state, JobState::kQueued);
    auto c = f.server->Cancel(f.alice, submitted.front());
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    cancelled_state = JobStateName(c->state);
  };
  const PassStats st = f.server->RunSchedulingPass();
  ASSERT_TRUE(hooked);
  EXPECT_EQ(st.placed, jobs);
  const size_t n = submitted.size();
  for (const Log* log : {&first, &second}) {
    const auto seen = log->Seen();
    ASSERT_EQ(seen.size(), 2 * n + 1);
    // Every submission, then the first part's placements, the cancel, the second part's.
    std::vector<std::pair<int64_t, std::string>> want;
    for (int64_t id : submitted) want.emplace_back(id, "queued");
    for (size_t k = 0; k < n; ++k) {
      if (k == static_cast<size_t>(part)) want.emplace_back(submitted.front(), cancelled_state);
      want.emplace_back(submitted[k], "assigned");
    }
    EXPECT_EQ(seen, want);
  }
  hook = nullptr;
  f.Open();  // a restart reads what was written, in the order it changed
  EXPECT_EQ(JobStateName(f.server->GetJob(f.admin, submitted.front())->state), cancelled_state);
  for (size_t k = 1; k < n; ++k) {
    ASSERT_EQ(f.server->GetJob(f.admin, submitted[k])->state, JobState::kAssigned) << k;
  }
}

// An observer joining a running server (the engine and the dashboard at `stoker server`'s start)
// is told of every active or queued job, however many: read a page at a time, oldest first.
TEST(ObserverOrder, ListAllJobsReadsEveryMatchOldestFirstAPageAtATime) {
  Fixture f("observer_order_all");
  std::vector<int64_t> queued;
  for (int i = 0; i < 10; ++i) {
    auto j = f.server->Submit(f.alice, Spec({"train"}, 1));
    ASSERT_TRUE(j.ok()) << j.status().ToString();
    if (i == 2 || i == 7) {
      ASSERT_TRUE(f.server->Cancel(f.alice, j->id).ok());
    } else {
      queued.push_back(j->id);
    }
  }
  JobFilter filter;
  filter.states = {JobState::kQueued};
  for (size_t page : {1u, 3u, 4u, 8u, 100u}) {
    filter.limit = page;
    filter.before_id = 5;  // ignored: every match
    auto all = f.server->ListAllJobs(f.admin, filter);
    ASSERT_TRUE(all.ok()) << all.status().ToString();
    std::vector<int64_t> ids;
    for (const Job& j : *all) ids.push_back(j.id);
    EXPECT_EQ(ids, queued) << "page of " << page;
  }
  filter.limit = 0;
  EXPECT_FALSE(f.server->ListAllJobs(f.admin, filter).ok());
}

}  // namespace
}  // namespace stoker::server
