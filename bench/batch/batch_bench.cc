// Batcher benchmarks (docs/performance.md, "Dynamic batching (issue 18)"):
//  - BM_EnqueueToDispatch: the threaded batcher's own cost per request, submit to the answer's
//    callback, with a runner that does nothing (so the model is excluded). Target <= 1 us.
//  - BM_QueueOnly: the scheduling state alone (enqueue, take, release), no threads.
//  - BM_Poisson/<config>/<load%>: Poisson arrivals against the service t(b) = 2 ms + 0.1 ms*b
//    (10 % jitter) in simulated time, through the same BatchQueue / controller the batcher
//    runs: throughput against the service-curve limit, p99, the model's busy fraction, for no
//    batching, static batching, Triton-style fixed settings and the adaptive mode, in one run.
//  - BM_Router/<policy>: Poisson arrivals over four replicas of unequal speed (1, 1, 0.5,
//    0.25), round-robin vs least-outstanding vs utilization-aware, utilization sampled every
//    100 ms like an agent's /metrics.

#include <benchmark/benchmark.h>

#include <atomic>
#include <latch>
#include <queue>
#include <random>

#include "batch/batcher.h"
#include "batch/router.h"
#include "batch/simulate.h"

namespace stoker::batch {
namespace {

using std::chrono::milliseconds;

void BM_EnqueueToDispatch(benchmark::State& state) {
  SystemClock clock;
  Options o;
  o.max_batch_size = static_cast<size_t>(state.range(0));
  o.max_pending = 1 << 20;
  auto run = [](std::vector<int>& in, const BatchInfo&) -> Result<std::vector<int>> {
    return std::vector<int>(in.size(), 0);
  };
  auto created = Batcher<int, int>::Create(o, run, &clock);
  std::unique_ptr<Batcher<int, int>> b = std::move(*created);
  constexpr int kPerIteration = 10000;
  for (auto _ : state) {
    std::latch done(kPerIteration);
    for (int i = 0; i < kPerIteration; ++i) {
      b->Submit(i, {}, [&done](Result<int>) { done.count_down(); });
    }
    done.wait();
  }
  state.SetItemsProcessed(state.iterations() * kPerIteration);
  state.counters["ns_per_request"] =
      benchmark::Counter(static_cast<double>(state.iterations() * kPerIteration),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  const Counters c = b->counters();
  state.counters["mean_batch"] = static_cast<double>(c.items) / static_cast<double>(c.batches);
}
BENCHMARK(BM_EnqueueToDispatch)->Arg(64)->Arg(256)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_QueueOnly(benchmark::State& state) {
  Options o;
  o.max_batch_size = 64;
  BatchQueue q(o);
  const MonoTime t(std::chrono::seconds(1));
  MonoTime wake;
  for (auto _ : state) {
    for (int i = 0; i < 64; ++i) benchmark::DoNotOptimize(q.Enqueue({}, t));
    std::optional<Formed> f = q.Take(t, &wake);
    for (uint32_t s : f->slots) q.Release(s);
  }
  state.SetItemsProcessed(state.iterations() * 64);
}
BENCHMARK(BM_QueueOnly);

// t(b) = 2 ms + 0.1 ms * b: limit 64 / 8.4 ms = 7,619 items/s at the largest batch.
const ServiceCurve kCurve{0.002, 0.0001, 0.1};
constexpr double kObjective = 0.025;  // p99 objective of the adaptive mode, seconds

Options Config(int which) {
  Options o;
  o.max_batch_size = 64;
  o.max_pending = 4096;
  switch (which) {
    case 0:  // no batching
      o.max_batch_size = 1;
      break;
    case 1:  // static: max 64, no delay (batches form only while the instance is busy)
      break;
    case 2:  // Triton-style fixed settings tuned for throughput
      o.preferred_batch_sizes = {16, 32, 64};
      o.max_queue_delay = milliseconds(10);
      break;
    default:  // adaptive
      o.adaptive.enabled = true;
      o.adaptive.p99_objective =
          std::chrono::duration_cast<Duration>(std::chrono::duration<double>(kObjective));
      o.max_queue_delay = milliseconds(10);
      break;
  }
  return o;
}
const char* kConfigNames[] = {"none", "static", "triton_fixed", "adaptive"};

void BM_Poisson(benchmark::State& state) {
  const int which = static_cast<int>(state.range(0));
  const double load = static_cast<double>(state.range(1)) / 100.0;
  const Options o = Config(which);
  const double limit = kCurve.Limit(64);
  SimResult r;
  for (auto _ : state) r = Simulate(o, kCurve, load * limit, 100000, 42);
  state.SetLabel(kConfigNames[which]);
  state.counters["offered_per_s"] = load * limit;
  state.counters["throughput_per_s"] = r.throughput;
  state.counters["of_limit"] = r.throughput / limit;
  state.counters["p99_ms"] = 1e3 * r.p99;
  // p99 bound of a fixed configuration: its delay plus t(max batch).
  state.counters["bound_ms"] = 1e3 * (ToSeconds(o.max_queue_delay) + kCurve.a +
                                      kCurve.c * static_cast<double>(o.max_batch_size));
  state.counters["busy"] = r.busy_fraction;
  state.counters["mean_batch"] = r.mean_batch;
  state.counters["rejected"] = static_cast<double>(r.rejected);
  state.counters["final_limit"] = static_cast<double>(r.final_limit);
  state.counters["meets_25ms"] = r.p99 <= kObjective && r.rejected == 0 ? 1 : 0;
}
BENCHMARK(BM_Poisson)
    ->ArgsProduct({{0, 1, 2, 3}, {5, 20, 50, 80, 95, 120}})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

// ---- router ----

struct SimUtil final : UtilizationSource {
  std::vector<double> util;
  std::optional<double> Utilization(size_t i) const override { return util[i]; }
};

void BM_Router(benchmark::State& state) {
  const auto policy = static_cast<RoutePolicy>(state.range(0));
  const std::vector<double> speed = {1, 1, 0.5, 0.25};
  const double base = 0.002;  // seconds per request at speed 1
  double capacity = 0;
  for (double s : speed) capacity += s / base;
  const double rate = 0.8 * capacity;
  const size_t n = speed.size();
  double p99 = 0, throughput = 0;
  for (auto _ : state) {
    ManualClock clock(MonoTime(std::chrono::seconds(1)));
    SimUtil util;
    util.util.assign(n, 0.0);
    ReplicaRouter router(n, policy, &util, &clock, milliseconds(100));
    std::mt19937_64 rng(9);
    std::exponential_distribution<double> gap(rate);
    std::exponential_distribution<double> work(1.0);
    struct Replica {
      std::queue<std::pair<double, double>> waiting;          // arrival, service seconds
      double cum_done = 0, cur_start = 0, cum_at_sample = 0;  // busy seconds
      bool busy = false;
      double arrival = 0;
      double Cum(double t) const { return cum_done + (busy ? t - cur_start : 0); }
    };
    std::vector<Replica> rep(n);
    using Event = std::pair<double, size_t>;  // completion time, replica
    std::priority_queue<Event, std::vector<Event>, std::greater<>> done;
    std::vector<double> latencies;
    const int requests = 200000;
    double now = 0, next_arrival = gap(rng), next_sample = 0.1, last = 0;
    int arrived = 0;
    auto start = [&](size_t i, double arrival, double secs) {
      rep[i].busy = true;
      rep[i].arrival = arrival;
      rep[i].cur_start = now;
      done.push({now + secs, i});
    };
    while (arrived < requests || !done.empty()) {
      const double a = arrived < requests ? next_arrival : 1e300;
      const double d = done.empty() ? 1e300 : done.top().first;
      now = std::min({a, d, next_sample});
      clock.Set(MonoTime(std::chrono::seconds(1)) +
                std::chrono::duration_cast<Duration>(std::chrono::duration<double>(now)));
      if (now == next_sample) {
        for (size_t i = 0; i < n; ++i) {  // what an agent samples: busy time over 100 ms
          const double cum = rep[i].Cum(now);
          util.util[i] = std::min(1.0, (cum - rep[i].cum_at_sample) / 0.1);
          rep[i].cum_at_sample = cum;
        }
        next_sample += 0.1;
      } else if (now == d) {
        const size_t i = done.top().second;
        done.pop();
        latencies.push_back(now - rep[i].arrival);
        last = now;
        router.Done(i);
        rep[i].cum_done += now - rep[i].cur_start;
        rep[i].busy = false;
        if (!rep[i].waiting.empty()) {
          auto [arr, secs] = rep[i].waiting.front();
          rep[i].waiting.pop();
          start(i, arr, secs);
        }
      } else {
        ++arrived;
        next_arrival = now + gap(rng);
        const size_t i = router.Pick();
        const double secs = base / speed[i] * work(rng);
        if (rep[i].busy) {
          rep[i].waiting.push({now, secs});
        } else {
          start(i, now, secs);
        }
      }
    }
    p99 = Quantile(latencies, 0.99);
    throughput = static_cast<double>(latencies.size()) / last;
  }
  state.SetLabel(RoutePolicyName(policy));
  state.counters["offered_per_s"] = rate;
  state.counters["throughput_per_s"] = throughput;
  state.counters["p99_ms"] = 1e3 * p99;
}
BENCHMARK(BM_Router)->DenseRange(0, 2)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace stoker::batch

BENCHMARK_MAIN();
