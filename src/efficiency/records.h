#pragma once
// Recorded samples and job records: the report's input. Read from a JSON-lines export so the
// report works offline (`stoker report --input samples.jsonl`), or filled from the server store.
//
// One JSON object per line; "type" selects the kind (docs/efficiency.md):
//   {"type":"job","id":"j1","user":"alice","team":"ml","class":"train","interactive":false,
//    "preemptible":false,"movable":false,"submit":1767225000,"start":1767225600,
//    "end":1767232800,"gpus":["GPU-a"],"gpu_model":"H100"}
//   ("memory_bound":true is written only for jobs marked so; absent reads as false.)
//   {"type":"sample","t":1767225630,"node":"n1","gpu":"GPU-a","model":"NVIDIA H100 80GB HBM3",
//    "job":"j1","util":55,"sm_active":0.41,"tensor_active":0.2,"dram_bw":0.3,
//    "mem_used":21474836480,"mem_total":85899345920,"power_w":312.5,"temp_c":61}
// Times are Unix seconds; every measurement is optional (absent = not reported).

#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "core/gpu.h"
#include "efficiency/jobs.h"

namespace stoker::efficiency {

struct RecordedSample {
  WallTime t{};
  std::string node;
  std::string gpu;                      // GPU key (UUID)
  std::string model;                    // marketing name
  std::string job;                      // empty when no job held the GPU
  std::optional<double> util_pct;       // 0..100
  std::optional<double> sm_active;      // 0..1
  std::optional<double> tensor_active;  // 0..1
  std::optional<double> dram_bw;        // 0..1
  std::optional<uint64_t> mem_used;
  std::optional<uint64_t> mem_total;
  std::optional<double> power_w;
  std::optional<double> temp_c;
};

struct JobRecord {
  JobInfo info;
  WallTime submit{};
  WallTime end{};  // epoch when still running
};

// The server scheduler's FGD fragmentation measure at one time (not in record files).
struct FragmentationSample {
  WallTime t{};
  double fragmented_gpu_milli = 0;
  int64_t total_gpu_milli = 0;
};

struct RecordSet {
  std::vector<JobRecord> jobs;
  std::vector<RecordedSample> samples;             // sorted by time after reading
  std::vector<FragmentationSample> fragmentation;  // from the server only
};

// A line of a record file is at most this long.
inline constexpr size_t kMaxRecordLineBytes = size_t{1} << 20;

// Errors read "ORIGIN:LINE:COLUMN: field: what" (doc/reader.h). Unknown "type" values are errors.
Result<RecordSet> ReadRecordsJsonl(std::istream& in, const std::string& origin);
Result<RecordSet> ReadRecordsFile(const std::string& path);
std::string SampleToJson(const RecordedSample& s);
std::string JobToJson(const JobRecord& j);
// Every job, then every sample, one JSON object per line (what ReadRecordsJsonl reads).
std::string RecordsToJsonl(const RecordSet& records);
// A GpuSample as a record (the server's heartbeat path and the agent's --record use this).
RecordedSample FromGpuSample(const GpuSample& s, const std::string& node, const std::string& job);
// The same into `out`, whose strings keep their storage (a ring of recorded samples reuses its
// slots without allocating).
void FillRecordedSample(const GpuSample& s, const std::string& node, const std::string& job,
                        RecordedSample* out);

}  // namespace stoker::efficiency
