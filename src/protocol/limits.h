#pragma once
// The bounds of every field of the wire types, written once: the protocol's parsers check
// them, and the OpenAPI document (server/openapi.yaml) names them ($job_name_bytes, ...) so the
// served document shows the enforced values. The API test checks that the two agree: every
// documented bound is accepted at the bound and refused past it by the real parser.

#include <cstdint>
#include <span>
#include <string_view>

#include "core/gpu_shapes.h"

namespace stoker::protocol::limits {

// Job specs (POST /jobs).
inline constexpr int64_t kJobNameBytes = 128;
inline constexpr int64_t kCommandItems = 1024;
inline constexpr int64_t kArgumentBytes = int64_t{64} * 1024;
inline constexpr int64_t kEnvVariables = 256;
inline constexpr int64_t kEnvNameBytes = 256;
inline constexpr int64_t kEnvValueBytes = int64_t{64} * 1024;
inline constexpr int64_t kPathBytes = 4096;
inline constexpr int64_t kGpusPerJob = kMaxGpusPerNode;
inline constexpr int64_t kGpuMilliMax = 999;  // a share of one GPU; 1000 is a whole GPU
inline constexpr int64_t kGpuMemoryMibMax = int64_t{1} << 24;
inline constexpr int64_t kGpuModels = 16;
inline constexpr int64_t kGpuModelBytes = 128;
inline constexpr int64_t kMigProfileBytes = 32;
inline constexpr int64_t kCpuMilliMin = 1;
inline constexpr int64_t kCpuMilliMax = 1'000'000;
inline constexpr int64_t kJobMemoryMibMax = int64_t{1} << 26;
inline constexpr int64_t kJobClassBytes = 64;
inline constexpr int64_t kPriorityMin = -1000;
inline constexpr int64_t kPriorityMax = 1000;
inline constexpr int64_t kUserBytes = 64;
inline constexpr int64_t kOnNodeLossBytes = 16;
// Gangs (multi-node jobs): parts (nodes) and GPUs in all (total_gpus); nodes x gpus stays
// within the GPU bound by these numbers.
inline constexpr int64_t kGangPartsMax = 4096;
inline constexpr int64_t kGangGpusMax = int64_t{1} << 17;
static_assert(kGangPartsMax * kGpusPerJob <= kGangGpusMax);

// Node registrations (POST /nodes/register).
inline constexpr int64_t kNodeNameBytes = 128;
inline constexpr int64_t kNodeTextBytes = 1024;    // source, isolation
inline constexpr int64_t kNodeAddressBytes = 253;  // a DNS name's longest text form
inline constexpr int64_t kNodeCpuMilliMax = int64_t{1} << 32;
inline constexpr int64_t kNodeMemoryMibMax = int64_t{1} << 32;
inline constexpr int64_t kGpusPerNode = kMaxGpusPerNode;
inline constexpr int64_t kGpuIndexMax = 63;
inline constexpr int64_t kUuidBytes = 128;
inline constexpr int64_t kGpuMemoryMibTotalMax = int64_t{1} << 24;
inline constexpr int64_t kGpuMinorMax = 253;  // 254 and 255 are nvidia-modeset and nvidiactl
inline constexpr int64_t kMigInstancesPerGpu = 7;
inline constexpr int64_t kMigSlicesMax = 7;

// Heartbeats (POST /nodes/{name}/heartbeat): the run reports.
inline constexpr int64_t kAttemptMax = INT32_MAX;
inline constexpr int64_t kRunPhaseBytes = 16;
inline constexpr int64_t kRunErrorBytes = 4096;
inline constexpr int64_t kExitCodeMin = -1;
inline constexpr int64_t kExitCodeMax = 255;
inline constexpr int64_t kSignalMin = 1;
inline constexpr int64_t kSignalMax = 128;
inline constexpr int64_t kLogChunkBytes = int64_t{1} << 20;
// Heartbeats' samples in the compact form: seconds (ticks) in one report, and the report
// interval a server directs (its reply's report_interval_ms). A node keeps at most
// kReportTicksMax seconds while its server is unreachable, the oldest dropped first.
inline constexpr int64_t kReportTicksMax = 120;
inline constexpr int64_t kReportKeysMax = 160;  // GPU field keys ("keys"): room for new fields
inline constexpr int64_t kReportIntervalMsMin = 1000;
inline constexpr int64_t kReportIntervalMsMax = 15000;
static_assert(kReportTicksMax * 1000 >= 2 * kReportIntervalMsMax);

struct NamedLimit {
  std::string_view name;  // as the OpenAPI document writes it, without the '$'
  int64_t value;
};
// Every limit above by its name in the document.
std::span<const NamedLimit> Named();

}  // namespace stoker::protocol::limits
