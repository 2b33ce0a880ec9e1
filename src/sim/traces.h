#pragma once
// Loaders for the public GPU-cluster job traces (docs/scheduling.md, "Dynamic experiment"):
// Microsoft ITP (ElasticFlow), Microsoft Philly (Pollux artifact copy) and the Tiresias 60-job
// example. All of them reduce to the same record: when a job arrives, how long it runs on its
// requested GPUs, and how many GPUs it asks for. Times are integer milliseconds since the
// earliest submission in the file, so the simulator never accumulates floating-point time.

#include <cstdint>
#include <istream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/enum_table.h"
#include "core/status.h"

namespace stoker::sim {

// Simulated time and durations in milliseconds.
using SimMs = int64_t;

enum class TraceFormat { kItp, kPhilly, kTiresias };

// "itp", "philly", "tiresias" (case-sensitive; the CLI passes the flag through).
inline constexpr EnumTable<TraceFormat, 3> kTraceFormatNames{
    "trace format",
    {{{TraceFormat::kItp, "itp"},
      {TraceFormat::kPhilly, "philly"},
      {TraceFormat::kTiresias, "tiresias"}}}};
constexpr const auto& NamesOf(TraceFormat) { return kTraceFormatNames; }
inline Result<TraceFormat> ParseTraceFormat(std::string_view name) {
  return kTraceFormatNames.Parse(name);
}
inline std::string_view TraceFormatName(TraceFormat format) {
  return kTraceFormatNames.Name(format);
}

struct TraceJob {
  std::string id;         // trace job id (ITP uuid, Tiresias number, Philly row number)
  SimMs submit_ms = 0;    // relative to the earliest submission in the trace
  SimMs duration_ms = 0;  // run time on `gpus` GPUs, as recorded
  int gpus = 0;           // requested GPUs (the maximum for an elastic job)
  int min_gpus = 0;       // elastic jobs: smallest useful allocation; == gpus when rigid
  int priority = 0;       // larger runs first under the priority queue policy
  std::string group;      // Philly virtual cluster, Tiresias model name; empty when unknown
  uint64_t line = 0;      // 1-based line in the source file (for messages)
};

// A homogeneous cluster shape, e.g. 64 nodes x 8 GPUs.
struct ClusterShape {
  int nodes = 0;
  int gpus_per_node = 0;
  int64_t total_gpus() const { return int64_t{nodes} * gpus_per_node; }
};

// Parses "64x8" (nodes x GPUs per node).
Result<ClusterShape> ParseClusterShape(std::string_view text);

struct Trace {
  std::string source;                   // file name (or stream name) the jobs came from
  std::vector<TraceJob> jobs;           // sorted by (submit_ms, line)
  int64_t skipped_rows = 0;             // bad rows dropped under skip_bad_rows
  std::optional<ClusterShape> cluster;  // from tiresias cluster_spec.csv when present
  int64_t epoch_offset_s = 0;           // absolute time of submit_ms == 0 (Philly), else 0
};

struct TraceLoadOptions {
  // A malformed row is an error naming file and line; with this set it is counted and dropped.
  bool skip_bad_rows = false;
  // Keep only the first `limit` jobs by submission time (0 = all).
  size_t limit = 0;
};

// Parses a trace from a stream; `name` is used in error messages ("name:line: field: ...").
Result<Trace> ParseTrace(std::istream& in, std::string_view name, TraceFormat format,
                         const TraceLoadOptions& options = {});

// Loads a trace file. For the Tiresias format, `cluster_spec.csv` next to the file (if any) sets
// Trace::cluster (num_switch * num_node_p_switch nodes x num_gpu_p_node GPUs).
Result<Trace> LoadTrace(const std::string& path, TraceFormat format,
                        const TraceLoadOptions& options = {});

// "YYYY-MM-DD" or "YYYY-MM-DD HH:MM:SS" (UTC) -> seconds since the Unix epoch.
Result<int64_t> ParseUtcDateTime(std::string_view text);

// Keeps the jobs submitted within [since_s, until_s] (Unix seconds, inclusive; Philly only, whose
// Trace::epoch_offset_s anchors the relative times). Submission times stay relative to the
// original first job. Returns the number of jobs dropped.
Result<int64_t> FilterTraceWindow(Trace& trace, std::optional<int64_t> since_s,
                                  std::optional<int64_t> until_s);

// Parses a Tiresias cluster_spec.csv stream.
Result<ClusterShape> ParseTiresiasClusterSpec(std::istream& in, std::string_view name);

}  // namespace stoker::sim
