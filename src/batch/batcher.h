#pragma once
// stoker::batch — a dynamic batcher for inference services, usable on its own (it needs only
// src/core). The public header of the stoker_batch library.
//
//   auto b = Batcher<In, Out>::Create(options, runner, &clock);
//   std::future<Result<Out>> f = (*b)->Submit(input, {.priority = 1});
//
// Triton's dynamic-batcher semantics (options.h, docs/batching.md): max batch size, preferred
// batch sizes, queue delay from the oldest request, priority levels each with a queue policy
// (max queue size, timeout that rejects or delays), optional preserved ordering. Beyond them:
// padding buckets, release on slack and the adaptive controller (controller.h) with the
// service-time model learned online (service_model.h).
//
// Threads: `instances` workers form and run batches; Submit is thread-safe and never blocks on
// a running batch. Workers sleep on a condition variable until a request arrives or the next
// deadline (delay, slack, timeout) comes: no busy waiting. Deadlines are read from the injected
// clock; with a ManualClock call Wake() after moving it. Memory is bounded: beyond
// max_pending (and each level's max_queue_size) requests are refused at once. Every accepted
// request is answered exactly once: with its output, its timeout, the runner's error, or at
// Shutdown.

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "batch/controller.h"
#include "batch/metrics.h"
#include "batch/options.h"
#include "batch/queue.h"
#include "batch/service_model.h"
#include "core/clock.h"
#include "core/prometheus_text.h"
#include "core/status.h"

namespace stoker::batch {

// What the runner is told about the batch it runs.
struct BatchInfo {
  size_t items = 0;
  size_t bucket = 0;  // padded length of every input (0: fixed shape)
  uint64_t waste = 0;
  Formed::Why why = Formed::Why::kFull;
};

struct Counters {
  uint64_t accepted = 0, answered = 0, batches = 0, items = 0, padded = 0, waste = 0;
  uint64_t rejected[static_cast<size_t>(Rejection::kCount)] = {};
  size_t queued = 0;
  size_t batch_limit = 0;
  Duration delay{0};
  double model_a = 0, model_c = 0;
};

template <class In, class Out>
class Batcher {
 public:
  using Callback = std::function<void(Result<Out>)>;
  // Runs one batch: one output per input, in order, or an error for all of them.
  using Runner =
      std::function<Result<std::vector<Out>>(std::vector<In>& inputs, const BatchInfo& info)>;

  static Result<std::unique_ptr<Batcher>> Create(Options o, Runner run, Clock* clock) {
    if (Status s = Validate(o); !s.ok()) return s;
    if (!run) return InvalidArgument("runner: empty");
    if (clock == nullptr) return InvalidArgument("clock: null");
    return std::unique_ptr<Batcher>(new Batcher(std::move(o), std::move(run), clock));
  }

  ~Batcher() { Shutdown(); }
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  // `done` is called exactly once: here, at once, when the request is refused (queue full,
  // bad options, shutting down), else on a worker thread.
  void Submit(In input, const SubmitOptions& s, Callback done) {
    std::unique_lock lk(mu_);
    if (stopping_) {
      metrics_.Reject(Rejection::kShutdown);
      lk.unlock();
      done(Unavailable("batcher is shutting down; request not accepted"));
      return;
    }
    if (controller_) controller_->OnArrival();  // offered load, refused requests included
    Result<uint32_t> slot = queue_.Enqueue(s, clock_->Now());
    if (!slot.ok()) {
      metrics_.Reject(slot.status().code() == StatusCode::kResourceExhausted ? Rejection::kQueueFull
                                                                             : Rejection::kInvalid);
      lk.unlock();
      done(slot.status());
      return;
    }
    if (payload_.size() <= *slot) payload_.resize(*slot + 1);
    payload_[*slot].input.emplace(std::move(input));
    payload_[*slot].done = std::move(done);
    ++metrics_.accepted;
    lk.unlock();
    cv_.notify_one();
  }

  std::future<Result<Out>> Submit(In input, const SubmitOptions& s = {}) {
    auto promise = std::make_shared<std::promise<Result<Out>>>();
    std::future<Result<Out>> f = promise->get_future();
    Submit(std::move(input), s, [promise](Result<Out> r) { promise->set_value(std::move(r)); });
    return f;
  }

  // Stops accepting requests. run_queued: queued requests still run (delays no longer wait);
  // else they are answered UNAVAILABLE. Batches already running finish. Returns when every
  // accepted request has been answered. Idempotent.
  void Shutdown(bool run_queued = true) {
    {
      std::lock_guard lk(mu_);
      if (!stopping_) {
        stopping_ = true;
        run_queued_ = run_queued;
      }
    }
    cv_.notify_all();
    std::lock_guard join(join_mu_);
    for (std::thread& t : workers_) {
      if (t.joinable()) t.join();
    }
  }

  // Re-reads the clock now (after moving an injected ManualClock).
  void Wake() { cv_.notify_all(); }

  void WriteMetrics(prom::TextWriter& w, std::string_view prefix = "stoker_batch",
                    const prom::Labels& labels = {}) const {
    std::lock_guard lk(mu_);
    metrics_.Write(w, prefix, labels, queue_, model_.a(), model_.c());
  }

  Counters counters() const {
    std::lock_guard lk(mu_);
    Counters c;
    c.accepted = metrics_.accepted;
    c.answered = metrics_.answered;
    c.batches = metrics_.batches;
    c.items = metrics_.items;
    c.padded = metrics_.padded;
    c.waste = metrics_.waste;
    std::copy(std::begin(metrics_.rejections), std::end(metrics_.rejections), c.rejected);
    c.queued = queue_.queued();
    c.batch_limit = queue_.batch_limit();
    c.delay = queue_.delay();
    c.model_a = model_.a();
    c.model_c = model_.c();
    return c;
  }

 private:
  struct Payload {
    std::optional<In> input;
    Callback done;
  };
  struct Answer {
    uint64_t seq;
    Callback done;
    Result<Out> result;
  };

  Batcher(Options o, Runner run, Clock* clock)
      : opt_(std::move(o)),
        run_(std::move(run)),
        clock_(clock),
        queue_(opt_),
        model_(opt_.model_a_seconds, opt_.model_c_seconds),
        metrics_(opt_) {
    queue_.SetPredictor(
        [](const void* m, size_t n) { return static_cast<const ServiceModel*>(m)->Predict(n); },
        &model_);
    if (opt_.adaptive.enabled) {
      controller_.emplace(opt_);
      controller_->Recompute(model_);
      queue_.SetLimits(controller_->batch_limit(), controller_->delay());
    }
    for (int i = 0; i < opt_.instances; ++i) workers_.emplace_back([this] { Work(); });
  }

  // Takes a slot's payload and frees the slot (under mu_).
  Payload TakePayload(uint32_t slot) {
    Payload p = std::move(payload_[slot]);
    payload_[slot] = Payload{};
    queue_.Release(slot);
    return p;
  }

  void Work() {
    std::vector<Expired> expired;
    std::vector<Answer> answers;
    std::vector<In> inputs;
    std::vector<MonoTime> arrivals;
    std::unique_lock lk(mu_);
    while (true) {
      const MonoTime now = clock_->Now();
      expired.clear();
      queue_.Expire(now, &expired);
      for (const Expired& e : expired) {
        const uint64_t seq = queue_.meta(e.slot).seq;
        metrics_.Reject(Rejection::kTimeout);
        answers.push_back({seq, TakePayload(e.slot).done, e.status});
      }
      if (!answers.empty()) {
        lk.unlock();
        Deliver(answers);
        lk.lock();
        continue;
      }
      std::optional<Formed> f;
      MonoTime wake = MonoTime::max();
      if (stopping_ && !run_queued_) {
        RejectAllQueued(lk);
        return;
      }
      f = stopping_ ? queue_.TakeNow() : queue_.Take(now, &wake);
      if (!f) {
        if (stopping_) return;  // nothing queued: every request has been taken
        if (wake == MonoTime::max()) {
          cv_.wait(lk);
        } else {
          cv_.wait_for(lk, wake - now);
        }
        continue;
      }
      RunBatch(*f, lk, inputs, arrivals, answers, now);
    }
  }

  void RunBatch(const Formed& f, std::unique_lock<std::mutex>& lk, std::vector<In>& inputs,
                std::vector<MonoTime>& arrivals, std::vector<Answer>& answers, MonoTime now) {
    metrics_.Batch(f);
    inputs.clear();
    arrivals.clear();
    answers.clear();
    for (uint32_t slot : f.slots) {
      const BatchQueue::Meta& m = queue_.meta(slot);
      metrics_.QueueDelay(now - m.arrival);
      arrivals.push_back(m.arrival);
      const uint64_t seq = m.seq;
      Payload p = TakePayload(slot);
      inputs.push_back(std::move(*p.input));
      answers.push_back({seq, std::move(p.done), Unavailable("not run")});
    }
    lk.unlock();
    const BatchInfo info{f.items, f.bucket, f.waste, f.why};
    const MonoTime start = clock_->Now();
    Result<std::vector<Out>> out = Internal("runner did not return");
    try {
      out = run_(inputs, info);
    } catch (const std::exception& e) {
      out = Internal(std::string("runner threw: ") + e.what());
    } catch (...) {
      out = Internal("runner threw");
    }
    const MonoTime end = clock_->Now();
    if (out.ok() && out->size() != answers.size()) {
      out = Internal("runner returned " + std::to_string(out->size()) + " outputs for " +
                     std::to_string(answers.size()) + " inputs");
    }
    for (size_t i = 0; i < answers.size(); ++i) {
      if (out.ok()) {
        answers[i].result = std::move((*out)[i]);
      } else {
        answers[i].result = out.status();
      }
    }
    lk.lock();
    if (!out.ok()) metrics_.Reject(Rejection::kFailed, answers.size());
    model_.Observe(f.items, ToSeconds(end - start));
    for (MonoTime a : arrivals) {
      metrics_.Latency(end - a);
      if (controller_) controller_->OnLatency(end, end - a, model_, queue_.queued());
    }
    if (controller_) queue_.SetLimits(controller_->batch_limit(), controller_->delay());
    lk.unlock();
    Deliver(answers);
    lk.lock();
  }

  void RejectAllQueued(std::unique_lock<std::mutex>& lk) {
    std::vector<Answer> answers;
    while (std::optional<Formed> f = queue_.TakeNow()) {
      for (uint32_t slot : f->slots) {
        const uint64_t seq = queue_.meta(slot).seq;
        metrics_.Reject(Rejection::kShutdown);
        answers.push_back(
            {seq, TakePayload(slot).done, Unavailable("batcher shut down before the request ran")});
      }
    }
    lk.unlock();
    Deliver(answers);
    lk.lock();
  }

  // Calls the callbacks (outside mu_), in submission order when preserve_ordering is set. The
  // answered count moves before the callbacks run, so a caller that has its answer sees it.
  void Deliver(std::vector<Answer>& answers) {
    if (!opt_.preserve_ordering) {
      CountAnswered(answers.size());
      for (Answer& a : answers) a.done(std::move(a.result));
    } else {
      std::lock_guard order(order_mu_);
      for (Answer& a : answers) held_.emplace(a.seq, std::move(a));
      size_t ready = 0;
      for (auto it = held_.begin(); it != held_.end() && it->first == next_deliver_ + ready; ++it) {
        ++ready;
      }
      CountAnswered(ready);
      for (; ready > 0; --ready) {
        Answer& a = held_.begin()->second;
        a.done(std::move(a.result));
        held_.erase(held_.begin());
        ++next_deliver_;
      }
    }
    answers.clear();
  }

  void CountAnswered(size_t n) {
    std::lock_guard lk(mu_);
    metrics_.answered += n;
  }

  const Options opt_;
  const Runner run_;
  Clock* const clock_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  BatchQueue queue_;
  ServiceModel model_;
  std::optional<AdaptiveController> controller_;
  BatchMetrics metrics_;
  std::vector<Payload> payload_;
  bool stopping_ = false;
  bool run_queued_ = true;
  std::mutex order_mu_;
  std::map<uint64_t, Answer> held_;
  uint64_t next_deliver_ = 1;
  std::mutex join_mu_;
  std::vector<std::thread> workers_;
};

}  // namespace stoker::batch
