// The batching rules, step by step in given time (no threads, no sleeping).
#include "batch/queue.h"

#include <gtest/gtest.h>

namespace stoker::batch {
namespace {

using std::chrono::milliseconds;
const MonoTime t0(std::chrono::seconds(10));

std::vector<uint32_t> Enqueue(BatchQueue& q, int n, MonoTime at, SubmitOptions s = {}) {
  std::vector<uint32_t> slots;
  for (int i = 0; i < n; ++i) {
    Result<uint32_t> r = q.Enqueue(s, at);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (r.ok()) slots.push_back(*r);
  }
  return slots;
}

TEST(BatchQueue, MaxQueueDelayIsMeasuredFromTheOldestRequest) {
  Options o;
  o.max_batch_size = 8;
  o.max_queue_delay = milliseconds(5);
  BatchQueue q(o);
  Enqueue(q, 1, t0);
  Enqueue(q, 1, t0 + milliseconds(3));
  MonoTime wake;
  EXPECT_FALSE(q.Take(t0 + milliseconds(4), &wake));
  EXPECT_EQ(wake, t0 + milliseconds(5));  // the oldest's arrival + delay, not the newest's
  std::optional<Formed> f = q.Take(t0 + milliseconds(5), &wake);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->items, 2u);
  EXPECT_EQ(f->why, Formed::Why::kDelay);
  EXPECT_EQ(f->oldest_arrival, t0);
  EXPECT_EQ(q.queued(), 0u);
}

TEST(BatchQueue, ZeroDelaySendsWhateverIsQueuedAndFullBatchesGoAtOnce) {
  Options o;
  o.max_batch_size = 4;
  o.max_queue_delay = milliseconds(100);
  BatchQueue q(o);
  Enqueue(q, 6, t0);
  MonoTime wake;
  std::optional<Formed> f = q.Take(t0, &wake);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->items, 4u);
  EXPECT_EQ(f->why, Formed::Why::kFull);
  EXPECT_FALSE(q.Take(t0, &wake));  // 2 left, the delay holds them
  q.SetLimits(4, Duration{0});
  f = q.Take(t0, &wake);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->items, 2u);
}

TEST(BatchQueue, PreferredSizesRunTheLargestThatCanBeFormed) {
  Options o;
  o.max_batch_size = 16;
  o.preferred_batch_sizes = {8, 4};
  o.max_queue_delay = milliseconds(100);
  BatchQueue q(o);
  Enqueue(q, 3, t0);
  MonoTime wake;
  EXPECT_FALSE(q.Take(t0, &wake));
  Enqueue(q, 3, t0);
  std::optional<Formed> f = q.Take(t0, &wake);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->items, 4u);
  EXPECT_EQ(f->why, Formed::Why::kPreferred);
  Enqueue(q, 7, t0);  // 9 queued: 8 is the largest preferred size
  f = q.Take(t0, &wake);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->items, 8u);
  EXPECT_EQ(q.queued(), 1u);
}

TEST(BatchQueue, StrictPriorityFifoWithinALevel) {
  Options o;
  o.max_batch_size = 2;
  o.priority_levels = 2;
  o.default_priority = 2;
  BatchQueue q(o);
  auto low = Enqueue(q, 2, t0, {.priority = 2});
  auto high = Enqueue(q, 1, t0 + milliseconds(1), {.priority = 1});
  auto def = Enqueue(q, 1, t0 + milliseconds(2), {.priority = 7});  // out of range: default
  EXPECT_EQ(q.meta(def[0]).level, 2);
  MonoTime wake;
  std::optional<Formed> f = q.Take(t0 + milliseconds(2), &wake);
  ASSERT_TRUE(f);
  ASSERT_EQ(f->slots.size(), 2u);
  EXPECT_EQ(f->slots[0], high[0]);  // the high level first, then the oldest low one
  EXPECT_EQ(f->slots[1], low[0]);
  f = q.Take(t0 + milliseconds(2), &wake);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->slots[0], low[1]);
  EXPECT_EQ(f->slots[1], def[0]);
}

TEST(BatchQueue, MaxQueueSizePerLevelRejectsClearly) {
  Options o;
  o.priority_levels = 2;
  o.priority_policies[1].max_queue_size = 2;
  o.max_pending = 3;
  BatchQueue q(o);
  Enqueue(q, 2, t0, {.priority = 1});
  Result<uint32_t> r = q.Enqueue({.priority = 1}, t0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(r.status().message().find("maximum queue size 2 of priority level 1"),
            std::string::npos);
  EXPECT_TRUE(q.Enqueue({.priority = 2}, t0).ok());
  r = q.Enqueue({.priority = 2}, t0);  // the whole-batcher bound
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("maximum of 3 pending"), std::string::npos);
  EXPECT_EQ(q.slots(), 3u);  // refused requests take no memory
}

TEST(BatchQueue, TimeoutRejects) {
  Options o;
  o.max_queue_delay = milliseconds(50);
  o.default_policy.timeout = milliseconds(10);
  BatchQueue q(o);
  auto s = Enqueue(q, 1, t0);
  std::vector<Expired> out;
  q.Expire(t0 + milliseconds(9), &out);
  EXPECT_TRUE(out.empty());
  MonoTime wake;
  EXPECT_FALSE(q.Take(t0 + milliseconds(9), &wake));
  EXPECT_EQ(wake, t0 + milliseconds(10));  // woken for the timeout, before the delay
  q.Expire(t0 + milliseconds(10), &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].slot, s[0]);
  EXPECT_EQ(out[0].status.code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(out[0].status.message().find("10000 us"), std::string::npos);
  EXPECT_EQ(q.queued(), 0u);
}

TEST(BatchQueue, TimeoutOverrideOnlyShortens) {
  Options o;
  o.default_policy.timeout = milliseconds(10);
  o.default_policy.allow_timeout_override = true;
  BatchQueue q(o);
  auto shorter = Enqueue(q, 1, t0, {.timeout = milliseconds(2)});
  auto longer = Enqueue(q, 1, t0, {.timeout = milliseconds(50)});
  EXPECT_EQ(q.meta(shorter[0]).timeout, milliseconds(2));
  EXPECT_EQ(q.meta(longer[0]).timeout, milliseconds(10));
  o.default_policy.allow_timeout_override = false;
  BatchQueue strict(o);
  auto s = Enqueue(strict, 1, t0, {.timeout = milliseconds(2)});
  EXPECT_EQ(strict.meta(s[0]).timeout, milliseconds(10));
}

TEST(BatchQueue, DelayActionMovesBehindTheLevel) {
  Options o;
  o.max_batch_size = 1;
  o.max_queue_delay = milliseconds(0);
  o.default_policy.timeout = milliseconds(1);
  o.default_policy.timeout_action = TimeoutAction::kDelay;
  BatchQueue q(o);
  auto a = Enqueue(q, 1, t0);
  std::vector<Expired> out;
  q.Expire(t0 + milliseconds(2), &out);
  EXPECT_TRUE(out.empty());  // delayed, not rejected
  EXPECT_TRUE(q.meta(a[0]).delayed);
  auto b = Enqueue(q, 1, t0 + milliseconds(2));
  MonoTime wake;
  std::optional<Formed> f = q.Take(t0 + milliseconds(2), &wake);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->slots[0], b[0]);
  f = q.Take(t0 + milliseconds(2), &wake);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->slots[0], a[0]);
  q.Expire(t0 + milliseconds(100), &out);  // a delayed request never times out again
  EXPECT_TRUE(out.empty());
}

TEST(BatchQueue, PaddingBucketsBatchByPaddedLengthAndCountWaste) {
  Options o;
  o.max_batch_size = 8;
  o.pad_multiple = 256;
  BatchQueue q(o);
  auto a = Enqueue(q, 1, t0, {.length = 100});
  auto b = Enqueue(q, 1, t0, {.length = 600});
  auto c = Enqueue(q, 1, t0, {.length = 256});
  auto d = Enqueue(q, 1, t0, {.length = 700, .count = 2});
  EXPECT_EQ(q.meta(a[0]).bucket, 256u);
  EXPECT_EQ(q.meta(b[0]).bucket, 768u);
  MonoTime wake;
  std::optional<Formed> f = q.Take(t0, &wake);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->bucket, 256u);
  EXPECT_EQ(f->slots, (std::vector<uint32_t>{a[0], c[0]}));
  EXPECT_EQ(f->padded, 512u);
  EXPECT_EQ(f->waste, 156u);
  f = q.Take(t0, &wake);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->bucket, 768u);
  EXPECT_EQ(f->slots, (std::vector<uint32_t>{b[0], d[0]}));
  EXPECT_EQ(f->items, 3u);
  EXPECT_EQ(f->waste, 168u + 2 * 68u);
  Result<uint32_t> big = q.Enqueue({.length = o.max_length + 1}, t0);
  EXPECT_EQ(big.status().code(), StatusCode::kInvalidArgument);
}

TEST(BatchQueue, ReleaseOnSlackSendsWhenTheBudgetLeftIsThePredictedTime) {
  Options o;
  o.max_batch_size = 32;
  o.max_queue_delay = milliseconds(50);
  o.release_on_slack = true;
  o.latency_budget = milliseconds(10);
  BatchQueue q(o);
  // t(n) = 2 ms + 0.5 ms * n
  q.SetPredictor([](const void*, size_t n) { return 0.002 + 0.0005 * static_cast<double>(n); },
                 nullptr);
  Enqueue(q, 2, t0);
  MonoTime wake;
  EXPECT_FALSE(q.Take(t0 + milliseconds(6), &wake));
  EXPECT_EQ(wake, t0 + milliseconds(7));  // 10 ms budget - t(2) = 3 ms
  Enqueue(q, 2, t0 + milliseconds(6), {.budget = milliseconds(20)});
  // Four requests: t(4) = 4 ms, the smallest budget ends at 10 ms, so the batch is due at 6 ms.
  std::optional<Formed> f = q.Take(t0 + milliseconds(6), &wake);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->why, Formed::Why::kSlack);
  EXPECT_EQ(f->items, 4u);
}

TEST(BatchQueue, ValidateNamesTheField) {
  Options o;
  o.preserve_ordering = true;
  o.priority_levels = 2;
  EXPECT_NE(Validate(o).message().find("preserve_ordering"), std::string::npos);
  o = {};
  o.preferred_batch_sizes = {64};
  EXPECT_NE(Validate(o).message().find("preferred_batch_sizes"), std::string::npos);
  o = {};
  o.default_priority = 3;
  EXPECT_NE(Validate(o).message().find("default_priority"), std::string::npos);
  EXPECT_TRUE(Validate(Options{}).ok());
}

}  // namespace
}  // namespace stoker::batch
