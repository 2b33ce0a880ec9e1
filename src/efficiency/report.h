#pragma once
// Efficiency reports (`stoker report`): per job, per user and team, per cluster (utilisation
// over time, quarterly audit), and advice where the evidence supports it. Built from recorded
// samples and job records; rendered as text, JSON, CSV or a self-contained HTML page with
// inline SVG charts.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "efficiency/config.h"
#include "efficiency/market.h"
#include "efficiency/records.h"
#include "efficiency/zones.h"

namespace stoker::efficiency {

// Peak dense rates of a GPU model (TFLOPS), for the achieved-FLOPS estimate.
struct PeakRates {
  std::string model;
  double tensor_tflops = 0;  // BF16/FP16 dense tensor-core
  double fp32_tflops = 0;    // FP32 non-tensor
  bool mig_capable = false;
};
// Matches a model name ("NVIDIA H100 80GB HBM3", "H100") against the built-in table.
std::optional<PeakRates> LookupPeakRates(const std::string& model_name);
// The configured price_per_gpu_hour for a model (first key the name contains, else "*", else 0),
// in currency units x 1e6.
int64_t PricePerGpuHourMicro(const EfficiencyConfig& cfg, const std::string& model);

// ESTIMATE of what one GPU achieves at these activities (0..1), in TFLOPS: tensor activity x
// the tensor peak + the rest of SM activity x the FP32 peak. Reports, the engine's metrics and
// the dashboard all use this one formula.
double EstimateTflops(const PeakRates& peak, double sm_active, double tensor_active);

// One sample's estimates: achieved TFLOPS, and TFLOPS per watt of the sample's power draw
// (power efficiency). Each is nullopt where the model's peaks, SM activity or a positive power
// reading is missing.
struct SampleEstimate {
  std::optional<double> tflops;
  std::optional<double> tflops_per_watt;
};
SampleEstimate EstimateSample(const RecordedSample& s);

struct ZoneChange {
  WallTime at{};
  Zone zone = Zone::kUnknown;
};

struct JobReport {
  std::string id, user, team, model;
  int gpus = 0;
  WallTime start{}, end{};
  int64_t samples = 0;
  double alloc_gpu_hours = 0;
  double used_gpu_hours = 0;  // activity-weighted
  double idle_gpu_hours = 0;  // GPU time at exactly 0 % activity
  double avg_util_pct = 0, peak_util_pct = 0;
  std::optional<double> avg_sm_pct, avg_tensor_pct;
  uint64_t mem_peak_bytes = 0, mem_total_bytes = 0;
  std::optional<double> energy_kwh;
  std::optional<double> achieved_tflops;  // ESTIMATE from SM/tensor activity x peak rates
  std::optional<double> peak_tflops;      // theoretical tensor peak x GPUs
  // ESTIMATE: achieved TFLOPS per watt of the job's GPUs' mean power draw (power efficiency;
  // as much an estimate as the TFLOPS it divides).
  std::optional<double> tflops_per_watt;
  Zone zone = Zone::kUnknown;
  std::vector<ZoneChange> zone_history;
  int64_t cost_micro = 0;
};

struct OwnerReport {
  std::string name;  // user or team
  int jobs = 0;
  double alloc_gpu_hours = 0, used_gpu_hours = 0, idle_gpu_hours = 0;
  int64_t cost_micro = 0;
};

struct TimeBucket {
  WallTime start{};
  double avg_activity_pct = 0;
  int gpus_seen = 0;
  int gpus_allocated = 0;
  std::optional<double> fragmentation_pct;  // idle share of allocated-node GPUs (see .cc)
  // FGD's measure from the server's scheduler (fgd.h): GPU milli the workload's typical shapes
  // cannot use, as a share of the cluster's GPUs; mean of the bucket's samples.
  std::optional<double> fgd_fragmentation_pct;
};

struct QuarterAudit {
  std::string quarter;  // "2026-Q1"
  int jobs = 0;
  double alloc_gpu_hours = 0, used_gpu_hours = 0, idle_gpu_hours = 0;
};

struct Advice {
  std::string subject;  // job id
  std::string kind;     // mixed-precision, input-pipeline, fewer-gpus, mig, preemptible
  std::string text;
  std::string evidence;
};

// A team's compute-market account, from the ledger.
struct TeamAccount {
  std::string team;
  int64_t balance_micro = 0;
  int64_t granted_micro = 0;       // grants and refunds
  int64_t charged_micro = 0;       // charges for used allocations (positive)
  int64_t idle_charged_micro = 0;  // charges for idle allocations (positive)
  int64_t reclaimed_micro = 0;     // of the charges: preemptible use of reclaimed capacity
  int64_t entries = 0;
};

struct Report {
  WallTime from{}, to{};
  std::vector<JobReport> jobs;
  std::vector<OwnerReport> users, teams;
  std::vector<TimeBucket> timeline;
  std::vector<QuarterAudit> audit;
  std::vector<Advice> advice;
  double cluster_alloc_gpu_hours = 0, cluster_used_gpu_hours = 0, cluster_idle_gpu_hours = 0;
  std::vector<TeamAccount> accounts;  // empty without a market
  std::vector<std::string> notes;
};

// Fills r->accounts from the ledger (in seq order).
void AddLedgerToReport(const std::vector<LedgerEntry>& ledger, Report* r);

// The most time buckets a report's cluster series holds: a finer bucket over a long span is
// refused by the API (400 naming `bucket`) and widened by BuildReport, so no request can make
// the report (or its answer) grow without bound.
inline constexpr int64_t kMaxReportBuckets = 2000;

// The time a record set covers: its first to its last sample or job event.
std::pair<WallTime, WallTime> ReportSpan(const RecordSet& records);

struct ReportOptions {
  Duration bucket{0};  // 0 = about 48 buckets over the span; at most kMaxReportBuckets
  Duration max_sample_gap = std::chrono::minutes(5);  // longer holes are not counted as time
};

Report BuildReport(const RecordSet& records, const EfficiencyConfig& cfg,
                   const ReportOptions& opt = {});

std::string RenderText(const Report& r);
std::string RenderJson(const Report& r);
std::string RenderCsv(const Report& r);  // one row per job
// Self-contained HTML: tables, and charts drawn in the browser by `chart_script` (the report's
// chart bundle, web::ReportChartScript(), inlined with the report's JSON). Without a script the
// page says where each chart would be.
std::string RenderHtml(const Report& r, std::string_view chart_script = {});

}  // namespace stoker::efficiency
