#pragma once
// JSON form of a TelemetrySnapshot, used by GET /api/v1/snapshot and `stoker smi --json`.
// Every field is an object {"value": <raw reading or null>, "state": "value" | "unsupported" |
// "error" | "unset"} (plus "error_code" for errors), in the raw units its key names (_pct,
// _mw, _mj, _mhz, _bytes), so a consumer can tell "0" from "unknown".

#include <string>

#include <nlohmann/json.hpp>

#include "telemetry/snapshot.h"

namespace stoker::telemetry {

nlohmann::json SnapshotToJson(const TelemetrySnapshot& snapshot, const std::string& hostname);

// {"status": "ok" | "degraded", "nvml_available", "simulated", "gpus": [{index, uuid, health}]}:
// degraded when NVML is missing or any GPU is not healthy.
nlohmann::json HealthToJson(const TelemetrySnapshot& snapshot);

}  // namespace stoker::telemetry
