#pragma once
// The GPU sample codec: how a GpuSample is written as JSON (the agent's snapshot, `stoker smi
// --json`, the samples of a heartbeat) and read back (by the server, from a heartbeat). One
// module writes and reads samples, with the field table of protocol/gpu_fields.h, so a key or a
// unit is never spelled twice.
//
// A field is {"value": <raw reading or null>, "state": "value" | "unsupported" | "error" |
// "unset"} (plus "error_code" for errors), in the raw units its key names (_pct, _mw, _mj, _mhz,
// _bytes), so a consumer can tell "0" from "unknown".

#include <simdjson.h>

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/gpu.h"
#include "core/status.h"
#include "protocol/gpu_fields.h"

namespace stoker::protocol {

nlohmann::json FieldJson(const FieldView& v);
template <typename T>
nlohmann::json FieldJson(const Field<T>& f) {
  return FieldJson(ViewOf(f));
}

// The sample's part of a GPU's JSON object: index, uuid, pci_bus_id, name, minor,
// architecture, timestamp_unix, "fields" (every scalar of the field table), "mig_instances" and
// "processes". `fresh` false (the newest read failed): the readings are written as unset, not as
// current values; the identity stays. The caller adds what it knows beyond the sample (health,
// counters).
nlohmann::json GpuSampleToJson(const GpuSample& s, uint32_t index, bool fresh);

// Reads an array of such objects (the "samples" of a heartbeat) into typed samples: identity,
// health ("ok", "lost", else unreachable), timestamp, every field of the table, MIG instances'
// UUIDs and profiles, and processes with their jobs. Errors name the element and key.
Result<std::vector<GpuSample>> ParseGpuSamples(simdjson::dom::array gpus);

// An agent's snapshot (GET /api/v1/snapshot: {"hostname", "host", "gpus": [...]}) -> its GPU
// samples and the hostname it names. InvalidArgument naming what is wrong.
struct AgentSnapshot {
  std::string hostname;
  std::vector<GpuSample> gpus;
};
Result<AgentSnapshot> ParseAgentSnapshot(std::string_view body);

}  // namespace stoker::protocol
