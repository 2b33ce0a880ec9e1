#pragma once
// Measured GPU activity per node and GPU over a sliding window, from the samples the agents send
// with their heartbeats: what the scheduling pass reads as each GPU's measured use
// (pass::GpuActivity). Activity is the one definition in core/gpu.h (ActivityMilli, metric auto:
// GPM SM activity where the GPU reports it, GPU utilisation otherwise).
//
// Each GPU keeps kBuckets + 1 time buckets of window / kBuckets (a sum and a count each), so its
// memory is fixed whatever the agents' sample rate, and a window's mean costs kBuckets + 1 adds.
// That mean is kept until a reading arrives for the GPU or the window moves to the next bucket:
// the server fills every node's activity before each pass, and between two passes a few nodes
// report while the window moves once per window / kBuckets, so most GPUs' means are reused.
// Thread-safe: its own mutex (heartbeats record without the server's lock).

#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/clock.h"
#include "core/gpu.h"
#include "scheduler/pass/pass.h"

namespace stoker::server {

class ActivityTracker {
 public:
  static constexpr int kBuckets = 30;

  explicit ActivityTracker(Duration window);

  // The samples of one heartbeat of `node` (already checked against its inventory), counted at
  // `now`, the server's time of the heartbeat (the window is the server's: an agent's clock may
  // be minutes off); samples without a usable activity reading are skipped.
  void Record(const std::string& node, const std::vector<GpuSample>& gpus, WallTime now);
  // Fills every GPU's `activity` in `nodes` (by node name and GPU index) with its mean over the
  // window ending at `now` and how much of the window its readings cover; GPUs without
  // readings in the window are left without.
  void Fill(std::vector<pass::NodeView>* nodes, WallTime now) const;
  // A node that came back with other GPUs starts over.
  void ForgetNode(const std::string& node);

  Duration window() const { return window_; }

 private:
  struct Bucket {
    int64_t index = -1;  // time / bucket length; -1: empty
    int32_t sum = 0;     // busy milli (0..1000) summed over the readings
    int32_t count = 0;
  };
  using Buckets = std::array<Bucket, kBuckets + 1>;
  // The sums of a GPU's buckets in the window ending in bucket `at` (-1: not computed since the
  // last reading); `oldest`: the earliest bucket with readings among them.
  struct Mean {
    int64_t at = -1;
    int64_t sum = 0;
    int64_t count = 0;
    int64_t oldest = 0;
  };
  // A node's GPUs by index: the buckets, and apart from them the means, which every pass reads
  // for every GPU (packed, a node's means are a few cache lines, not one per 500-byte window).
  struct Node {
    std::vector<Buckets> buckets;
    mutable std::vector<Mean> means;
  };

  void FillNodeLocked(pass::NodeView* n, int64_t now_index, WallTime now, int64_t window_ms) const;

  Duration window_;
  int64_t bucket_ms_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Node> nodes_;
};

}  // namespace stoker::server
