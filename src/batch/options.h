#pragma once
// Configuration of the dynamic batcher (Triton's dynamic_batching semantics, docs/batching.md
// says where ours differ) and of one submitted request.

#include <chrono>
#include <cstddef>
#include <map>
#include <vector>

#include "core/clock.h"
#include "core/status.h"

namespace stoker::batch {

enum class TimeoutAction {
  kReject,  // the request is answered DEADLINE_EXCEEDED when its timeout passes in the queue
  kDelay,   // it moves behind every request of its own and higher priority that has not timed out
};

// One priority level's queue policy, named and meant as Triton's ModelQueuePolicy (not the
// scheduler's queue::QueuePolicy, which orders jobs).
struct ModelQueuePolicy {
  size_t max_queue_size = 0;  // requests queued at this level; 0: bounded by Options::max_pending
  Duration timeout{0};        // time a request may wait in the queue; 0: none
  bool allow_timeout_override = false;  // a request may ask for a smaller (never larger) timeout
  TimeoutAction timeout_action = TimeoutAction::kReject;
};

// The adaptive controller: steers the batch-size limit and the queue delay so that the p99 of
// request latency (arrival to answer) stays under `p99_objective`, using the service-time model
// t(b) = a + c*b learned online. See controller.h.
struct AdaptiveOptions {
  bool enabled = false;
  Duration p99_objective = std::chrono::milliseconds(10);
  size_t window = 200;     // latencies per control step
  double decrease = 0.7;   // multiplicative decrease of the latency budget on a miss
  double increase = 0.05;  // additive increase (fraction of the objective) after a good window
};

struct Options {
  size_t max_batch_size = 32;  // items per batch, >= 1
  // A batch of one of these sizes runs at once (the largest that can be formed). Empty: only a
  // full batch runs before the delay (Triton's default [max_batch_size], same behaviour).
  std::vector<size_t> preferred_batch_sizes;
  // The longest a batch waits for more requests, measured from its oldest request's arrival.
  // 0: whatever is queued runs as soon as an instance is free.
  Duration max_queue_delay{0};
  int priority_levels = 1;   // 1 is the highest; strict priority, FIFO within a level
  int default_priority = 1;  // for requests with priority 0 or above priority_levels
  ModelQueuePolicy default_policy;
  std::map<int, ModelQueuePolicy> priority_policies;  // level -> policy (others: default_policy)
  // Answers are delivered in submission order. As in Triton, not with priority_levels > 1 or a
  // DELAY timeout policy.
  bool preserve_ordering = false;
  // Requests with a length (variable-length inputs) are padded to a multiple of pad_multiple
  // and batched only with requests of the same padded length (bucket). 0: exact lengths.
  size_t pad_multiple = 256;
  size_t max_length = size_t{1} << 20;  // longer requests are refused
  size_t max_pending = 65536;           // requests queued in all levels together (memory bound)
  // Release on slack: a batch goes as soon as the smallest remaining budget among its requests
  // is at most the predicted execution time of the batch (t(n) of the learned model).
  bool release_on_slack = false;
  Duration latency_budget{0};  // a request's budget when it gives none; 0: its timeout, or none
  AdaptiveOptions adaptive;
  int instances = 1;  // batches run concurrently (worker threads), like Triton's instance count
  // Prior of the service-time model t(b) = a + c*b (seconds), used until batches are measured.
  double model_a_seconds = 0;
  double model_c_seconds = 0;
};

// InvalidArgument naming the field for an inconsistent configuration.
Status Validate(const Options& o);

struct SubmitOptions {
  int priority = 0;     // 0: the default level
  Duration timeout{0};  // 0: the level's timeout; smaller only with allow_timeout_override
  size_t length = 0;    // variable-length input's length; 0: fixed shape
  size_t count = 1;     // items this request brings to a batch (>= 1, <= max_batch_size)
  Duration budget{0};   // latency budget for release on slack; 0: Options::latency_budget
};

}  // namespace stoker::batch
