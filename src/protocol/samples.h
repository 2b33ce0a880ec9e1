#pragma once
// The GPU sample codec: how a GpuSample is written as JSON (the agent's snapshot, `stoker smi
// --json`, the samples of a heartbeat) and read back (by the server, from a heartbeat). One
// module writes and reads samples, with the field table of protocol/gpu_fields.h, so a key or a
// unit is never spelled twice.
//
// A field is {"value": <raw reading or null>, "state": "value" | "unsupported" | "error" |
// "unset"} (plus "error_code" for errors), in the raw units its key names (_pct, _mw, _mj, _mhz,
// _bytes), so a consumer can tell "0" from "unknown".
//
// The compact form (a heartbeat's "keys" and "ticks", docs/api.md): what a node sends its server,
// every second's samples of every GPU batched into one report. Readings are plain numbers in the
// order of "keys" (written once per report), the few that are not a value listed apart, and the
// GPU's identity only where the server cannot know it from the node's registration.

#include <simdjson.h>

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/gpu.h"
#include "core/status.h"
#include "protocol/gpu_fields.h"
#include "protocol/model.h"

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

// The "keys" of a compact report: every scalar field's key in the field table's order, as a
// JSON array.
const std::string& CompactKeysJson();
// The "gpus" array of one tick: per GPU {"i": index, "v": [readings in key order, null where
// there is none], "unsupported": [key positions], "errors": [[key position, NVML code]],
// "health" (when not ok), "mig", "processes", "claims" (when any)}. `identity`: also "uuid",
// "pci_bus_id", "name", "minor", "architecture" (the first report after registering, or a GPU
// whose UUID differs from the registered one).
std::string CompactGpusJson(const std::vector<GpuSample>& gpus, bool identity);
// One tick's object, {"t": <Unix seconds>, "gpus": <gpus_json>}.
std::string CompactTickJson(WallTime at, std::string_view gpus_json);
// A "ticks" array of the given ticks.
std::string CompactTicksJson(const std::vector<SampleTick>& ticks, bool identity);

// Reads a compact report's "keys" and "ticks" into ticks whose samples carry their tick's time.
// A GPU's identity is what the report says (UUID empty where it says none: the receiver takes it
// from the registration). Errors name the element, e.g. "ticks[2].gpus[0].v[5] (power_mw)".
// At most limits::kReportTicksMax ticks of at most limits::kGpusPerNode GPUs.
Result<std::vector<SampleTick>> ParseCompactTicks(simdjson::dom::array keys,
                                                  simdjson::dom::array ticks);

}  // namespace stoker::protocol
