#pragma once
// Sliding time windows over integer readings. Every GPU and every job keeps one, and the agent
// reports every few seconds, so Add() must be O(1) (amortized) and memory bounded by the window:
// a ring buffer of (time, value) plus running sums and a monotonic ring for the maximum.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/clock.h"

namespace stoker::efficiency {

// A growable FIFO ring: push_back / pop_front / pop_back in O(1) amortized, no per-element
// allocation once it has grown to the window's steady-state size.
template <typename T>
class Ring {
 public:
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  const T& front() const { return buf_[head_]; }
  const T& back() const { return buf_[(head_ + size_ - 1) % buf_.size()]; }
  void push_back(const T& v) {
    if (size_ == buf_.size()) Grow();
    buf_[(head_ + size_) % buf_.size()] = v;
    ++size_;
  }
  void pop_front() {
    head_ = (head_ + 1) % buf_.size();
    --size_;
  }
  void pop_back() { --size_; }
  void clear() { head_ = size_ = 0; }

 private:
  void Grow() {
    std::vector<T> next(buf_.empty() ? 16 : buf_.size() * 2);
    for (size_t i = 0; i < size_; ++i) next[i] = buf_[(head_ + i) % buf_.size()];
    buf_ = std::move(next);
    head_ = 0;
  }
  std::vector<T> buf_;
  size_t head_ = 0;
  size_t size_ = 0;
};

// Readings are integers (milli-percent for utilisation) so sums never drift.
class SlidingWindow {
 public:
  explicit SlidingWindow(Duration span) : span_(span) {}

  // `t` must not go backwards; an older reading is dropped (returns false) rather than corrupting
  // the order the ring relies on.
  bool Add(WallTime t, int64_t value) {
    if (!entries_.empty() && t < entries_.back().t) return false;
    entries_.push_back({t, value});
    sum_ += value;
    if (value == 0) ++zeros_;
    while (!max_.empty() && max_.back().value <= value) max_.pop_back();
    max_.push_back({t, value});
    EvictBefore(t - span_);
    return true;
  }

  // Drops readings older than `cutoff` (strictly before it).
  void EvictBefore(WallTime cutoff) {
    while (!entries_.empty() && entries_.front().t < cutoff) {
      const Entry& e = entries_.front();
      sum_ -= e.value;
      if (e.value == 0) --zeros_;
      entries_.pop_front();
    }
    while (!max_.empty() && max_.front().t < cutoff) max_.pop_front();
  }

  void Clear() {
    entries_.clear();
    max_.clear();
    sum_ = 0;
    zeros_ = 0;
  }

  Duration span() const { return span_; }
  int64_t count() const { return static_cast<int64_t>(entries_.size()); }
  int64_t sum() const { return sum_; }
  int64_t zeros() const { return zeros_; }
  bool empty() const { return entries_.empty(); }
  // REQUIRES: !empty().
  int64_t max() const { return max_.front().value; }
  int64_t mean() const { return entries_.empty() ? 0 : sum_ / count(); }
  WallTime oldest() const { return entries_.front().t; }
  WallTime newest() const { return entries_.back().t; }
  // How much of the span the readings cover (newest - oldest).
  Duration covered() const { return entries_.empty() ? Duration{0} : newest() - oldest(); }

 private:
  struct Entry {
    WallTime t{};
    int64_t value = 0;
  };
  Duration span_;
  Ring<Entry> entries_;
  Ring<Entry> max_;  // decreasing values; front is the window maximum
  int64_t sum_ = 0;
  int64_t zeros_ = 0;
};

}  // namespace stoker::efficiency
