#pragma once
// JSON forms of the engine's results, shared by the server's API (server_bridge.h) and the
// offline CLI, so `stoker zones --json` prints the same shape from a file or from a server.

#include <nlohmann/json.hpp>

#include "efficiency/alerts.h"
#include "efficiency/idle_reclaim.h"
#include "efficiency/market.h"
#include "efficiency/zones.h"

namespace stoker::efficiency {

nlohmann::json ZoneStatusToJson(const ZoneStatus& s);
nlohmann::json PackGroupToJson(const PackGroup& g);
// {"gpus": [...], "jobs": [...], "consolidation": [...], "gpus_freed": N, "window": "15m"}
nlohmann::json ZonesToJson(const std::vector<ZoneStatus>& gpus, const std::vector<ZoneStatus>& jobs,
                           const ConsolidationPlan& plan, const ZoneConfig& cfg);
nlohmann::json AlertToJson(const Alert& a);
nlohmann::json SilenceToJson(const Silence& s);
// Body of POST /api/v1/silences: {"matchers": {...}, "ends_at": unix | "duration": "2h",
// "starts_at": unix, "comment": "..."}; errors name the field.
Result<Silence> SilenceFromJson(const nlohmann::json& j, WallTime now);
nlohmann::json ReclaimRecordToJson(const ReclaimRecord& r);
nlohmann::json LedgerEntryJson(const LedgerEntry& e);

}  // namespace stoker::efficiency
