#pragma once
// The efficiency engine inside the server.
//
// EfficiencyService is a server::ServerObserver (every heartbeat's GPU samples, as telemetry's
// snapshot JSON, feed zones, graded alerts, idle reclaim and the report's sample record; job
// changes keep its job directory) and a server::ApiExtension (its routes under /api/v1, its
// Prometheus families on /metrics, and the market's check at submission). Reclaim acts through
// the server's JobActions (requeue: the node stops the job and the server queues it again;
// cancel). The compute market keeps its ledger in a LedgerStore
// (StoreLedgerStore: the server's SQLite store).
//
// Threading: the server calls the observer from request threads, some while it holds its
// observer lock, so the service never calls back into the server from an observer callback:
// reclaim actions are queued and run by Evaluate(), which the service's own loop (Start)
// calls every service.evaluate_every, or a test calls directly. A heartbeat's report never
// waits for the engine: when its lock is taken the report is queued and the lock's holder
// applies it, in arrival order, before anyone reads (mu_ below).
//
// Routes (any user or admin token; agents get 403; users see their own jobs and team):
//   GET    /api/v1/zones                 GPU and job zones, consolidation plan
//   GET    /api/v1/alerts                active alerts
//   GET    /api/v1/silences              silences
//   POST   /api/v1/silences              create (admin) -> 201 {id, ...}
//   DELETE /api/v1/silences/{id}         remove (admin)
//   GET    /api/v1/reclaim               idle-reclaim log with evidence
//   GET    /api/v1/report?format=json|text|csv|html&bucket=1h
//   GET    /api/v1/ledger?team=T         market ledger entries
//   GET    /api/v1/budgets               balance per team

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "efficiency/alerts.h"
#include "efficiency/config.h"
#include "efficiency/idle_reclaim.h"
#include "efficiency/market.h"
#include "efficiency/records.h"
#include "efficiency/report.h"
#include "efficiency/zones.h"
#include "server/api.h"
#include "server/server.h"
#include "store/store.h"

namespace stoker::efficiency {

// The ledger in the server's store (table `ledger`, one row per entry, append-only).
class StoreLedgerStore final : public LedgerStore {
 public:
  explicit StoreLedgerStore(store::Store* store) : store_(store) {}
  Status Append(const LedgerEntry& e) override;
  Result<std::vector<LedgerEntry>> LoadAll() override;

 private:
  store::Store* store_;
};

// A job another engine runs (Slurm): its record is in reports, the GPUs it holds are the
// allocation table for samples (zones, alerts, the report's samples, the market's usage), but
// it is not in this service's idle reclaim (the engine reclaims its own jobs).
struct ExternalJob {
  std::string id;  // the engine's key, e.g. "slurm:1234" (never a server job id)
  std::string user;
  std::string job_class;
  bool interactive = false;
  WallTime submit{}, start{};
  WallTime end{};  // set: the job has ended (its usage is charged and its GPUs forgotten)
  std::vector<std::pair<std::string, uint32_t>> gpus;  // (node, GPU index) held now
  int64_t milli = 0;                                   // milli-GPU held now
};

class EfficiencyService final : public server::ServerObserver, public server::ApiExtension {
 public:
  // `ledger` may be null (no market); with market budgets configured it should not be.
  EfficiencyService(EfficiencyConfig cfg, server::JobActions* actions,
                    LedgerStore* ledger = nullptr);
  ~EfficiencyService() override;

  // Loads the ledger and grants configured budgets to teams that have none yet.
  Status Init(WallTime now);
  // The evaluation loop (alerts, reclaim, charges) on `clock`; Stop() joins it.
  void Start(Clock* clock);
  void Stop();

  // ServerObserver.
  // One second of a node's samples: a report of one tick.
  void OnHeartbeat(const std::string& node, const std::vector<GpuSample>& gpus,
                   WallTime at) override;
  // Every second of a report: the node's GPUs found once, each second observed at its own time
  // (zones, idle tracking, the report's samples and job alerts second by second; GPU alert
  // rules over the report's seconds in one pass per GPU, with the same 1 s resolution).
  void OnReport(const std::string& node, std::span<const server::SampleTick> ticks) override;
  void OnJobChanged(const server::Job& job) override;
  void OnJobsChanged(std::span<const server::Job> jobs) override;  // one lock for them all
  void OnFragmentation(const server::Fragmentation& f, WallTime at) override;
  // A job of another engine started, changed what it holds, stopped holding GPUs (`gpus`
  // empty: its usage so far is charged) or ended (`end` set).
  void OnExternalJob(const ExternalJob& job, WallTime now);

  // ApiExtension.
  void AddRoutes(http::Router* router) override;
  Status CheckSubmit(const server::Principal& who, const server::JobSpec& spec) override;
  // Prometheus text (efficiency/metrics.h) + market balances (a user: their own team's).
  std::string Metrics(const server::Principal& who) override;

  // Runs alert evaluation, idle reclaim and due charges at `now`, then the queued actions.
  void Evaluate(WallTime now);

  // The active alerts as of the last evaluation (those started since have no silence or
  // inhibition state yet), with their latest values; red first, then by fingerprint.
  std::vector<Alert> ActiveAlerts() const;
  std::vector<ZoneStatus> GpuZones() const;
  std::vector<ZoneStatus> JobZones() const;
  std::vector<ReclaimRecord> ReclaimLog() const;
  std::vector<LedgerEntry> Ledger() const;
  int64_t Balance(const std::string& team) const;
  // The report over the samples and jobs seen since start (bounded by service.keep_samples).
  // BadArgument (naming `bucket`) when the bucket would make more than kMaxReportBuckets.
  Result<Report> BuildServerReport(const ReportOptions& opt,
                                   const std::string& only_user = "") const;
  // The jobs (that ran) and samples the report is built from; a user's: their own jobs and the
  // samples naming them. With `ledger`, the market entries of the same scope too.
  RecordSet Records(const std::string& only_user = "",
                    std::vector<LedgerEntry>* ledger = nullptr) const;
  void AddNotifier(Notifier* n);
  // The chart script GET /report?format=html inlines (web::ReportChartScript(); the caller keeps
  // it alive). Set before the routes serve; without it the HTML report has no charts.
  void SetReportChartScript(std::string_view script) { report_chart_script_ = script; }

 private:
  class Directory;
  class Actions;
  struct Usage {  // per active job, since its last charge
    std::string team, model;
    Tier tier = Tier::kGuaranteed;
    int64_t milli = 0;  // milli-GPU held
    WallTime since{};
    int64_t busy_beats = 0, idle_beats = 0;
    bool reclaimed = false;
  };
  void ChargeLocked(const std::string& job, WallTime until);
  void OnJobChangedLocked(const server::Job& job);
  // Silver and bronze one-GPU jobs (those `visible` says) as the consolidation plan's input.
  std::vector<JobLoad> LoadsLocked(const std::function<bool(const std::string&)>& visible) const;
  // Hands the plan's new groups to the server: each job runs as a share from its next start;
  // movable jobs are requeued so that happens now. Once per job.
  void ApplyConsolidationLocked();
  void ObserveClusterLocked(WallTime now);
  std::string TeamOfLocked(const std::string& job_id) const;

  // The engine's state lock. A report that finds it taken is queued instead of waited for (up
  // to kMaxQueuedReports; past them it waits): whoever holds mu_ applies the queued reports, in
  // the order they came, when it takes the lock and again before it lets go (EngineLock). So a
  // heartbeat never waits for an evaluation or a /metrics render (at 10,000 nodes 50-200 ms of
  // this lock), and a reader still sees every report answered before it asked.
  class EngineLock;
  struct QueuedReport {
    std::string node;
    std::vector<server::SampleTick> ticks;
  };
  static constexpr size_t kMaxQueuedReports = 4096;
  void ApplyQueuedLocked();
  void ReleaseEngine();
  void ObserveReportLocked(const std::string& node, std::span<const server::SampleTick> ticks);

  mutable std::mutex mu_;
  std::mutex queue_mu_;  // guards queued_reports_; never held while mu_ is taken or waited for
  std::vector<QueuedReport> queued_reports_;  // in arrival order
  std::vector<QueuedReport> applying_;        // scratch of ApplyQueuedLocked
  std::string_view report_chart_script_;
  EfficiencyConfig cfg_;
  std::unique_ptr<Directory> directory_;
  std::unique_ptr<Actions> actions_;
  ZoneTracker zones_;
  AlertEngine alerts_;
  std::unique_ptr<IdleReclaimer> reclaimer_;
  std::unique_ptr<ComputeMarket> market_;
  // What the heartbeat path needs of each GPU, found by node and index (not by string per
  // sample).
  struct GpuState {
    bool seen = false;        // a sample of it arrived
    bool busy = false;        // a job held it at its latest sample
    std::string job;          // the job holding it ("" when none; see KnownJob)
    std::string model;        // the latest non-empty model name its samples gave
    std::string key;          // GpuKey of its latest sample
    std::string reclaim_key;  // "node/index" (the reclaimer's name of it)
    ZoneTracker::GpuRef zone;
    AlertEngine::GpuHandle alert = 0;
    // The labels its alerts carry, and what they were built from.
    Labels labels;
    std::string labels_job, labels_model;
    bool labelled = false;
    // Estimates from its latest sample and that sample's time (for /metrics).
    bool has_estimate = false;
    SampleEstimate estimate;
    WallTime estimated_at{};
    uint64_t mark = 0;  // the report that last listed it in report_gpus_
  };
  struct NodeState {
    std::vector<GpuState> gpus;  // by GPU index
  };
  // The GPU's state (created); null for an index past protocol::limits::kGpuIndexMax.
  GpuState* GpuAtLocked(const std::string& node, uint32_t index);
  // The GPU's state if it has one (nothing created).
  GpuState* FindGpuLocked(const std::string& node, uint32_t index);
  // Each job the engine was told of: its record, and the GPUs it was set on. A GPU's `job` is
  // the job holding it: a GPU set on by a later job is that job's, and the first one forgetting
  // its GPUs later leaves it alone (core/key_owners.h's ForgetHeld, the owner in the GPU's state).
  // Forgetting a job's GPUs costs what it held, not a walk of every GPU (a large scheduling pass
  // changes 80,000 jobs at once), and holding one costs no table of its own (this is the engine's
  // work on every job a pass places).
  struct KnownJob {
    JobRecord record;
    std::vector<std::pair<std::string, uint32_t>> gpus;  // (node, index), in the order set
    // A job of this server holding GPUs (listed in the directory): since when, as the
    // reclaimer reads it (its start, or when it was placed if it has not started).
    WallTime active_since{};
  };
  // The GPU's `job` and the job's `gpus` together.
  void SetJobOnGpuLocked(const std::pair<std::string, uint32_t>& key, const std::string& job,
                         KnownJob& known);
  void ForgetJobGpusLocked(const std::string& job, KnownJob& known);
  const std::string* ModelOfLocked(const std::pair<std::string, uint32_t>& key) const;
  std::unordered_map<std::string, NodeState> nodes_;
  // One second of a report: its time and samples.
  struct TickRef {
    WallTime at{};
    const std::vector<GpuSample>* gpus = nullptr;
  };
  void ObserveLocked(const std::string& node, std::span<const TickRef> ticks);
  RecordedSample* NextSampleSlotLocked();
  // Scratch of the heartbeat path, kept to reuse its storage.
  std::vector<TickRef> tick_refs_;
  std::vector<uint32_t> report_gpus_;  // GPU indices in the report, first appearance order
  uint64_t report_seq_ = 0;
  std::vector<AlertEngine::TimedRow> rows_;
  std::vector<std::pair<uint32_t, double>> job_activity_;  // (a GPU index of the job, activity)
  RecordedSample sample_scratch_;                          // the sample's record when none are kept
  std::set<std::pair<std::string, uint32_t>> reclaimed_gpus_;  // freed by reclaim
  std::map<int64_t, std::pair<WallTime, int>> queued_;         // job -> (submitted, GPUs)
  std::map<std::string, Usage> usage_;
  // The latest service.keep_samples samples, a ring: slots are overwritten in place (their
  // strings keep their storage), oldest at samples_head_ once full.
  std::vector<RecordedSample> samples_;
  size_t samples_head_ = 0;
  std::deque<FragmentationSample> fragmentation_;  // one a minute, bounded like samples_
  std::map<std::string, KnownJob> job_records_;
  // Jobs that already run as a share or were handed a consolidation: not planned again.
  std::set<std::string> consolidated_;
  WallTime last_seen_{};
  std::optional<ClusterSnapshot> last_cluster_;  // the last evaluation's (the backlog gauge)
  Clock* clock_ = nullptr;  // set by Start(); the time of API actions (silences)

  std::mutex loop_mu_;
  std::condition_variable loop_cv_;
  bool stopping_ = false;
  std::thread loop_;
};

}  // namespace stoker::efficiency
