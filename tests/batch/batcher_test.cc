// The threaded batcher: answers, ordering, overload, shutdown with requests in flight, metrics.
// No test asserts on elapsed time; waits are on futures and latches.
#include "batch/batcher.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <latch>
#include <random>

namespace stoker::batch {
namespace {

using std::chrono::milliseconds;
using IntBatcher = Batcher<int, int>;

std::unique_ptr<IntBatcher> Make(Options o, IntBatcher::Runner run, Clock* clock) {
  auto b = IntBatcher::Create(std::move(o), std::move(run), clock);
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  return std::move(*b);
}

IntBatcher::Runner Doubler(std::atomic<size_t>* largest = nullptr) {
  return [largest](std::vector<int>& in, const BatchInfo& info) -> Result<std::vector<int>> {
    if (largest != nullptr) {
      size_t cur = largest->load();
      while (info.items > cur && !largest->compare_exchange_weak(cur, info.items)) {
      }
    }
    std::vector<int> out;
    for (int x : in) out.push_back(2 * x);
    return out;
  };
}

TEST(Batcher, EveryFutureGetsItsOwnAnswer) {
  SystemClock clock;
  Options o;
  o.max_batch_size = 8;
  o.max_queue_delay = milliseconds(1);
  o.instances = 2;
  std::atomic<size_t> largest{0};
  auto b = Make(o, Doubler(&largest), &clock);
  std::vector<std::future<Result<int>>> fs;
  for (int i = 0; i < 500; ++i) fs.push_back(b->Submit(i));
  for (int i = 0; i < 500; ++i) {
    Result<int> r = fs[static_cast<size_t>(i)].get();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(*r, 2 * i);
  }
  EXPECT_LE(largest.load(), 8u);
  EXPECT_GT(largest.load(), 1u);  // 500 requests at once do get batched
  const Counters c = b->counters();
  EXPECT_EQ(c.accepted, 500u);
  EXPECT_EQ(c.answered, 500u);
  EXPECT_EQ(c.items, 500u);
}

TEST(Batcher, PreserveOrderingDeliversInSubmissionOrder) {
  SystemClock clock;
  Options o;
  o.max_batch_size = 4;
  o.instances = 4;
  o.preserve_ordering = true;
  std::mt19937 rng(7);
  std::mutex rng_mu;
  auto run = [&](std::vector<int>& in, const BatchInfo&) -> Result<std::vector<int>> {
    int spin;
    {
      std::lock_guard lk(rng_mu);
      spin = static_cast<int>(rng() % 2000);
    }
    volatile unsigned sink = 0;
    for (int i = 0; i < spin * 100; ++i) sink = sink + static_cast<unsigned>(i);  // uneven
    return std::vector<int>(in.begin(), in.end());
  };
  auto b = Make(o, run, &clock);
  std::mutex mu;
  std::vector<int> order;
  std::latch all(300);
  for (int i = 0; i < 300; ++i) {
    b->Submit(i, {}, [&, i](Result<int> r) {
      EXPECT_TRUE(r.ok());
      std::lock_guard lk(mu);
      order.push_back(i);
      all.count_down();
    });
  }
  all.wait();
  for (size_t i = 0; i < order.size(); ++i) ASSERT_EQ(order[i], static_cast<int>(i));
}

TEST(Batcher, OverloadIsRefusedAtOnceAndMemoryStaysBounded) {
  SystemClock clock;
  Options o;
  o.max_batch_size = 4;
  o.max_pending = 100;
  std::latch release(1);
  std::atomic<int> running{0};
  auto run = [&](std::vector<int>& in, const BatchInfo&) -> Result<std::vector<int>> {
    running.fetch_add(1);
    release.wait();
    return std::vector<int>(in.begin(), in.end());
  };
  auto b = Make(o, run, &clock);
  std::vector<std::future<Result<int>>> fs;
  fs.push_back(b->Submit(0));
  while (running.load() == 0) std::this_thread::yield();  // the first batch is running
  int refused = 0;
  for (int i = 1; i <= 1000; ++i) {
    fs.push_back(b->Submit(i));
    if (fs.back().wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
      Result<int> r = fs.back().get();
      EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
      fs.pop_back();
      ++refused;
    }
  }
  EXPECT_EQ(refused, 900);
  EXPECT_EQ(b->counters().queued, 100u);
  EXPECT_EQ(b->counters().rejected[static_cast<size_t>(Rejection::kQueueFull)], 900u);
  release.count_down();
  for (auto& f : fs) EXPECT_TRUE(f.get().ok());
}

TEST(Batcher, ShutdownWithRequestsInFlightAnswersEveryOne) {
  SystemClock clock;
  Options o;
  o.max_batch_size = 4;
  o.max_queue_delay = std::chrono::seconds(60);  // queued ones would wait a minute
  o.instances = 2;
  std::latch release(1);
  std::atomic<int> running{0};
  auto run = [&](std::vector<int>& in, const BatchInfo&) -> Result<std::vector<int>> {
    running.fetch_add(1);
    release.wait();
    return std::vector<int>(in.begin(), in.end());
  };
  auto b = Make(o, run, &clock);
  std::vector<std::future<Result<int>>> fs;
  for (int i = 0; i < 50; ++i) fs.push_back(b->Submit(i));
  while (running.load() < 2) std::this_thread::yield();  // two full batches are running
  std::thread stopper([&] { b->Shutdown(/*run_queued=*/false); });
  // Requests after shutdown began are refused at once; those before it queue (and are answered
  // at shutdown).
  bool refused = false;
  while (!refused) {
    fs.push_back(b->Submit(-1));
    if (fs.back().wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
      Result<int> late = fs.back().get();
      fs.pop_back();
      EXPECT_EQ(late.status().code(), StatusCode::kUnavailable);
      refused = true;
    }
    std::this_thread::yield();
  }
  release.count_down();
  stopper.join();
  int ok = 0, unavailable = 0;
  for (auto& f : fs) {
    Result<int> r = f.get();
    if (r.ok()) {
      ++ok;
    } else {
      EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
      EXPECT_NE(r.status().message().find("shut down"), std::string::npos);
      ++unavailable;
    }
  }
  EXPECT_GE(ok, 8);  // the two running batches finished
  EXPECT_EQ(ok + unavailable, static_cast<int>(fs.size()));
  const Counters c = b->counters();
  EXPECT_EQ(c.answered, c.accepted);
}

TEST(Batcher, ShutdownRunsQueuedRequestsWithoutWaitingForTheDelay) {
  SystemClock clock;
  Options o;
  o.max_batch_size = 64;
  o.max_queue_delay = std::chrono::hours(1);
  auto b = Make(o, Doubler(), &clock);
  std::vector<std::future<Result<int>>> fs;
  for (int i = 0; i < 10; ++i) fs.push_back(b->Submit(i));
  b->Shutdown();  // returns only when all are answered: an hour's delay would hang the test
  for (int i = 0; i < 10; ++i) EXPECT_EQ(*fs[static_cast<size_t>(i)].get(), 2 * i);
}

TEST(Batcher, TimeoutWithAnInjectedClock) {
  ManualClock clock;
  Options o;
  o.max_batch_size = 4;
  o.max_queue_delay = milliseconds(100);
  o.default_policy.timeout = milliseconds(5);
  auto b = Make(o, Doubler(), &clock);
  auto f = b->Submit(1);
  clock.Advance(milliseconds(6));
  b->Wake();
  Result<int> r = f.get();
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(b->counters().rejected[static_cast<size_t>(Rejection::kTimeout)], 1u);
}

TEST(Batcher, RunnerErrorsAndThrowsAnswerTheWholeBatch) {
  SystemClock clock;
  Options o;
  o.max_batch_size = 4;
  std::atomic<int> calls{0};
  auto run = [&](std::vector<int>& in, const BatchInfo&) -> Result<std::vector<int>> {
    const int k = calls.fetch_add(1);
    if (k == 0) return Internal("model exploded");
    if (k == 1) throw std::runtime_error("bad alloc in model");
    return std::vector<int>(in.size() + 1, 0);  // wrong count
  };
  auto b = Make(o, run, &clock);
  Result<int> r1 = b->Submit(1).get();
  EXPECT_EQ(r1.status().message(), "model exploded");
  Result<int> r2 = b->Submit(2).get();
  EXPECT_NE(r2.status().message().find("bad alloc in model"), std::string::npos);
  Result<int> r3 = b->Submit(3).get();
  EXPECT_NE(r3.status().message().find("2 outputs for 1 inputs"), std::string::npos);
}

TEST(Batcher, RefusesBadConfigurationAndRequests) {
  SystemClock clock;
  Options o;
  o.max_batch_size = 0;
  EXPECT_EQ(IntBatcher::Create(o, Doubler(), &clock).status().code(), StatusCode::kInvalidArgument);
  o.max_batch_size = 4;
  auto b = Make(o, Doubler(), &clock);
  EXPECT_EQ(b->Submit(1, {.count = 5}).get().status().code(), StatusCode::kInvalidArgument);
}

TEST(Batcher, MetricsAreValidPrometheusText) {
  SystemClock clock;
  Options o;
  o.max_batch_size = 8;
  o.priority_levels = 2;
  auto b = Make(o, Doubler(), &clock);
  std::vector<std::future<Result<int>>> fs;
  for (int i = 0; i < 40; ++i) fs.push_back(b->Submit(i, {.length = static_cast<size_t>(i)}));
  for (auto& f : fs) ASSERT_TRUE(f.get().ok());
  prom::TextWriter w;
  b->WriteMetrics(w, "stoker_batch", {{"model", "test"}});
  ASSERT_TRUE(w.status().ok()) << w.status().ToString();
  const std::string& t = w.text();
  for (const char* name : {"stoker_batch_queue_depth{model=\"test\",priority=\"2\"} 0",
                           "stoker_batch_requests_total{model=\"test\"} 40",
                           "stoker_batch_rejections_total{model=\"test\",reason=\"queue_full\"} 0",
                           "stoker_batch_batch_size_bucket{model=\"test\",le=\"+Inf\"}",
                           "stoker_batch_queue_delay_seconds_count{model=\"test\"}",
                           "stoker_batch_padding_waste_elements_total{model=\"test\"}"}) {
    EXPECT_NE(t.find(name), std::string::npos) << name << "\n" << t;
  }
  // Lengths 1..39 padded to 256 (0 is fixed-shape): waste = 39 * 256 - (1 + ... + 39).
  EXPECT_EQ(b->counters().waste, 39u * 256u - 780u);
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "promtool not installed (scripts/install-deps.sh installs it)";
  }
  const auto file = std::filesystem::temp_directory_path() / "stoker_batch_metrics_test.prom";
  std::ofstream(file) << t;
  const std::string cmd = "promtool check metrics < " + file.string() + " >/dev/null 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << t;
}

}  // namespace
}  // namespace stoker::batch
