#include "efficiency/server_bridge.h"

#include <spdlog/spdlog.h>

#include <cmath>

#include "efficiency/activity.h"
#include "efficiency/metrics.h"

namespace stoker::efficiency {
namespace {

using nlohmann::json;

template <typename T>
Field<T> FieldOf(const json& fields, const char* key) {
  auto it = fields.find(key);
  if (it == fields.end() || !it->is_object()) return {};
  const auto st = it->value("state", "");
  if (st == "unsupported") return Field<T>::Unsupported();
  if (st != "value") return {};
  const json& v = (*it)["value"];
  if constexpr (std::is_same_v<T, bool>) {
    return v.is_boolean() ? Field<T>::Of(v.get<bool>()) : Field<T>{};
  } else if constexpr (std::is_floating_point_v<T>) {
    return v.is_number() ? Field<T>::Of(v.get<T>()) : Field<T>{};
  } else {
    return v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0)
               ? Field<T>::Of(v.get<T>())
               : Field<T>{};
  }
}

}  // namespace

Result<std::vector<GpuSample>> SamplesFromSnapshotJson(const json& j) {
  const json* gpus = &j;
  if (j.is_object()) {
    auto it = j.find("gpus");
    if (it == j.end()) return InvalidArgument("samples: no \"gpus\" array");
    gpus = &*it;
  }
  if (!gpus->is_array()) return InvalidArgument("samples: expected an array of GPUs");
  std::vector<GpuSample> out;
  for (size_t i = 0; i < gpus->size(); ++i) {
    const json& g = (*gpus)[i];
    const std::string where = "samples[" + std::to_string(i) + "]";
    if (!g.is_object()) return InvalidArgument(where + ": expected an object");
    GpuSample s;
    s.id.index = g.value("index", 0u);
    s.id.uuid = g.value("uuid", "");
    s.id.name = g.value("name", "");
    const std::string health = g.value("health", "ok");
    s.health = health == "lost" ? GpuHealth::kLost
               : health == "ok" ? GpuHealth::kOk
                                : GpuHealth::kUnreachable;
    if (auto t = g.find("timestamp_unix"); t != g.end() && t->is_number()) {
      const double secs = t->get<double>();
      if (secs < 0 || secs > 4e9)
        return InvalidArgument(where + ".timestamp_unix: not a Unix time");
      s.timestamp =
          WallTime(std::chrono::duration_cast<Duration>(std::chrono::duration<double>(secs)));
    }
    const json fields = g.value("fields", json::object());
    s.util_gpu_pct = FieldOf<uint32_t>(fields, "util_gpu_pct");
    s.util_mem_pct = FieldOf<uint32_t>(fields, "util_mem_pct");
    s.memory_total_bytes = FieldOf<uint64_t>(fields, "memory_total_bytes");
    s.memory_used_bytes = FieldOf<uint64_t>(fields, "memory_used_bytes");
    s.temperature_c = FieldOf<uint32_t>(fields, "temperature_c");
    s.power_mw = FieldOf<uint32_t>(fields, "power_mw");
    s.gpm.sm_active = FieldOf<double>(fields, "sm_active_ratio");
    s.gpm.tensor_active = FieldOf<double>(fields, "tensor_active_ratio");
    s.gpm.dram_bw_util = FieldOf<double>(fields, "dram_active_ratio");
    for (const json& p : g.value("processes", json::array())) {
      GpuProcess proc;
      proc.pid = p.value("pid", 0u);
      const json job = p.value("job", json());
      if (job.is_object() && job.contains("id") && job["id"].is_string()) {
        proc.job.kind = JobRef::Kind::kStoker;
        proc.job.id = job["id"].get<std::string>();
      }
      s.processes.push_back(std::move(proc));
    }
    out.push_back(std::move(s));
  }
  return out;
}

class EfficiencyService::Directory final : public JobDirectory {
 public:
  std::optional<JobInfo> Find(const std::string& id) const override {
    auto it = jobs_.find(id);
    if (it == jobs_.end()) return std::nullopt;
    return it->second;
  }
  std::vector<JobInfo> Running() const override {
    std::vector<JobInfo> out;
    for (const auto& [k, v] : jobs_) out.push_back(v);
    return out;
  }
  std::map<std::string, JobInfo> jobs_;
};

class EfficiencyService::Actions final : public JobActions {
 public:
  explicit Actions(server::JobActions* server) : server_(server) {}
  Status Warn(const JobInfo& j, const std::string& message) override {
    spdlog::warn("idle reclaim: job {} ({}): {}", j.id, j.user, message);
    return Status::Ok();
  }
  Status Requeue(const JobInfo& j, const std::string& reason) override {
    return Cancel(j, "requeue: " + reason);
  }
  // Queued, not called: the server calls OnJobChanged back synchronously, which takes the
  // service lock held while the reclaimer runs. Flush() runs them after the lock is released.
  Status Cancel(const JobInfo& j, const std::string& reason) override {
    if (!server_) return FailedPrecondition("no server actions");
    char* end = nullptr;
    const long long id = std::strtoll(j.id.c_str(), &end, 10);
    if (end == j.id.c_str() || *end != '\0')
      return InvalidArgument("job id '" + j.id + "' is not a server job");
    pending_.emplace_back(id, "idle reclaim: " + reason);
    return Status::Ok();
  }
  std::vector<std::pair<int64_t, std::string>> Take() {
    std::vector<std::pair<int64_t, std::string>> out;
    out.swap(pending_);
    return out;
  }
  void Flush(std::vector<std::pair<int64_t, std::string>> cancels) {
    for (const auto& [id, reason] : cancels) {
      Status s = server_->CancelJob(id, reason);
      if (!s.ok()) spdlog::error("idle reclaim: cancel job {}: {}", id, s.ToString());
    }
  }

 private:
  server::JobActions* server_;
  std::vector<std::pair<int64_t, std::string>> pending_;
};

EfficiencyService::EfficiencyService(EfficiencyConfig cfg, server::JobActions* actions)
    : cfg_(std::move(cfg)),
      directory_(std::make_unique<Directory>()),
      actions_(std::make_unique<Actions>(actions)),
      zones_(cfg_.zones),
      alerts_(cfg_.alerting, cfg_.zones.metric) {
  reclaimer_ = std::make_unique<IdleReclaimer>(cfg_.idle, *directory_, *actions_);
}

EfficiencyService::~EfficiencyService() = default;

void EfficiencyService::AddNotifier(Notifier* n) {
  std::lock_guard lock(mu_);
  alerts_.AddNotifier(n);
}

void EfficiencyService::OnJobChanged(const server::Job& job) {
  std::lock_guard lock(mu_);
  const std::string id = std::to_string(job.id);
  // Forget the job's old GPUs, then record the current ones while it holds resources.
  std::erase_if(job_on_gpu_, [&](const auto& kv) { return kv.second == id; });
  if (!server::IsActive(job.state) || !job.assignment) {
    directory_->jobs_.erase(id);
    reclaimer_->Forget(id);
    zones_.ForgetJob(id);
    return;
  }
  JobInfo info;
  info.id = id;
  info.user = job.user;
  info.team = job.user;
  info.job_class = job.spec.job_class;
  info.preemptible = job.spec.preemptible;
  info.start = WallTime(std::chrono::milliseconds(job.start_ms));
  for (uint32_t idx : job.assignment->gpu_indices) {
    job_on_gpu_[{job.assignment->node, idx}] = id;
    info.gpus.push_back(job.assignment->node + "/" + std::to_string(idx));
  }
  directory_->jobs_[id] = std::move(info);
}

void EfficiencyService::OnHeartbeat(const std::string& node, const nlohmann::json& samples,
                                    WallTime at) {
  auto parsed = SamplesFromSnapshotJson(samples);
  if (!parsed.ok()) {
    spdlog::warn("efficiency: heartbeat from {}: {}", node, parsed.status().message());
    return;
  }
  std::vector<std::pair<int64_t, std::string>> cancels;
  std::map<std::string, double> job_activity;
  {
    std::lock_guard lock(mu_);
    for (GpuSample& s : *parsed) {
      if (s.timestamp == WallTime{}) s.timestamp = at;
      std::vector<std::string> jobs;
      if (auto it = job_on_gpu_.find({node, s.id.index}); it != job_on_gpu_.end())
        jobs.push_back(it->second);
      zones_.Observe(s, jobs);
      Labels extra = {{"hostname", node}};
      if (!jobs.empty()) extra["job"] = jobs.front();
      alerts_.ObserveGpu(s, extra);
      if (!jobs.empty()) {
        if (auto a = ActivityMilli(s, cfg_.zones.metric)) {
          auto& acc = job_activity[jobs.front()];
          acc = std::max(acc, static_cast<double>(*a) / 1000.0);
        }
      }
      if (!jobs.empty()) {
        if (auto a = ActivityMilli(s, cfg_.zones.metric)) {
          reclaimer_->Observe(jobs.front(), node + "/" + std::to_string(s.id.index), s.timestamp,
                              *a);
        }
      }
    }
    // Job-scope rules (JobGpusIdle) see the job's busiest GPU in this heartbeat.
    for (const auto& [job, activity] : job_activity) {
      alerts_.ObserveJob(job, at, {{"activity", activity}, {"idle", activity == 0 ? 1.0 : 0.0}},
                         {{"hostname", node}});
    }
    active_ = alerts_.Evaluate(at);
    reclaimer_->Evaluate(at);
    cancels = actions_->Take();
  }
  actions_->Flush(std::move(cancels));
}

void EfficiencyService::Evaluate(WallTime now) {
  std::vector<std::pair<int64_t, std::string>> cancels;
  {
    std::lock_guard lock(mu_);
    active_ = alerts_.Evaluate(now);
    reclaimer_->Evaluate(now);
    cancels = actions_->Take();
  }
  actions_->Flush(std::move(cancels));
}

std::string EfficiencyService::Metrics() const {
  std::lock_guard lock(mu_);
  std::string out;
  EngineState st;
  st.zones = &zones_;
  st.active_alerts = &active_;
  st.reclaim_log = &reclaimer_->log();
  RenderMetrics(st, &out);
  return out;
}

std::vector<Alert> EfficiencyService::ActiveAlerts() const {
  std::lock_guard lock(mu_);
  return active_;
}
std::vector<ZoneStatus> EfficiencyService::GpuZones() const {
  std::lock_guard lock(mu_);
  return zones_.Gpus();
}
std::vector<ZoneStatus> EfficiencyService::JobZones() const {
  std::lock_guard lock(mu_);
  return zones_.Jobs();
}
std::vector<ReclaimRecord> EfficiencyService::ReclaimLog() const {
  std::lock_guard lock(mu_);
  return reclaimer_->log();
}

}  // namespace stoker::efficiency
