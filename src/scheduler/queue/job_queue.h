#pragma once
// The waiting line of a queue policy, plus the preemption plan of preemptive policies.
// Keys of waiting jobs do not change while they wait (their attained service and remaining time
// are frozen), so an ordered set gives O(log n) enqueue/dequeue and in-order iteration; only
// running jobs, at most one per allocated GPU, need re-sorting at a scheduling round.

#include <cstdint>
#include <set>
#include <unordered_map>
#include <vector>

#include "scheduler/queue/queue_policy.h"

namespace stoker::queue {

class JobQueue {
 public:
  struct Entry {
    QueueKey key;
    int gpus = 0;  // demand used by the preemption plan and the capacity pre-check
    friend bool operator<(const Entry& a, const Entry& b) { return a.key < b.key; }
  };
  using const_iterator = std::set<Entry>::const_iterator;

  explicit JobQueue(const QueuePolicy& policy) : policy_(&policy) {}

  // Enqueues with the policy's key for the job's current state. False if already queued.
  bool Push(const JobView& job);
  // False if not queued.
  bool Remove(JobId id);
  bool Contains(JobId id) const { return index_.count(id) != 0; }
  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  const_iterator begin() const { return entries_.begin(); }
  const_iterator end() const { return entries_.end(); }
  const QueuePolicy& policy() const { return *policy_; }

 private:
  const QueuePolicy* policy_;
  std::set<Entry> entries_;
  std::unordered_map<JobId, QueueKey> index_;
};

// The ids of `jobs` in `policy`'s order, as pushing each into a JobQueue and walking it gives
// them (a job listed twice counts once, with its first view), without the queue's set and index:
// a scheduling pass orders its whole queue (100,000 jobs) every time, a node per job to build and
// to free in a JobQueue.
std::vector<JobId> KeyOrder(const QueuePolicy& policy, const std::vector<JobView>& jobs);

struct RunningEntry {
  QueueKey key;  // the policy's key for the running job's current state
  JobId id = 0;
  int gpus = 0;
};

struct PreemptionPlan {
  std::vector<JobId> preempt;  // running jobs to stop (they requeue)
  std::vector<JobId> start;    // waiting jobs the freed capacity is meant for, in key order
};

// The capacity plan of a preemptive policy (as in the Helios and Tiresias simulators): walk all
// active jobs in key order and give each its GPUs while the cluster total lasts; running jobs that
// do not get a share are preempted, waiting jobs that do are started. Jobs that do not fit the
// remaining quota are skipped, not blocking. Running jobs are preempted only when a waiting job
// with a smaller key claims the capacity, so an idle waiting line never stops anything. Only
// waiting jobs that outrank some running job are considered (the rest cannot preempt).
// `running` may be in any order; it is sorted here.
PreemptionPlan PlanPreemption(std::vector<RunningEntry> running, const JobQueue& waiting,
                              int64_t capacity_gpus);

}  // namespace stoker::queue
