#pragma once
// Work delivered in the order its tickets were taken, without making anyone wait for another's
// delivery. A ticket is taken where the order is decided (under the lock that orders the changes
// the work reports); Ticket::Deliver runs the work at once when every earlier ticket has been
// delivered, and otherwise leaves it to whoever delivers the ticket before it, who runs it after
// its own (so a caller may return before its work has run, but never sees it overtaken). The
// server tells its observers of job changes this way: a change made after a scheduling pass
// released its lock is told after the pass's, however long the pass takes to tell its own.
//
// Every ticket taken must be delivered, or every later one waits forever: a Ticket left
// undelivered delivers nothing when it is destroyed (an error path that returns early).

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <utility>

namespace stoker {

class OrderedDelivery {
 public:
  class Ticket {
   public:
    Ticket() = default;
    Ticket(Ticket&& o) noexcept : owner_(std::exchange(o.owner_, nullptr)), n_(o.n_) {}
    Ticket& operator=(Ticket&& o) noexcept {
      if (this != &o) {
        Deliver({});
        owner_ = std::exchange(o.owner_, nullptr);
        n_ = o.n_;
      }
      return *this;
    }
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;
    ~Ticket() { Deliver({}); }

    // Runs `work` (may be empty) in this ticket's turn, then every later ticket's work that was
    // waiting for it; or, when an earlier ticket is still undelivered, leaves it to run in turn
    // on the thread that delivers that one, and returns at once. `work` must own what it reads,
    // and must not throw.
    // Once per ticket; later calls do nothing.
    void Deliver(std::function<void()> work) {
      if (owner_ == nullptr) return;
      std::exchange(owner_, nullptr)->Deliver(n_, std::move(work));
    }
    // Blocks until every earlier ticket has been delivered: from then until this one is, work
    // done here comes after all earlier tickets' and before any later one's.
    void WaitTurn() const {
      if (owner_ != nullptr) owner_->WaitTurn(n_);
    }

   private:
    friend class OrderedDelivery;
    Ticket(OrderedDelivery* owner, uint64_t n) : owner_(owner), n_(n) {}
    OrderedDelivery* owner_ = nullptr;
    uint64_t n_ = 0;
  };

  // The next ticket. The caller holds the lock that orders what tickets stand for.
  Ticket Take() {
    std::lock_guard lock(mu_);
    return Ticket(this, next_take_++);
  }

 private:
  // noexcept: work that throws ends the process (a turn left half taken would stop every later
  // one).
  void Deliver(uint64_t n, std::function<void()> work) noexcept {
    std::unique_lock lock(mu_);
    waiting_.emplace(n, std::move(work));
    if (running_) return;  // the thread running works in turn runs this one too
    running_ = true;
    while (!waiting_.empty() && waiting_.begin()->first == next_) {
      std::function<void()> w = std::move(waiting_.begin()->second);
      waiting_.erase(waiting_.begin());
      lock.unlock();
      if (w) w();
      lock.lock();
      ++next_;
      turn_.notify_all();
    }
    running_ = false;
  }
  void WaitTurn(uint64_t n) {
    std::unique_lock lock(mu_);
    turn_.wait(lock, [&] { return next_ == n; });
  }

  std::mutex mu_;
  std::condition_variable turn_;
  uint64_t next_take_ = 0;
  uint64_t next_ = 0;     // the ticket whose work runs next
  bool running_ = false;  // a thread is running works in turn
  std::map<uint64_t, std::function<void()>> waiting_;
};

}  // namespace stoker
