#pragma once
// JSON form of a TelemetrySnapshot, used by GET /api/v1/snapshot, `stoker smi --json` and the
// samples of a heartbeat: each GPU is the sample codec's object (protocol/samples.h) plus what
// the agent knows beyond the sample (health, XIDs, its own counters).

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "telemetry/snapshot.h"

namespace stoker::telemetry {

nlohmann::json SnapshotToJson(const TelemetrySnapshot& snapshot, const std::string& hostname);

// {"status": "ok" | "degraded", "nvml_available", "simulated", "gpus": [{index, uuid, health}]}:
// degraded when NVML is missing or any GPU is not healthy.
nlohmann::json HealthToJson(const TelemetrySnapshot& snapshot);

// The samples a node reports in the heartbeat's compact form: each GPU's latest sample with its
// index; a GPU whose newest read failed (or that was never read) as unreachable without readings,
// as the JSON form writes it.
std::vector<GpuSample> ReportSamples(const TelemetrySnapshot& snapshot);

}  // namespace stoker::telemetry
