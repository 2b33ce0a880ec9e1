#pragma once
// Offline replays of recorded samples through the live engine components (zones, alerts, idle
// reclaim): what `stoker zones|alerts|reclaim --input FILE` run, and what tests check. The
// samples carry their own time, so a replay is the live path with simulated time.

#include <string>
#include <vector>

#include "efficiency/alerts.h"
#include "efficiency/config.h"
#include "efficiency/idle_reclaim.h"
#include "efficiency/records.h"
#include "efficiency/zones.h"

namespace stoker::efficiency {

// A GpuSample rebuilt from a record (fields the record lacks stay unset).
GpuSample ToGpuSample(const RecordedSample& r);

struct ZoneReplay {
  std::vector<ZoneStatus> gpus;
  std::vector<ZoneStatus> jobs;
  ConsolidationPlan plan;
};
ZoneReplay ReplayZones(const RecordSet& records, const EfficiencyConfig& cfg);

struct AlertReplay {
  std::vector<Alert> fired;    // every alert that fired, in order
  std::vector<Alert> active;   // still pending or firing at the end
  std::vector<Status> errors;  // notifier failures
};
// Evaluates once per distinct sample time; `notifiers` receive the notifications.
AlertReplay ReplayAlerts(const RecordSet& records, const EfficiencyConfig& cfg,
                         const std::vector<Notifier*>& notifiers = {});

// Idle reclaim over the records, always as a dry run (recorded jobs cannot be acted on);
// evaluates every `check_every` of record time (Princeton runs its check every 15 min).
std::vector<ReclaimRecord> ReplayReclaim(const RecordSet& records, const EfficiencyConfig& cfg,
                                         Duration check_every = std::chrono::minutes(15));

}  // namespace stoker::efficiency
