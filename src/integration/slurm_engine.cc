#include "integration/slurm_engine.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>

#include "core/prometheus_text.h"
#include "integration/http_poster.h"
#include "protocol/samples.h"

namespace stoker::slurm {
namespace {

constexpr size_t kMaxSnapshotBytes = size_t{16} << 20;
constexpr size_t kMaxWarnedAttributions = 10000;

WallTime FromUnix(int64_t s) { return WallTime(std::chrono::seconds(s)); }
int64_t ToUnix(WallTime t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}

std::string Key(uint32_t id) { return "slurm:" + std::to_string(id); }

}  // namespace

Result<std::vector<GpuSample>> AgentSampleSource::Fetch(const std::string& node) {
  const std::string url = config_.UrlFor(node) + "/api/v1/snapshot";
  auto body = efficiency::HttpGet(url, config_.timeout, kMaxSnapshotBytes);
  if (!body.ok()) return body.status();
  auto snap = protocol::ParseAgentSnapshot(*body);
  if (!snap.ok()) return snap.status().WithContext(url);
  return std::move(snap->gpus);
}

std::string RenderEngineMetrics(const SlurmEngineMetrics& m, const SlurmReclaimMetrics& r) {
  prom::TextWriter w;
  auto d = [](int64_t v) { return static_cast<double>(v); };
  w.Counter("stoker_slurm_engine_cycles_total", "Slurm engine cycles run by the server.",
            d(m.cycles));
  w.Family("stoker_slurm_agent_errors_total",
           "Agent snapshots that could not be read, by kind (the node's jobs are not measured).",
           prom::Type::kCounter);
  w.Sample("stoker_slurm_agent_errors_total", {{"kind", "unreachable"}},
           d(m.agent_errors_unreachable));
  w.Sample("stoker_slurm_agent_errors_total", {{"kind", "malformed"}}, d(m.agent_errors_malformed));
  w.Gauge("stoker_slurm_nodes_without_agent",
          "GPU nodes whose agent did not answer in the last cycle.", d(m.nodes_without_agent));
  w.Gauge("stoker_slurm_gpu_count_mismatches",
          "Nodes whose agent reports another number of GPUs than Slurm's gres.",
          d(m.gpu_count_mismatches));
  w.Counter("stoker_slurm_samples_total", "GPU samples taken in from the agents.", d(m.samples));
  w.Counter("stoker_slurm_attributions_dropped_total",
            "GPU processes an agent attributed to a Slurm job that Slurm does not run on that "
            "node (not counted for the job).",
            d(m.attributions_dropped));
  w.Gauge("stoker_slurm_jobs_running", "Slurm jobs holding resources.", d(m.jobs_running));
  w.Counter("stoker_slurm_jobs_ended_total", "Slurm job records ended.", d(m.jobs_ended));
  w.Counter("stoker_slurm_jobs_ended_without_jobcomp_total",
            "Jobs that left Slurm's listing without a jobcomp record (a spool is configured).",
            d(m.jobs_ended_without_jobcomp));
  w.Counter("stoker_slurm_jobcomp_records_total", "Finished jobs read from the jobcomp spool.",
            d(m.jobcomp_records));
  w.Counter("stoker_slurm_jobcomp_bad_total",
            "Spool files that could not be read (moved to <name>.bad).", d(m.jobcomp_bad));
  w.Counter("stoker_slurm_jobcomp_unknown_jobs_total",
            "Finished jobs no cycle saw running (recorded without GPUs).",
            d(m.jobcomp_unknown_jobs));
  w.Counter("stoker_slurm_jobcomp_gpu_hours_total",
            "GPU-hours of the finished jobs read from the spool.", m.jobcomp_gpu_hours);
  w.Counter("stoker_slurm_job_summaries_total", "JS1 summaries written to AdminComment.",
            d(m.summaries_written));
  w.Family("stoker_slurm_reclaim_total", "Idle-reclaim records of Slurm jobs, by action.",
           prom::Type::kCounter);
  w.Sample("stoker_slurm_reclaim_total", {{"action", "warn"}}, d(r.warnings));
  w.Sample("stoker_slurm_reclaim_total", {{"action", "requeue"}}, d(r.requeues));
  w.Sample("stoker_slurm_reclaim_total", {{"action", "cancel"}}, d(r.cancels));
  w.Sample("stoker_slurm_reclaim_total", {{"action", "exempt"}}, d(r.exemptions));
  w.Counter("stoker_slurm_reclaim_refused_stale_total",
            "Reclaim actions refused: the job vanished, ended or restarted since the evidence.",
            d(r.refused_stale));
  w.Counter("stoker_slurm_reclaim_action_errors_total", "Reclaim actions Slurm refused.",
            d(r.action_errors));
  w.Counter("stoker_slurm_reclaim_hook_errors_total", "Reclaim hooks that failed.",
            d(r.hook_errors));
  w.Counter("stoker_slurm_samples_unattributed_total",
            "GPU samples with processes but none of a Slurm job.", d(r.samples_unattributed));
  return w.Take();
}

Result<std::unique_ptr<SlurmEngine>> SlurmEngine::Create(SlurmEngineConfig config,
                                                         SlurmClient* client, SampleSource* samples,
                                                         efficiency::EfficiencyService* efficiency,
                                                         Clock* clock) {
  STOKER_ASSIGN_OR_RETURN(auto controller, SlurmController::Create(client, config.controller));
  return std::unique_ptr<SlurmEngine>(new SlurmEngine(std::move(config), client, samples,
                                                      efficiency, clock, std::move(controller)));
}

SlurmEngine::SlurmEngine(SlurmEngineConfig config, SlurmClient* client, SampleSource* samples,
                         efficiency::EfficiencyService* efficiency, Clock* clock,
                         std::unique_ptr<SlurmController> controller)
    : config_(std::move(config)),
      client_(client),
      samples_(samples),
      efficiency_(efficiency),
      clock_(clock),
      controller_(std::move(controller)) {
  if (config_.reclaim_enabled) {
    reclaim_ = std::make_unique<SlurmReclaim>(client_, config_.reclaim);
  }
  if (config_.jobstats_enabled) {
    jobstats_ = std::make_unique<JobStatsCollector>(config_.jobstats);
  }
}

SlurmEngine::~SlurmEngine() { Stop(); }

void SlurmEngine::Start() {
  {
    std::lock_guard lock(loop_mu_);
    stopping_ = false;
  }
  loop_ = std::thread([this] {
    std::unique_lock lock(loop_mu_);
    while (!stopping_) {
      lock.unlock();
      CycleOnce();
      lock.lock();
      if (loop_cv_.wait_for(lock, config_.cycle, [&] { return stopping_; })) break;
    }
  });
}

void SlurmEngine::Stop() {
  {
    std::lock_guard lock(loop_mu_);
    stopping_ = true;
  }
  loop_cv_.notify_all();
  if (loop_.joinable()) loop_.join();
}

void SlurmEngine::CycleOnce() {
  const WallTime now = clock_->WallNow();
  ++m_.cycles;
  auto decision = controller_->Cycle();
  if (decision.ok()) {
    const SlurmSnapshot& snap = controller_->last();
    UpdateJobs(snap, now);
    const MonoTime mono = clock_->Now();
    if (!measured_ || mono - last_measure_ >= config_.measure_every) {
      measured_ = true;
      last_measure_ = mono;
      Measure(snap, now);
      if (reclaim_) reclaim_->Evaluate(now);
      if (jobstats_) m_.summaries_written += jobstats_->Publish(*client_, snap.jobs, ToUnix(now));
    }
  }
  // The spool needs no answer from Slurm: finished jobs are recorded even while it is down.
  ReadSpool(now);
  Publish();
}

uint32_t SlurmEngine::NvmlIndex(const std::string& node, int32_t slurm_index) const {
  auto n = minor_to_index_.find(node);
  if (n != minor_to_index_.end()) {
    if (auto it = n->second.find(static_cast<uint32_t>(slurm_index)); it != n->second.end()) {
      return it->second;
    }
  }
  return static_cast<uint32_t>(slurm_index);
}

void SlurmEngine::UpdateJobs(const SlurmSnapshot& snap, WallTime now) {
  if (reclaim_) reclaim_->UpdateJobs(snap.jobs);
  std::map<std::string, int32_t> shards_per_gpu;
  for (const SlurmNode& n : snap.nodes) shards_per_gpu[n.name] = n.ShardsPerGpu();
  std::set<uint32_t> listed;
  m_.jobs_running = 0;
  // A job that held GPUs and holds none now (finished, or requeued and pending again).
  auto stop_holding = [&](auto it) {
    if (!it->second.holding) return;
    it->second.job.gpus.clear();
    it->second.job.milli = 0;
    it->second.holding = false;
    if (efficiency_) efficiency_->OnExternalJob(it->second.job, now);
  };
  for (const SlurmJob& j : snap.jobs) {
    listed.insert(j.id);
    auto it = known_.find(j.id);
    if (!j.Pending() && !j.Holding()) {
      // Finished (COMPLETED, CANCELLED, FAILED, TIMEOUT, ...). With a spool, its jobcomp record
      // ends it (no polling for the ledger); until then it holds no GPUs.
      if (it == known_.end()) continue;
      if (config_.jobcomp_spool.empty()) {
        EndJob(j.id, j.end_time > 0 ? FromUnix(j.end_time) : now, now);
      } else {
        stop_holding(it);
      }
      continue;
    }
    if (!j.Holding()) {  // pending, or requeued and pending again: holds nothing
      if (it != known_.end()) stop_holding(it);
      continue;
    }
    ++m_.jobs_running;
    efficiency::ExternalJob e;
    e.id = Key(j.id);
    e.user = j.user;
    e.job_class = j.partition;
    e.interactive = j.Interactive();
    e.submit = FromUnix(j.submit_time);
    e.start = j.start_time > 0 ? FromUnix(j.start_time) : now;
    for (size_t k = 0; k < j.nodes.size(); ++k) {
      const std::string& node = j.nodes[k];
      if (k < j.gpu_indices.size()) {
        for (int32_t g : j.gpu_indices[k]) {
          e.gpus.emplace_back(node, NvmlIndex(node, g));
          e.milli += 1000;
        }
      }
      if (k < j.shard_gpus.size() && k < j.shard_counts.size() && j.shard_counts[k] > 0) {
        const int32_t per = std::max(1, shards_per_gpu[node]);
        for (int32_t g : j.shard_gpus[k]) e.gpus.emplace_back(node, NvmlIndex(node, g));
        e.milli += ShardMilli(j.shard_counts[k], per, static_cast<int32_t>(j.shard_gpus[k].size()));
      }
    }
    Known& known = known_[j.id];
    const bool changed = !known.holding || known.start_time != j.start_time ||
                         known.job.gpus != e.gpus || known.job.milli != e.milli;
    known.job = std::move(e);
    known.start_time = j.start_time;
    known.holding = true;
    if (changed && efficiency_) efficiency_->OnExternalJob(known.job, now);
  }
  // Jobs gone from Slurm's listing (MinJobAge passed): they ended at the latest now.
  std::vector<uint32_t> gone;
  for (const auto& [id, k] : known_) {
    if (!listed.count(id)) gone.push_back(id);
  }
  for (uint32_t id : gone) {
    if (!config_.jobcomp_spool.empty()) {
      ++m_.jobs_ended_without_jobcomp;
      spdlog::warn("slurm: job {} left Slurm's listing without a jobcomp record; ended now", id);
    }
    EndJob(id, now, now);
  }
}

void SlurmEngine::EndJob(uint32_t id, WallTime end, WallTime now) {
  auto it = known_.find(id);
  if (it == known_.end()) return;
  efficiency::ExternalJob e = std::move(it->second.job);
  known_.erase(it);
  e.gpus.clear();
  e.milli = 0;
  e.end = std::max(end, e.start);
  if (efficiency_) efficiency_->OnExternalJob(e, now);
  ++m_.jobs_ended;
}

void SlurmEngine::Measure(const SlurmSnapshot& snap, WallTime now) {
  // Who holds each GPU (Slurm's index), and which jobs run on each node.
  std::map<std::string, std::map<int32_t, std::vector<std::string>>> holders;
  std::map<std::string, std::set<std::string>> on_node;
  for (const SlurmJob& j : snap.jobs) {
    if (!j.Holding()) continue;
    const std::string id = std::to_string(j.id);
    for (size_t k = 0; k < j.nodes.size(); ++k) {
      on_node[j.nodes[k]].insert(id);
      auto& h = holders[j.nodes[k]];
      if (k < j.gpu_indices.size()) {
        for (int32_t g : j.gpu_indices[k]) h[g].push_back(id);
      }
      if (k < j.shard_gpus.size()) {
        for (int32_t g : j.shard_gpus[k]) h[g].push_back(id);
      }
    }
  }
  std::vector<const SlurmNode*> ask;
  for (const SlurmNode& n : snap.nodes) {
    if (n.gpus > 0 && (n.Usable() || on_node.count(n.name))) ask.push_back(&n);
  }
  std::vector<Result<std::vector<GpuSample>>> got(ask.size(), Unavailable("not asked"));
  {
    std::atomic<size_t> next{0};
    std::vector<std::thread> workers;
    const size_t threads = std::min<size_t>(ask.size(), std::max(1, config_.agents.parallel));
    for (size_t t = 0; t < threads; ++t) {
      workers.emplace_back([&] {
        for (size_t i = next++; i < ask.size(); i = next++) got[i] = samples_->Fetch(ask[i]->name);
      });
    }
    for (std::thread& t : workers) t.join();
  }
  int64_t without = 0, mismatched = 0;
  for (size_t i = 0; i < ask.size(); ++i) {
    const SlurmNode& node = *ask[i];
    if (!got[i].ok()) {
      ++without;
      const Status& s = got[i].status();
      ++(s.code() == StatusCode::kInvalidArgument ? m_.agent_errors_malformed
                                                  : m_.agent_errors_unreachable);
      if (agent_down_.insert(node.name).second) {
        spdlog::warn(
            "slurm: node {}: no measurements from its agent ({}); its jobs are not measured, "
            "summarised or reclaimed until it answers",
            node.name, s.ToString());
      }
      continue;
    }
    if (agent_down_.erase(node.name))
      spdlog::info("slurm: node {}: its agent answers again", node.name);
    std::vector<GpuSample> samples = std::move(got[i]).value();
    if (static_cast<int32_t>(samples.size()) != node.gpus) {
      ++mismatched;
      spdlog::debug("slurm: node {}: agent shows {} GPUs, Slurm's gres {}", node.name,
                    samples.size(), node.gpus);
    }
    auto& minors = minor_to_index_[node.name];
    minors.clear();
    for (const GpuSample& s : samples) {
      minors[s.id.minor.has_value() ? s.id.minor.value() : s.id.index] = s.id.index;
    }
    const auto& jobs_here = on_node[node.name];
    for (GpuSample& s : samples) {
      ++m_.samples;
      if (s.timestamp == WallTime{}) s.timestamp = now;
      for (GpuProcess& p : s.processes) {
        if (p.job.kind != JobRef::Kind::kSlurm || jobs_here.count(p.job.id)) continue;
        ++m_.attributions_dropped;
        if (warned_jobs_.size() > kMaxWarnedAttributions) warned_jobs_.clear();
        if (warned_jobs_.insert(node.name + "/" + p.job.id).second) {
          spdlog::warn(
              "slurm: node {}: GPU {} process {} is attributed to Slurm job {}, which Slurm does "
              "not run there; not counted for that job",
              node.name, s.id.index, p.pid, p.job.id);
        }
        p.job = JobRef{};
      }
      const int32_t slurm_index =
          static_cast<int32_t>(s.id.minor.has_value() ? s.id.minor.value() : s.id.index);
      static const std::vector<std::string> kNone;
      auto h = holders.find(node.name);
      const std::vector<std::string>* held = &kNone;
      if (h != holders.end()) {
        if (auto g = h->second.find(slurm_index); g != h->second.end()) held = &g->second;
      }
      if (reclaim_) reclaim_->Observe(s, *held);
      if (jobstats_) jobstats_->Observe(node.name, s, *held);
    }
    if (efficiency_) efficiency_->OnHeartbeat(node.name, samples, now);
  }
  m_.nodes_without_agent = without;
  m_.gpu_count_mismatches = mismatched;
}

void SlurmEngine::ReadSpool(WallTime now) {
  if (config_.jobcomp_spool.empty()) return;
  int bad = 0;
  std::vector<JobCompRecord> records = ReadJobCompSpool(config_.jobcomp_spool, &bad);
  m_.jobcomp_bad += bad;
  const SlurmSnapshot& snap = controller_->last();
  for (const JobCompRecord& r : records) {
    ++m_.jobcomp_records;
    auto it = known_.find(r.job);
    if (it == known_.end()) {
      // Finished before a cycle saw it run: a record without GPUs.
      ++m_.jobcomp_unknown_jobs;
      Known& k = known_[r.job];
      k.job.id = Key(r.job);
      k.job.user = r.user;
      k.job.job_class = r.partition;
      k.job.submit = FromUnix(r.start);
      k.job.start = FromUnix(r.start);
      it = known_.find(r.job);
    }
    m_.jobcomp_gpu_hours += static_cast<double>(it->second.job.milli) / 1000.0 *
                            static_cast<double>(r.elapsed_s()) / 3600.0;
    // A requeued job reports each run; while Slurm lists it again, only that run is over.
    const bool again = std::any_of(snap.jobs.begin(), snap.jobs.end(), [&](const SlurmJob& j) {
      return j.id == r.job && (j.Pending() || (j.Holding() && j.start_time > r.start));
    });
    if (again) continue;
    EndJob(r.job, FromUnix(r.end), now);
  }
}

void SlurmEngine::Publish() {
  std::lock_guard lock(mu_);
  published_ = m_;
  published_controller_ = controller_->metrics();
  if (reclaim_) published_reclaim_ = reclaim_->metrics();
}

std::string SlurmEngine::Metrics(const server::Principal& /*who*/) {
  std::lock_guard lock(mu_);
  return RenderControllerMetrics(published_controller_) +
         RenderEngineMetrics(published_, published_reclaim_);
}

SlurmEngineMetrics SlurmEngine::metrics() const {
  std::lock_guard lock(mu_);
  return published_;
}
ControllerMetrics SlurmEngine::controller_metrics() const {
  std::lock_guard lock(mu_);
  return published_controller_;
}
SlurmReclaimMetrics SlurmEngine::reclaim_metrics() const {
  std::lock_guard lock(mu_);
  return published_reclaim_;
}

}  // namespace stoker::slurm
