#include "integration/efficiency_service.h"

#include <fmt/core.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "core/key_owners.h"
#include "core/prometheus_text.h"
#include "efficiency/activity.h"
#include "efficiency/api_json.h"
#include "efficiency/metrics.h"
#include "protocol/limits.h"

namespace stoker::efficiency {

using nlohmann::json;

// ---- ledger in the server's store -----------------------------------------------------------

Status StoreLedgerStore::Append(const LedgerEntry& e) {
  store::WriteBatch b;
  b.AddLedger(store::LedgerRow{
      e.seq, std::chrono::duration_cast<std::chrono::milliseconds>(e.at.time_since_epoch()).count(),
      e.team, LedgerEntryToJson(e)});
  return store_->Apply(std::move(b));
}

Result<std::vector<LedgerEntry>> StoreLedgerStore::LoadAll() {
  STOKER_ASSIGN_OR_RETURN(auto rows, store_->LoadLedger());
  std::vector<LedgerEntry> out;
  out.reserve(rows.size());
  for (const auto& row : rows) {
    STOKER_ASSIGN_OR_RETURN(LedgerEntry e,
                            LedgerEntryFromJson(row.doc, "ledger seq " + std::to_string(row.seq)));
    if (e.seq != static_cast<int64_t>(out.size()) + 1) {
      return InvalidArgument("ledger seq " + std::to_string(row.seq) + ": expected " +
                             std::to_string(out.size() + 1) + " (ledger is append-only)");
    }
    out.push_back(std::move(e));
  }
  return out;
}

// ---- the service ----------------------------------------------------------------------------

// The jobs holding GPUs, as the reclaimer reads them: each one's record (KnownJob), with the
// time it has held them since.
class EfficiencyService::Directory final : public JobDirectory {
 public:
  std::optional<JobInfo> Find(const std::string& id) const override {
    auto it = jobs_.find(id);
    if (it == jobs_.end()) return std::nullopt;
    return Info(*it->second);
  }
  std::vector<JobInfo> Running() const override {
    std::vector<JobInfo> out;
    out.reserve(jobs_.size());
    for (const auto& [k, v] : jobs_) out.push_back(Info(*v));
    return out;
  }
  static JobInfo Info(const KnownJob& k) {
    JobInfo info = k.record.info;
    info.start = k.active_since;
    return info;
  }
  std::map<std::string, const KnownJob*> jobs_;  // into job_records_ (never erased)
};

class EfficiencyService::Actions final : public ReclaimActions {
 public:
  explicit Actions(server::JobActions* server) : server_(server) {}
  Status Warn(const JobInfo& j, const std::string& message) override {
    spdlog::warn("idle reclaim: job {} ({}): {}", j.id, j.user, message);
    return Status::Ok();
  }
  Status Requeue(const JobInfo& j, const std::string& reason) override {
    return Queue(j, reason, /*requeue=*/true);
  }
  Status Cancel(const JobInfo& j, const std::string& reason) override {
    return Queue(j, reason, /*requeue=*/false);
  }
  enum class Kind : uint8_t { kCancel, kRequeue, kConsolidate, kConsolidateNow };
  struct Pending {
    int64_t id;
    std::string reason;
    Kind kind;
    int32_t milli = 0;  // kConsolidate*: the share
  };
  Status Consolidate(const std::string& job, int32_t milli, const std::string& reason, bool now) {
    STOKER_ASSIGN_OR_RETURN(const int64_t id, ServerJobId(job));
    pending_.push_back(
        Pending{id, reason, now ? Kind::kConsolidateNow : Kind::kConsolidate, milli});
    return Status::Ok();
  }
  std::vector<Pending> Take() {
    std::vector<Pending> out;
    out.swap(pending_);
    return out;
  }
  void Flush(const std::vector<Pending>& actions) {
    for (const Pending& a : actions) {
      Status s;
      const char* what = "cancel";
      switch (a.kind) {
        case Kind::kCancel:
          s = server_->CancelJob(a.id, a.reason);
          break;
        case Kind::kRequeue:
          what = "requeue";
          s = server_->RequeueJob(a.id, a.reason);
          break;
        case Kind::kConsolidate:
        case Kind::kConsolidateNow:
          what = "consolidate";
          s = server_->ConsolidateAtNextStart(a.id, a.milli, a.reason);
          if (s.ok() && a.kind == Kind::kConsolidateNow) {
            s = server_->RequeueJob(a.id, a.reason + "; movable: restarted now as a share");
          }
          break;
      }
      if (!s.ok()) spdlog::error("efficiency: {} job {}: {}", what, a.id, s.ToString());
    }
  }

 private:
  // Queued, not called: the engine decides while holding its own lock, and the server notifies
  // its observers (this service among them) of the change. Evaluate() runs them unlocked.
  Status Queue(const JobInfo& j, const std::string& reason, bool requeue) {
    STOKER_ASSIGN_OR_RETURN(const int64_t id, ServerJobId(j.id));
    pending_.push_back(
        Pending{id, "idle reclaim: " + reason, requeue ? Kind::kRequeue : Kind::kCancel});
    return Status::Ok();
  }

  // The server's id of an engine job key (its decimal id), for an action on it.
  Result<int64_t> ServerJobId(const std::string& job) const {
    if (!server_) return FailedPrecondition("no server actions");
    char* end = nullptr;
    const long long id = std::strtoll(job.c_str(), &end, 10);
    if (end == job.c_str() || *end != '\0' || id <= 0) {
      return InvalidArgument("job id '" + job + "' is not a server job");
    }
    return static_cast<int64_t>(id);
  }

  server::JobActions* server_;
  std::vector<Pending> pending_;
};

EfficiencyService::EfficiencyService(EfficiencyConfig cfg, server::JobActions* actions,
                                     LedgerStore* ledger)
    : cfg_(std::move(cfg)),
      directory_(std::make_unique<Directory>()),
      actions_(std::make_unique<Actions>(actions)),
      zones_(cfg_.zones),
      alerts_(cfg_.alerting, cfg_.zones.metric) {
  reclaimer_ = std::make_unique<IdleReclaimer>(cfg_.idle, *directory_, *actions_);
  if (ledger && cfg_.market.enabled())
    market_ = std::make_unique<ComputeMarket>(cfg_.market, *ledger);
}

EfficiencyService::~EfficiencyService() { Stop(); }

// Holds mu_ with the queued reports applied (see mu_ in the header). Readers are const members
// and take it too: applying a report that was already answered is not a change they may not
// make, since the report counts as seen from its answer on.
class EfficiencyService::EngineLock {
 public:
  explicit EngineLock(const EfficiencyService* s) : s_(const_cast<EfficiencyService*>(s)) {
    s_->mu_.lock();
    s_->ApplyQueuedLocked();
  }
  EngineLock(const EfficiencyService* s, std::adopt_lock_t)
      : s_(const_cast<EfficiencyService*>(s)) {
    s_->ApplyQueuedLocked();
  }
  ~EngineLock() { s_->ReleaseEngine(); }
  EngineLock(const EngineLock&) = delete;
  EngineLock& operator=(const EngineLock&) = delete;

 private:
  EfficiencyService* s_;
};

Status EfficiencyService::Init(WallTime now) {
  EngineLock lock(this);
  if (!market_) return Status::Ok();
  STOKER_RETURN_IF_ERROR(market_->Load());
  return market_->GrantInitialBudgets(now);
}

void EfficiencyService::Start(Clock* clock) {
  {
    EngineLock lock(this);
    clock_ = clock;
  }
  {
    std::lock_guard lock(loop_mu_);
    stopping_ = false;
  }
  loop_ = std::thread([this, clock] {
    std::unique_lock lock(loop_mu_);
    while (!stopping_) {
      if (loop_cv_.wait_for(lock, cfg_.service.evaluate_every, [&] { return stopping_; })) break;
      lock.unlock();
      Evaluate(clock->WallNow());
      lock.lock();
    }
  });
}

void EfficiencyService::Stop() {
  {
    std::lock_guard lock(loop_mu_);
    stopping_ = true;
  }
  loop_cv_.notify_all();
  if (loop_.joinable()) loop_.join();
}

void EfficiencyService::AddNotifier(Notifier* n) {
  EngineLock lock(this);
  alerts_.AddNotifier(n);
}

namespace {

// milli-GPU a job holds: whole GPUs, a share of one, or MIG slices of seven.
int64_t HeldMilli(const server::Assignment& a) {
  if (a.mig_slices > 0) return a.mig_slices * 1000 / 7;
  const int64_t per = a.gpu_milli > 0 ? a.gpu_milli : 1000;
  return per * static_cast<int64_t>(a.gpu_indices.size());
}

WallTime FromMs(int64_t ms) { return WallTime(std::chrono::milliseconds(ms)); }

}  // namespace

void EfficiencyService::OnFragmentation(const server::Fragmentation& f, WallTime at) {
  EngineLock lock(this);
  fragmentation_.push_back(FragmentationSample{at, f.fragmented_gpu_milli, f.total_gpu_milli});
  while (fragmentation_.size() > cfg_.service.keep_samples) fragmentation_.pop_front();
}

void EfficiencyService::OnJobChanged(const server::Job& job) {
  EngineLock lock(this);
  OnJobChangedLocked(job);
}

void EfficiencyService::OnJobsChanged(std::span<const server::Job> jobs) {
  EngineLock lock(this);
  for (const server::Job& job : jobs) OnJobChangedLocked(job);
}

void EfficiencyService::OnJobChangedLocked(const server::Job& job) {
  const std::string id = std::to_string(job.id);
  if (job.state == server::JobState::kQueued) {
    queued_[job.id] = {FromMs(job.submit_ms), std::max<int>(1, protocol::TotalGpus(job.spec))};
  } else {
    queued_.erase(job.id);
  }
  KnownJob& known = job_records_[id];
  JobRecord& rec = known.record;
  rec.info.id = id;
  rec.info.user = job.user;
  rec.info.team = cfg_.market.TeamOf(job.user);
  rec.info.job_class = job.spec.job_class;
  rec.info.preemptible = job.spec.preemptible;
  rec.info.movable = job.spec.movable;
  // Already a share (or promised one): the plan leaves it alone.
  if (job.consolidate_milli > 0 ||
      (job.assignment && job.assignment->gpu_milli > 0 && job.assignment->gpu_milli < 1000)) {
    consolidated_.insert(id);
  }
  rec.submit = FromMs(job.submit_ms);
  if (job.start_ms > 0) rec.info.start = FromMs(job.start_ms);
  if (job.end_ms > 0) rec.end = FromMs(job.end_ms);

  // Forget the job's old GPUs, then record the current ones while it holds resources.
  ForgetJobGpusLocked(id, known);
  // Where it runs: its assignment, or every part of a gang (one job on several nodes).
  if (!server::IsActive(job.state) || (!job.assignment && job.parts.empty())) {
    if (usage_.count(id)) {
      ChargeLocked(id, job.end_ms > 0 ? FromMs(job.end_ms) : last_seen_);
      usage_.erase(id);
    }
    directory_->jobs_.erase(id);
    if (!server::IsActive(job.state) && job.state != server::JobState::kQueued) {
      consolidated_.erase(id);
    }
    reclaimer_->Forget(id);
    zones_.ForgetJob(id);
    return;
  }
  known.active_since = job.start_ms > 0 ? FromMs(job.start_ms) : last_seen_;
  rec.info.gpus.clear();
  bool on_reclaimed = false;
  std::string model;
  int64_t held_milli = 0;
  auto hold = [&](const server::Assignment& a) {
    held_milli += HeldMilli(a);
    for (uint32_t idx : a.gpu_indices) {
      const std::pair<std::string, uint32_t> key{a.node, idx};
      SetJobOnGpuLocked(key, id, known);
      rec.info.gpus.push_back(a.node + "/" + std::to_string(idx));
      on_reclaimed |= reclaimed_gpus_.count(key) > 0;
      // Guaranteed work takes the GPU back from the preemptible tier.
      if (!job.spec.preemptible) reclaimed_gpus_.erase(key);
      if (const std::string* m = ModelOfLocked(key); m != nullptr && model.empty()) model = *m;
    }
  };
  if (job.assignment) hold(*job.assignment);
  for (const server::GangPart& part : job.parts) hold(part.assignment);
  rec.info.gpu_model = model;
  auto [it, fresh] = usage_.try_emplace(id);
  Usage& u = it->second;
  if (fresh) {
    u.team = rec.info.team;
    u.tier = job.spec.preemptible ? Tier::kPreemptible : Tier::kGuaranteed;
    u.since = known.active_since;
    u.reclaimed = job.spec.preemptible && on_reclaimed;
  }
  u.milli = held_milli;
  if (!model.empty()) u.model = std::move(model);
  if (job.start_ms > 0 && u.busy_beats == 0 && u.idle_beats == 0) u.since = FromMs(job.start_ms);
  directory_->jobs_.insert_or_assign(id, &known);
}

void EfficiencyService::OnExternalJob(const ExternalJob& job, WallTime now) {
  EngineLock lock(this);
  KnownJob& known = job_records_[job.id];
  JobRecord& rec = known.record;
  rec.info.id = job.id;
  rec.info.user = job.user;
  rec.info.team = cfg_.market.TeamOf(job.user);
  rec.info.job_class = job.job_class;
  rec.info.interactive = job.interactive;
  rec.submit = job.submit;
  if (job.start != WallTime{}) rec.info.start = job.start;
  if (job.end != WallTime{}) rec.end = job.end;
  ForgetJobGpusLocked(job.id, known);
  if (job.end != WallTime{} || job.gpus.empty()) {
    if (usage_.count(job.id)) {
      ChargeLocked(job.id, job.end != WallTime{} ? job.end : now);
      usage_.erase(job.id);
    }
    if (job.end != WallTime{}) zones_.ForgetJob(job.id);
    return;
  }
  // The allocation table: samples of these GPUs are this job's.
  rec.info.gpus.clear();
  std::string model;
  for (const auto& key : job.gpus) {
    SetJobOnGpuLocked(key, job.id, known);
    rec.info.gpus.push_back(key.first + "/" + std::to_string(key.second));
    if (const std::string* m = ModelOfLocked(key); m != nullptr && model.empty()) model = *m;
  }
  if (!model.empty()) rec.info.gpu_model = model;
  auto [it, fresh] = usage_.try_emplace(job.id);
  Usage& u = it->second;
  if (fresh) {
    u.team = rec.info.team;
    u.tier = Tier::kGuaranteed;
    u.since = job.start != WallTime{} ? job.start : now;
  }
  u.milli = job.milli;
  if (!model.empty()) u.model = model;
}

EfficiencyService::GpuState* EfficiencyService::GpuAtLocked(const std::string& node,
                                                            uint32_t index) {
  if (index > protocol::limits::kGpuIndexMax) return nullptr;
  NodeState& n = nodes_[node];
  if (n.gpus.size() <= index) n.gpus.resize(index + 1);
  GpuState& g = n.gpus[index];
  if (g.reclaim_key.empty()) g.reclaim_key = node + "/" + std::to_string(index);
  return &g;
}

EfficiencyService::GpuState* EfficiencyService::FindGpuLocked(const std::string& node,
                                                              uint32_t index) {
  auto n = nodes_.find(node);
  if (n == nodes_.end() || index >= n->second.gpus.size()) return nullptr;
  return &n->second.gpus[index];
}

void EfficiencyService::SetJobOnGpuLocked(const std::pair<std::string, uint32_t>& key,
                                          const std::string& job, KnownJob& known) {
  GpuState* g = GpuAtLocked(key.first, key.second);
  if (g == nullptr) return;  // past the GPU index limit: no GPU the engine keeps
  g->job = job;
  known.gpus.push_back(key);
}

void EfficiencyService::ForgetJobGpusLocked(const std::string& job, KnownJob& known) {
  ForgetHeld(known.gpus, job, [&](const std::pair<std::string, uint32_t>& key) {
    GpuState* g = FindGpuLocked(key.first, key.second);
    return g == nullptr ? nullptr : &g->job;
  });
}

const std::string* EfficiencyService::ModelOfLocked(
    const std::pair<std::string, uint32_t>& key) const {
  auto n = nodes_.find(key.first);
  if (n == nodes_.end() || key.second >= n->second.gpus.size()) return nullptr;
  const GpuState& g = n->second.gpus[key.second];
  return g.model.empty() ? nullptr : &g.model;
}

namespace {

// Whether `key` is GpuKey(s), without building it.
bool IsKeyOf(const std::string& key, const GpuSample& s) {
  if (!s.id.uuid.empty()) return key == s.id.uuid;
  char buf[16];
  const int n = std::snprintf(buf, sizeof buf, "gpu%u", s.id.index);
  return key == std::string_view(buf, static_cast<size_t>(n));
}

}  // namespace

void EfficiencyService::OnHeartbeat(const std::string& node, const std::vector<GpuSample>& gpus,
                                    WallTime at) {
  const TickRef tick{at, &gpus};
  EngineLock lock(this);
  ObserveLocked(node, std::span<const TickRef>(&tick, 1));
}

void EfficiencyService::OnReport(const std::string& node,
                                 std::span<const server::SampleTick> ticks) {
  if (!mu_.try_lock()) {
    // Taken (an evaluation, a render, another report): queue a copy for its holder to apply.
    QueuedReport copy{node, {ticks.begin(), ticks.end()}};
    bool queued = false;
    {
      std::lock_guard q(queue_mu_);
      if (queued_reports_.size() < kMaxQueuedReports) {
        queued_reports_.push_back(std::move(copy));
        queued = true;
      }
    }
    if (queued) {
      // The holder may have let go between the two tries: then apply it here.
      if (mu_.try_lock()) {
        EngineLock applied(this, std::adopt_lock);
      }
      return;
    }
    mu_.lock();  // too many queued: wait, as every report did before the queue
  }
  EngineLock lock(this, std::adopt_lock);  // applies the reports queued before this one first
  ObserveReportLocked(node, ticks);
}

void EfficiencyService::ObserveReportLocked(const std::string& node,
                                            std::span<const server::SampleTick> ticks) {
  tick_refs_.clear();
  for (const server::SampleTick& t : ticks) tick_refs_.push_back(TickRef{t.at, &t.gpus});
  ObserveLocked(node, tick_refs_);
}

void EfficiencyService::ApplyQueuedLocked() {
  for (;;) {
    {
      std::lock_guard q(queue_mu_);
      if (queued_reports_.empty()) return;
      applying_.swap(queued_reports_);
    }
    for (const QueuedReport& r : applying_) {
      // Applied by whoever holds the lock, even a destructor: a report that throws (a bug) costs
      // that report, as it cost its own request before the queue, not the lock or the process.
      try {
        ObserveReportLocked(r.node, r.ticks);
      } catch (const std::exception& e) {
        spdlog::error("efficiency: a report of node {} was not applied: {}", r.node, e.what());
      }
    }
    applying_.clear();
  }
}

void EfficiencyService::ReleaseEngine() {
  for (;;) {
    ApplyQueuedLocked();
    mu_.unlock();
    // A report queued after the last look, while the lock was still taken: its reporter gave
    // up on the lock, so apply it unless another holder now has the lock (and will).
    {
      std::lock_guard q(queue_mu_);
      if (queued_reports_.empty()) return;
    }
    if (!mu_.try_lock()) return;
  }
}

RecordedSample* EfficiencyService::NextSampleSlotLocked() {
  const size_t keep = cfg_.service.keep_samples;
  if (keep == 0) return &sample_scratch_;
  if (samples_.size() < keep) return &samples_.emplace_back();
  RecordedSample* slot = &samples_[samples_head_];
  samples_head_ = (samples_head_ + 1) % keep;
  return slot;
}

void EfficiencyService::ObserveLocked(const std::string& node, std::span<const TickRef> ticks) {
  auto time_of = [](const GpuSample& s, WallTime at) {
    return s.timestamp == WallTime{} ? at : s.timestamp;
  };
  // The node's GPUs, sized once for the report (nothing below resizes them).
  size_t top = 0;
  for (const TickRef& t : ticks) {
    for (const GpuSample& s : *t.gpus) {
      if (s.id.index <= protocol::limits::kGpuIndexMax) top = std::max<size_t>(top, s.id.index + 1);
    }
  }
  if (top == 0) {
    for (const TickRef& t : ticks) last_seen_ = std::max(last_seen_, t.at);
    return;
  }
  (void)GpuAtLocked(node, static_cast<uint32_t>(top - 1));
  NodeState& ns = nodes_.find(node)->second;
  ++report_seq_;
  report_gpus_.clear();

  // Second by second: zones, idle tracking, the report's samples, estimates and job alerts,
  // in the order the seconds were taken.
  for (const TickRef& t : ticks) {
    last_seen_ = std::max(last_seen_, t.at);
    job_activity_.clear();
    for (const GpuSample& s : *t.gpus) {
      if (s.id.index > protocol::limits::kGpuIndexMax) continue;
      GpuState& g = ns.gpus[s.id.index];
      if (g.mark != report_seq_) {
        g.mark = report_seq_;
        report_gpus_.push_back(s.id.index);
      }
      const WallTime ts = time_of(s, t.at);
      g.seen = true;
      if (!s.id.name.empty() && g.model != s.id.name) g.model = s.id.name;
      if (!g.zone.valid() || !IsKeyOf(g.key, s)) {
        g.key = GpuKey(s);
        g.zone = zones_.TrackGpu(g.key);
        g.alert = alerts_.InternGpu(g.key);
      }
      // "allocated" comes from the server's allocation table: a job holds the GPU even when
      // none of its processes shows on it (the idle case this engine exists for).
      g.busy = !g.job.empty();
      const std::span<const std::string> jobs(&g.job, g.busy ? 1 : 0);
      ActivityMetric used = ActivityMetric::kAuto;
      const std::optional<int64_t> activity = ActivityMilli(s, cfg_.zones.metric, &used);
      if (activity) zones_.ObserveActivity(g.zone, ts, *activity, used, jobs);
      if (g.busy && activity) {
        auto acc = std::find_if(job_activity_.begin(), job_activity_.end(),
                                [&](const auto& e) { return ns.gpus[e.first].job == g.job; });
        if (acc == job_activity_.end()) {
          job_activity_.emplace_back(s.id.index, 0.0);
          acc = job_activity_.end() - 1;
        }
        acc->second = std::max(acc->second, static_cast<double>(*activity) / 1000.0);
        reclaimer_->Observe(g.job, g.reclaim_key, ts, *activity);
      }
      RecordedSample* rec = NextSampleSlotLocked();
      FillRecordedSample(s, node, g.job, rec);
      rec->t = ts;
      if (rec->model.empty() && !g.model.empty()) rec->model = g.model;
      if (const SampleEstimate e = EstimateSample(*rec); e.tflops) {
        g.has_estimate = true;
        g.estimate = e;
        g.estimated_at = ts;
      } else {
        g.has_estimate = false;
      }
    }
    // Job-scope rules (JobGpusIdle) see the job's busiest GPU in this second; the market
    // counts the second as idle or busy for the job's next charge. In job order.
    std::sort(job_activity_.begin(), job_activity_.end(), [&](const auto& a, const auto& b) {
      return ns.gpus[a.first].job < ns.gpus[b.first].job;
    });
    for (const auto& [index, activity] : job_activity_) {
      const std::string& job = ns.gpus[index].job;
      alerts_.ObserveJob(job, t.at, {{"activity", activity}, {"idle", activity == 0 ? 1.0 : 0.0}},
                         {{"hostname", node}});
      if (auto u = usage_.find(job); u != usage_.end())
        ++(activity == 0 ? u->second.idle_beats : u->second.busy_beats);
    }
  }

  // GPU alert rules: each GPU's seconds in one call, each still evaluated at its own time.
  for (const uint32_t index : report_gpus_) {
    GpuState& g = ns.gpus[index];
    rows_.clear();
    auto flush = [&] {
      if (rows_.empty()) return;
      alerts_.ObserveGpuRows(g.alert, rows_, g.labels);
      rows_.clear();
    };
    for (const TickRef& t : ticks) {
      for (const GpuSample& s : *t.gpus) {
        if (s.id.index != index) continue;
        if (!IsKeyOf(g.key, s)) {
          flush();
          g.key = GpuKey(s);
          g.zone = zones_.TrackGpu(g.key);
          g.alert = alerts_.InternGpu(g.key);
        }
        if (!g.labelled || g.labels_job != g.job || g.labels_model != s.id.name) {
          flush();
          g.labels.clear();
          g.labels["hostname"] = node;
          if (!g.job.empty()) g.labels["job"] = g.job;
          if (!s.id.name.empty()) g.labels["model"] = s.id.name;
          g.labels_job = g.job;
          g.labels_model = s.id.name;
          g.labelled = true;
        }
        AlertEngine::TimedRow& row = rows_.emplace_back();
        row.t = time_of(s, t.at);
        FillGpuSignals(s, cfg_.zones.metric, &row.signals);
        if (g.busy) row.signals.Set(GpuSignal::kAllocated, 1);
      }
    }
    flush();
  }
  // Alert states advance with each observation; silences, inhibition, notifications (which may
  // post to Alertmanager) and idle-reclaim decisions wait for Evaluate(), off the heartbeat
  // path: reclaim walks every running job, which made each heartbeat O(jobs) under this lock,
  // and its decisions (minutes to hours apart) need no per-heartbeat check.
}

void EfficiencyService::ObserveClusterLocked(WallTime now) {
  ClusterSnapshot c;
  for (const auto& [name, n] : nodes_) {
    for (const GpuState& g : n.gpus) c.idle_gpus += g.seen && !g.busy ? 1 : 0;
  }
  c.pending_jobs = static_cast<int>(queued_.size());
  for (const auto& [id, q] : queued_) {
    if (q.second <= c.idle_gpus && now > q.first) {
      c.backlog_wait_s =
          std::max(c.backlog_wait_s, std::chrono::duration<double>(now - q.first).count());
    }
  }
  alerts_.ObserveCluster(now, c);
  last_cluster_ = c;
}

void EfficiencyService::ChargeLocked(const std::string& job, WallTime until) {
  if (!market_) return;
  auto it = usage_.find(job);
  if (it == usage_.end()) return;
  Usage& u = it->second;
  if (until <= u.since || u.milli <= 0) return;
  const int64_t ms = std::chrono::duration_cast<std::chrono::milliseconds>(until - u.since).count();
  const int64_t total = u.milli * ms / 1000;  // milli-GPU-seconds
  const int64_t beats = u.busy_beats + u.idle_beats;
  // Idle share from the heartbeats: no samples is no evidence of idleness.
  const int64_t idle = beats > 0 ? total * u.idle_beats / beats : 0;
  for (const auto& [amount, is_idle] : {std::pair{total - idle, false}, std::pair{idle, true}}) {
    if (amount <= 0) continue;
    UsageCharge c;
    c.team = u.team;
    c.job = job;
    c.gpu_model = u.model;
    c.tier = u.tier;
    c.milli_gpu_seconds = amount;
    c.idle = is_idle;
    c.reclaimed = u.reclaimed;
    c.at = until;
    auto e = market_->Charge(c);
    if (!e.ok()) spdlog::error("market: charge job {}: {}", job, e.status().ToString());
  }
  u.since = until;
  u.busy_beats = u.idle_beats = 0;
}

std::vector<JobLoad> EfficiencyService::LoadsLocked(
    const std::function<bool(const std::string&)>& visible) const {
  std::vector<JobLoad> loads;
  for (const ZoneStatus& z : zones_.Jobs()) {
    if (!visible(z.key)) continue;
    if (z.zone != Zone::kSilver && z.zone != Zone::kBronze) continue;
    auto info = directory_->Find(z.key);
    if (!info) continue;
    JobLoad l;
    l.job = z.key;
    l.user = info->user;
    l.gpu_model = info->gpu_model;
    l.gpus = static_cast<int>(info->gpus.size());
    l.mean_milli = z.mean_milli;
    l.movable = info->movable;
    loads.push_back(std::move(l));
  }
  return loads;
}

void EfficiencyService::ApplyConsolidationLocked() {
  std::vector<JobLoad> loads =
      LoadsLocked([&](const std::string& job) { return !consolidated_.count(job); });
  std::map<std::string, int64_t> mean;
  for (const JobLoad& l : loads) mean[l.job] = l.mean_milli;
  const ConsolidationPlan plan = PlanConsolidation(std::move(loads), cfg_.zones);
  for (const PackGroup& g : plan.groups) {
    const std::string why = fmt::format(
        "consolidation: {} jobs using {:.0f} % together fit one GPU ({})", g.jobs.size(),
        static_cast<double>(g.combined_milli) / 1000.0, ShareModeName(g.mode));
    for (const std::string& job : g.jobs) {
      // Shares in proportion to use: together exactly one GPU, each above what it used.
      const int64_t share = mean[job] * 1000 / std::max<int64_t>(g.combined_milli, 1);
      const auto milli = static_cast<int32_t>(std::clamp<int64_t>(share, 1, 999));
      if (actions_->Consolidate(job, milli, why, g.apply_now).ok()) consolidated_.insert(job);
    }
  }
}

void EfficiencyService::Evaluate(WallTime now) {
  std::vector<Actions::Pending> cancels;
  {
    EngineLock lock(this);
    ObserveClusterLocked(now);
    alerts_.Apply(now);
    // The freed GPUs are offered to the preemptible tier (sold at the reclaimed discount): each
    // reclaimed job's own GPUs, not a walk over every GPU (at 10,000 nodes a walk per record held
    // this lock, which every heartbeat takes, for tens of milliseconds).
    std::unordered_set<std::string> reclaimed_jobs;
    for (const ReclaimRecord& r : reclaimer_->Evaluate(now)) {
      if (r.dry_run || r.action == ReclaimAction::kWarn || !r.result.ok()) continue;
      reclaimed_jobs.insert(r.job);
    }
    for (const std::string& job : reclaimed_jobs) {
      auto known = job_records_.find(job);
      if (known == job_records_.end()) continue;
      ForEachStillHeld(
          known->second.gpus, job,
          [&](const std::pair<std::string, uint32_t>& key) {
            const GpuState* g = FindGpuLocked(key.first, key.second);
            return g == nullptr ? nullptr : &g->job;
          },
          [&](const std::pair<std::string, uint32_t>& key) { reclaimed_gpus_.insert(key); });
    }
    for (auto& [job, u] : usage_) {
      if (now - u.since >= cfg_.market.charge_interval) ChargeLocked(job, now);
    }
    if (cfg_.zones.apply_consolidation) ApplyConsolidationLocked();
    cancels = actions_->Take();
  }
  actions_->Flush(cancels);
}

std::string EfficiencyService::Metrics(const server::Principal& who) {
  MetricsSnapshot snap;
  std::vector<std::pair<std::string, int64_t>> balances;  // team, balance
  {
    // Copied out under the lock; the text (tens of MB at 10,000 nodes) is written after it.
    EngineLock lock(this);
    EngineState st;
    st.zones = &zones_;
    st.alerts = &alerts_;
    // The backlog gauge as of the last evaluation (none before the first).
    st.cluster = last_cluster_ ? &*last_cluster_ : nullptr;
    const std::vector<ReclaimRecord> log = reclaimer_->log();
    st.reclaim_log = &log;
    snap = TakeMetrics(st);
    // Estimates of GPUs heard from within the zone window (a GPU gone quiet drops out); a key
    // two nodes report: the latest wins (FinishMetrics).
    snap.estimates = true;
    for (const auto& [name, n] : nodes_) {
      for (const GpuState& g : n.gpus) {
        if (!g.has_estimate || g.estimated_at < last_seen_ - cfg_.zones.window) continue;
        snap.estimate_rows.push_back({g.key, g.estimate, g.estimated_at});
      }
    }
    if (market_) {
      // Admins see every team's balance, a user their own team's.
      std::set<std::string> teams;
      const std::string own = cfg_.market.TeamOf(who.name);
      for (const auto& e : market_->entries()) {
        if (who.role == server::Role::kAdmin || e.team == own) teams.insert(e.team);
      }
      for (const auto& t : teams) balances.emplace_back(t, market_->Balance(t));
    }
  }
  FinishMetrics(&snap);
  std::string out;
  RenderMetrics(snap, &out);
  if (market_) {
    prom::TextWriter w;
    w.Family("stoker_market_balance_credits", "Compute-market balance of a team (credits).",
             prom::Type::kGauge);
    for (const auto& [team, balance] : balances) {
      w.Sample("stoker_market_balance_credits", {{"team", team}},
               static_cast<double>(balance) / 1e6);
    }
    out += w.text();
  }
  return out;
}

std::vector<Alert> EfficiencyService::ActiveAlerts() const {
  EngineLock lock(this);
  std::vector<Alert> out;
  alerts_.ForEachActive([&out](const Alert& a) { out.push_back(a); }, /*evaluated_only=*/true);
  return out;
}
std::vector<ZoneStatus> EfficiencyService::GpuZones() const {
  EngineLock lock(this);
  return zones_.Gpus();
}
std::vector<ZoneStatus> EfficiencyService::JobZones() const {
  EngineLock lock(this);
  return zones_.Jobs();
}
std::vector<ReclaimRecord> EfficiencyService::ReclaimLog() const {
  EngineLock lock(this);
  return reclaimer_->log();
}
std::vector<LedgerEntry> EfficiencyService::Ledger() const {
  EngineLock lock(this);
  return market_ ? market_->entries() : std::vector<LedgerEntry>{};
}
int64_t EfficiencyService::Balance(const std::string& team) const {
  EngineLock lock(this);
  return market_ ? market_->Balance(team) : 0;
}

RecordSet EfficiencyService::Records(const std::string& only_user,
                                     std::vector<LedgerEntry>* ledger) const {
  RecordSet rec;
  {
    EngineLock lock(this);
    std::set<std::string> mine;
    for (const auto& [id, known] : job_records_) {
      const JobRecord& j = known.record;
      if (!only_user.empty() && j.info.user != only_user) continue;
      if (j.info.start == WallTime{}) continue;  // never ran
      rec.jobs.push_back(j);
      mine.insert(id);
    }
    for (size_t i = 0; i < samples_.size(); ++i) {
      const RecordedSample& s = samples_[(samples_head_ + i) % samples_.size()];
      if (only_user.empty() || mine.count(s.job)) rec.samples.push_back(s);
    }
    // Cluster-wide: every user's report shows the same fragmentation.
    rec.fragmentation.assign(fragmentation_.begin(), fragmentation_.end());
    if (market_) {
      const std::string team = only_user.empty() ? "" : cfg_.market.TeamOf(only_user);
      for (const auto& e : market_->entries()) {
        if (ledger != nullptr && (team.empty() || e.team == team)) ledger->push_back(e);
      }
    }
  }
  std::stable_sort(rec.samples.begin(), rec.samples.end(),
                   [](const RecordedSample& a, const RecordedSample& b) { return a.t < b.t; });
  return rec;
}

Result<Report> EfficiencyService::BuildServerReport(const ReportOptions& opt,
                                                    const std::string& only_user) const {
  std::vector<LedgerEntry> ledger;
  const RecordSet rec = Records(only_user, &ledger);
  if (opt.bucket > Duration{0}) {
    const auto [from, to] = ReportSpan(rec);
    const int64_t buckets = (to - from) / opt.bucket + 1;
    if (buckets > kMaxReportBuckets) {
      const Duration least = (to - from) / (kMaxReportBuckets - 1) + std::chrono::seconds(1);
      return InvalidArgument(
          "bucket: " + FormatDuration(opt.bucket) + " makes " + std::to_string(buckets) +
          " buckets over this report's " + FormatDuration(to - from) + "; at most " +
          std::to_string(kMaxReportBuckets) + " (use " + FormatDuration(least) + " or more)");
    }
  }
  Report r = BuildReport(rec, cfg_, opt);
  AddLedgerToReport(ledger, &r);
  return r;
}

Status EfficiencyService::CheckSubmit(const server::Principal& who, const server::JobSpec& spec) {
  if (spec.preemptible) return Status::Ok();
  if (spec.gpus <= 0 && spec.gpu_milli <= 0 && spec.mig.empty())
    return Status::Ok();  // CPU only: free
  EngineLock lock(this);
  if (!market_) return Status::Ok();
  const std::string user =
      who.role == server::Role::kAdmin && !spec.user.empty() ? spec.user : who.name;
  const std::string team = cfg_.market.TeamOf(user);
  const int64_t balance = market_->Balance(team);
  if (balance > 0) return Status::Ok();
  return PermissionDenied(fmt::format(
      "preemptible: team '{}' is out of credit (balance {:.2f}): only preemptible GPU work is "
      "accepted (stoker submit --preemptible)",
      team, static_cast<double>(balance) / 1e6));
}

// ---- routes ---------------------------------------------------------------------------------

void EfficiencyService::AddRoutes(http::Router* router) {
  using http::ErrorResponse;
  using http::JsonResponse;
  using http::QueryParam;
  using http::RouteCall;
  using http::Scope;
  using server::Role;
  const std::set<Role> people = {Role::kAdmin, Role::kUser};
  const std::set<Role> admins = {Role::kAdmin};
  // A user sees the efficiency of their own jobs; admins every job's.
  auto visible = [this](const server::Principal& who) {
    return [this, &who](const std::string& job) {
      if (who.role == Role::kAdmin) return true;
      auto it = job_records_.find(job);
      return it != job_records_.end() && it->second.record.info.user == who.name;
    };
  };
  router->Add({"GET",
               "/zones",
               people,
               Scope::kOwnJob,
               {},
               "Efficiency zones (gold, silver, bronze, hot) of GPUs and jobs, and the "
               "consolidation plan for silver jobs",
               [this, visible](const RouteCall& c) {
                 EngineLock lock(this);
                 const auto can_see = visible(c.who);
                 std::vector<ZoneStatus> jobs;
                 for (const ZoneStatus& z : zones_.Jobs()) {
                   if (can_see(z.key)) jobs.push_back(z);
                 }
                 return JsonResponse(
                     200,
                     ZonesToJson(zones_.Gpus(), jobs,
                                 PlanConsolidation(LoadsLocked(can_see), cfg_.zones), cfg_.zones));
               }});
  router->Add({"GET",
               "/alerts",
               people,
               Scope::kOwnJob,
               {},
               "Active graded alerts (yellow, orange, red) with inhibition and silence state",
               [this, visible](const RouteCall& c) {
                 EngineLock lock(this);
                 const auto can_see = visible(c.who);
                 json out = json::array();
                 alerts_.ForEachActive(
                     [&](const Alert& a) {
                       auto job = a.labels.find("job");
                       if (job != a.labels.end() && !can_see(job->second)) return;
                       out.push_back(AlertToJson(a));
                     },
                     /*evaluated_only=*/true);
                 return JsonResponse(200, out);
               }});
  router->Add({"GET", "/silences", people, Scope::kNone, {}, "Silences", [this](const RouteCall&) {
                 EngineLock lock(this);
                 json out = json::array();
                 for (const Silence& x : alerts_.silences()) out.push_back(SilenceToJson(x));
                 return JsonResponse(200, out);
               }});
  router->Add({"POST",
               "/silences",
               admins,
               Scope::kNone,
               {},
               "Create a silence: {matchers, starts_at, ends_at, comment}",
               [this](const RouteCall& c) {
                 if (c.request.body.size() > server::kMaxRequestBody) {
                   return ErrorResponse(ResourceExhausted("body: larger than 4 MiB"));
                 }
                 json body =
                     json::parse(c.request.body.empty() ? "{}" : c.request.body, nullptr, false);
                 if (body.is_discarded()) {
                   return ErrorResponse(InvalidArgument("body: not valid JSON"));
                 }
                 EngineLock lock(this);
                 const WallTime now = clock_ ? clock_->WallNow() : last_seen_;
                 auto silence = SilenceFromJson(body, now);
                 if (!silence.ok()) return ErrorResponse(silence.status());
                 const std::string id = alerts_.AddSilence(*silence);
                 for (const Silence& x : alerts_.silences()) {
                   if (x.id == id) return JsonResponse(201, SilenceToJson(x));
                 }
                 return JsonResponse(201, {{"id", id}});
               }});
  router->Add({"DELETE",
               "/silences/{id}",
               admins,
               Scope::kNone,
               {},
               "Delete a silence",
               [this](const RouteCall& c) {
                 const std::string& id = c.path.at("id");
                 EngineLock lock(this);
                 if (!alerts_.RemoveSilence(id)) {
                   return ErrorResponse(NotFound("silence '" + id.substr(0, 64) + "' not found"));
                 }
                 return JsonResponse(200, {{"id", id}, {"removed", true}});
               }});
  router->Add({"GET",
               "/reclaim",
               people,
               Scope::kOwnJob,
               {},
               "Idle-reclaim actions (warn, requeue, cancel) with evidence",
               [this](const RouteCall& c) {
                 EngineLock lock(this);
                 json out = json::array();
                 for (const ReclaimRecord& r : reclaimer_->log()) {
                   if (c.who.role == Role::kAdmin || r.user == c.who.name) {
                     out.push_back(ReclaimRecordToJson(r));
                   }
                 }
                 return JsonResponse(200, out);
               }});
  for (const char* what : {"ledger", "budgets"}) {
    const bool ledger = std::string(what) == "ledger";
    router->Add(
        {"GET",
         std::string("/") + what,
         people,
         Scope::kOwnTeam,
         {QueryParam::String("team", 64, "only this team (users: their own)")},
         ledger ? "Market ledger entries" : "Team credit budgets and balances",
         [this, ledger](const RouteCall& c) {
           EngineLock lock(this);
           if (!market_) {
             return ErrorResponse(FailedPrecondition("market: not configured (market.budgets)"));
           }
           const bool admin = c.who.role == Role::kAdmin;
           std::string team = c.Query("team") ? *c.Query("team") : "";
           const std::string own = cfg_.market.TeamOf(c.who.name);
           if (!admin && !team.empty() && team != own) {
             return ErrorResponse(PermissionDenied("team: users see only their own team's ledger"));
           }
           if (!admin) team = own;
           if (ledger) {
             json out = json::array();
             for (const LedgerEntry& e : market_->entries()) {
               if (team.empty() || e.team == team) out.push_back(LedgerEntryJson(e));
             }
             return JsonResponse(200, out);
           }
           Report r;
           std::vector<LedgerEntry> entries;
           for (const LedgerEntry& e : market_->entries()) {
             if (team.empty() || e.team == team) entries.push_back(e);
           }
           AddLedgerToReport(entries, &r);
           if (!team.empty() && r.accounts.empty()) r.accounts.push_back(TeamAccount{.team = team});
           json out = json::array();
           for (const TeamAccount& a : r.accounts) {
             out.push_back({{"team", a.team},
                            {"balance", static_cast<double>(a.balance_micro) / 1e6},
                            {"granted", static_cast<double>(a.granted_micro) / 1e6},
                            {"charged", static_cast<double>(a.charged_micro) / 1e6},
                            {"idle_charged", static_cast<double>(a.idle_charged_micro) / 1e6},
                            {"reclaimed_charged", static_cast<double>(a.reclaimed_micro) / 1e6},
                            {"allowed_tier", a.balance_micro > 0 ? "guaranteed" : "preemptible"}});
           }
           return JsonResponse(200, out);
         }});
  }
  router->Add({"GET",
               "/report",
               people,
               Scope::kOwnJob,
               {QueryParam::Enum("format", {"json", "text", "csv", "html", "records"},
                                 "answer format (default json); records: the jobs and samples the "
                                 "report is built from, as JSON lines (stoker sim size --history)"),
                QueryParam::DurationIn(
                    "bucket", std::chrono::minutes(1), std::chrono::hours(24 * 366),
                    "time bucket of the cluster series (at most " +
                        std::to_string(kMaxReportBuckets) + " buckets over the report's span)")},
               "Efficiency report: per job, per user and team, per cluster, with advice",
               [this](const RouteCall& c) {
                 ReportOptions opt;
                 if (auto d = c.QueryDuration("bucket")) opt.bucket = *d;
                 const std::string* format = c.Query("format");
                 const std::string only_user = c.who.role == Role::kAdmin ? "" : c.who.name;
                 if (format != nullptr && *format == "records") {
                   return server::ApiResponse{200, RecordsToJsonl(Records(only_user)),
                                              "application/x-ndjson"};
                 }
                 auto r = BuildServerReport(opt, only_user);
                 if (!r.ok()) return ErrorResponse(r.status());
                 if (format == nullptr || *format == "json")
                   return server::ApiResponse{200, RenderJson(*r)};
                 if (*format == "csv") {
                   return server::ApiResponse{200, RenderCsv(*r), "text/csv; charset=utf-8"};
                 }
                 if (*format == "html") {
                   return server::ApiResponse{200, RenderHtml(*r, report_chart_script_),
                                              "text/html; charset=utf-8"};
                 }
                 return server::ApiResponse{200, RenderText(*r), "text/plain; charset=utf-8"};
               }});
}

}  // namespace stoker::efficiency
