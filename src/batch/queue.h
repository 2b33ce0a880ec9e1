#pragma once
// The batcher's scheduling state, without threads or payloads: priority levels with their
// queue policies, padding buckets, timeouts, and the decision when a batch goes and what is in
// it. Time is passed in, so every rule is tested step by step (tests/batch/queue_test.cc) and
// the benchmarks drive it in simulated time. Not thread-safe: Batcher (batcher.h) holds a lock.
//
// A request occupies a slot from Enqueue until Release; payloads live outside, indexed by slot.

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <queue>
#include <vector>

#include "batch/options.h"
#include "core/clock.h"
#include "core/enum_table.h"
#include "core/status.h"

namespace stoker::batch {

// A formed batch: the slots in the order they were taken (priority, then arrival).
struct Formed {
  std::vector<uint32_t> slots;
  size_t items = 0;           // sum of the requests' counts
  size_t bucket = 0;          // padded length (0: fixed-shape requests)
  uint64_t padded = 0;        // elements after padding: items * bucket
  uint64_t waste = 0;         // padding elements added: sum of count * (bucket - length)
  MonoTime oldest_arrival{};  // the oldest request's arrival
  enum class Why { kFull, kPreferred, kDelay, kSlack, kDrain } why = Why::kFull;
};
// The `trigger` label of the batches counter.
inline constexpr EnumTable<Formed::Why, 5> kFormedWhyNames{"batch trigger",
                                                           {{{Formed::Why::kFull, "full"},
                                                             {Formed::Why::kPreferred, "preferred"},
                                                             {Formed::Why::kDelay, "delay"},
                                                             {Formed::Why::kSlack, "slack"},
                                                             {Formed::Why::kDrain, "drain"}}}};
constexpr const auto& NamesOf(Formed::Why) { return kFormedWhyNames; }
inline const char* WhyName(Formed::Why w) { return kFormedWhyNames.CName(w); }

struct Expired {
  uint32_t slot;
  Status status;  // DEADLINE_EXCEEDED naming the level and the timeout
};

class BatchQueue {
 public:
  struct Meta {
    uint64_t seq = 0;
    MonoTime arrival{};
    MonoTime timeout_at = MonoTime::max();  // max: none
    MonoTime budget_at = MonoTime::max();   // release-on-slack deadline; max: none
    Duration timeout{0};
    size_t count = 1, length = 0, bucket = 0;
    int level = 1;
    bool delayed = false;
    enum class State : uint8_t { kFree, kQueued, kTaken } state = State::kFree;
  };

  // `o` must pass Validate().
  explicit BatchQueue(const Options& o);

  // A slot for the request, or RESOURCE_EXHAUSTED (a level's max_queue_size or max_pending),
  // INVALID_ARGUMENT (count or length out of bounds).
  Result<uint32_t> Enqueue(const SubmitOptions& s, MonoTime now);
  // Applies timeouts up to `now`: REJECT requests are returned (their slots stay taken until
  // Release), DELAY ones move behind their level.
  void Expire(MonoTime now, std::vector<Expired>* out);
  // The batch to run now, or none; then *wake is when to ask again (MonoTime::max(): not
  // before the next Enqueue). Call Expire first.
  std::optional<Formed> Take(MonoTime now, MonoTime* wake);
  // The next batch regardless of delays (draining at shutdown); none when empty.
  std::optional<Formed> TakeNow();
  void Release(uint32_t slot);

  // Limits in force (the adaptive controller moves them within the configured ones).
  void SetLimits(size_t batch_limit, Duration delay);
  size_t batch_limit() const { return limit_; }
  Duration delay() const { return delay_; }
  // The execution-time predictor used by release on slack: seconds for a batch of n items.
  void SetPredictor(double (*predict)(const void* ctx, size_t n), const void* ctx);

  const Meta& meta(uint32_t slot) const { return meta_[slot]; }
  size_t queued() const { return queued_total_; }
  size_t queued(int level) const { return queued_level_[static_cast<size_t>(level)]; }
  size_t slots() const { return meta_.size(); }
  const Options& options() const { return opt_; }

 private:
  struct Ref {
    uint32_t slot;
    uint64_t seq;
  };
  struct Lane {
    std::deque<Ref> q;
    size_t live = 0;
  };
  using Source = std::map<size_t, Lane>;  // bucket -> lane

  bool Live(const Ref& r, size_t source) const;
  size_t SourceOf(const Meta& m) const { return 2 * static_cast<size_t>(m.level - 1) + m.delayed; }
  void Push(uint32_t slot);
  void Unlink(uint32_t slot);  // leaves the lane (lazily), counters updated
  // Collects the batch that would go now (up to the limit) into *f.
  bool Collect(size_t limit, Formed* f);
  void Finish(Formed* f);
  const ModelQueuePolicy& Policy(int level) const;

  Options opt_;
  std::vector<Meta> meta_;
  std::vector<uint32_t> free_;
  std::vector<Source> sources_;  // 2 per level: the level, then its delayed requests
  std::vector<size_t> queued_level_;
  size_t queued_total_ = 0;
  uint64_t next_seq_ = 1;
  struct Timeout {
    MonoTime at;
    uint32_t slot;
    uint64_t seq;
    bool operator>(const Timeout& o) const { return at > o.at; }
  };
  std::priority_queue<Timeout, std::vector<Timeout>, std::greater<>> timeouts_;
  size_t limit_;
  Duration delay_;
  double (*predict_)(const void*, size_t) = nullptr;
  const void* predict_ctx_ = nullptr;
};

}  // namespace stoker::batch
