#include "slurm/reclaim.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "efficiency/activity.h"
#include "efficiency/api_json.h"

namespace stoker::slurm {

class SlurmReclaim::Directory final : public efficiency::JobDirectory {
 public:
  std::optional<efficiency::JobInfo> Find(const std::string& job) const override {
    auto it = jobs_.find(job);
    if (it == jobs_.end()) return std::nullopt;
    return it->second;
  }
  std::vector<efficiency::JobInfo> Running() const override {
    std::vector<efficiency::JobInfo> out;
    out.reserve(jobs_.size());
    for (const auto& [id, j] : jobs_) out.push_back(j);
    return out;
  }
  std::map<std::string, efficiency::JobInfo> jobs_;
  std::map<std::string, int64_t> start_;  // job -> Slurm start_time of the run observed
};

class SlurmReclaim::Actions final : public efficiency::ReclaimActions {
 public:
  Actions(SlurmReclaim* owner, std::string rule) : owner_(owner), rule_(std::move(rule)) {}

  Status Warn(const efficiency::JobInfo& job, const std::string& message) override {
    STOKER_ASSIGN_OR_RETURN(uint32_t id, Id(job));
    const std::string text = "stoker idle-reclaim warning (" + rule_ + "): " + message;
    Status s = owner_->client_->SetComment(id, text);
    ++owner_->metrics_.warnings;
    Hook(job, "warn", text);
    return s;
  }
  Status Requeue(const efficiency::JobInfo& job, const std::string& reason) override {
    return Act(job, "requeue", reason);
  }
  Status Cancel(const efficiency::JobInfo& job, const std::string& reason) override {
    return Act(job, "cancel", reason);
  }

 private:
  static Result<uint32_t> Id(const efficiency::JobInfo& job) {
    try {
      size_t used = 0;
      const unsigned long v = std::stoul(job.id, &used);
      if (used == job.id.size() && v > 0 && v <= UINT32_MAX) return static_cast<uint32_t>(v);
    } catch (const std::exception&) {
    }
    return InvalidArgument("'" + job.id + "' is not a Slurm job id");
  }

  Status Act(const efficiency::JobInfo& job, const std::string& action, const std::string& why) {
    STOKER_ASSIGN_OR_RETURN(uint32_t id, Id(job));
    if (owner_->acted_.count(job.id)) {
      return AlreadyExists("job " + job.id + " already reclaimed by another rule this run");
    }
    // Re-read the job: act only on the very run the evidence is about.
    auto jobs = owner_->client_->Jobs();
    if (!jobs.ok()) {
      ++owner_->metrics_.action_errors;
      return jobs.status().WithContext("job " + job.id + " not " + action + "d: cannot re-read");
    }
    const SlurmJob* now = nullptr;
    for (const SlurmJob& j : *jobs) {
      if (j.id == id) now = &j;
    }
    auto started = owner_->directory_->start_.find(job.id);
    if (now == nullptr || !now->Running() || started == owner_->directory_->start_.end() ||
        now->start_time != started->second) {
      ++owner_->metrics_.refused_stale;
      return FailedPrecondition("job " + job.id + " not " + action + "d: " +
                                (now == nullptr ? std::string("it is gone from Slurm")
                                                : "it is " + now->state + " (start " +
                                                      std::to_string(now->start_time) +
                                                      "), not the run observed"));
    }
    Status s = action == "cancel" ? owner_->client_->Cancel(id) : owner_->client_->Requeue(id);
    if (s.ok()) {
      owner_->acted_.insert(job.id);
      ++(action == "cancel" ? owner_->metrics_.cancels : owner_->metrics_.requeues);
    } else {
      ++owner_->metrics_.action_errors;
    }
    Hook(job, action, why);
    return s;
  }

  void Hook(const efficiency::JobInfo& job, const std::string& action, const std::string& msg) {
    if (owner_->options_.hook.empty()) return;
    auto r = RunCommand(owner_->options_.hook,
                        {{"STOKER_SLURM_JOB_ID", job.id},
                         {"STOKER_SLURM_USER", job.user},
                         {"STOKER_RECLAIM_RULE", rule_},
                         {"STOKER_RECLAIM_ACTION", action},
                         {"STOKER_RECLAIM_MESSAGE", msg}},
                        std::chrono::seconds(30), 1 << 16);
    if (!r.ok() || r->exit_code != 0) {
      ++owner_->metrics_.hook_errors;
      spdlog::warn("slurm reclaim: hook for job {} ({}) failed: {}", job.id, action,
                   r.ok() ? "exit " + std::to_string(r->exit_code) + ": " + r->err.substr(0, 200)
                          : r.status().ToString());
    }
  }

  SlurmReclaim* owner_;
  std::string rule_;
};

SlurmReclaim::SlurmReclaim(SlurmClient* client, SlurmReclaimOptions options)
    : client_(client), options_(std::move(options)), directory_(std::make_unique<Directory>()) {
  for (auto* p : {&options_.idle, &options_.memory_held}) {
    p->exempt_classes.insert(p->exempt_classes.end(), options_.exempt_partitions.begin(),
                             options_.exempt_partitions.end());
    for (const std::string& q : options_.exempt_qos) p->exempt_classes.push_back("qos:" + q);
  }
  idle_actions_ = std::make_unique<Actions>(this, "idle");
  memory_actions_ = std::make_unique<Actions>(this, "memory_held_while_idle");
  idle_ = std::make_unique<efficiency::IdleReclaimer>(options_.idle, *directory_, *idle_actions_);
  memory_ = std::make_unique<efficiency::IdleReclaimer>(options_.memory_held, *directory_,
                                                        *memory_actions_);
}

SlurmReclaim::~SlurmReclaim() = default;

void SlurmReclaim::UpdateJobs(const std::vector<SlurmJob>& jobs) {
  std::map<std::string, efficiency::JobInfo> running;
  std::map<std::string, int64_t> start;
  for (const SlurmJob& j : jobs) {
    if (!j.Running()) continue;
    efficiency::JobInfo info;
    info.id = std::to_string(j.id);
    info.user = j.user;
    info.job_class = j.partition;
    if (std::find(options_.exempt_qos.begin(), options_.exempt_qos.end(), j.qos) !=
        options_.exempt_qos.end()) {
      info.job_class = "qos:" + j.qos;
    }
    info.interactive = j.Interactive();
    info.start = WallTime(std::chrono::seconds(j.start_time));
    running[info.id] = std::move(info);
    start[std::to_string(j.id)] = j.start_time;
  }
  // Forget jobs that left, and runs that were replaced (a requeued job keeps its id).
  for (const auto& [id, t] : directory_->start_) {
    auto it = start.find(id);
    if (it == start.end() || it->second != t) {
      idle_->Forget(id);
      memory_->Forget(id);
      memory_held_.erase(id);
      acted_.erase(id);
    }
  }
  directory_->jobs_ = std::move(running);
  directory_->start_ = std::move(start);
}

void SlurmReclaim::Observe(const GpuSample& sample, const std::vector<std::string>& holders) {
  std::map<std::string, uint64_t> jobs;  // Slurm job -> its processes' memory on this GPU
  bool any_process = false;
  for (const GpuProcess& p : sample.processes) {
    any_process = true;
    if (p.job.kind != JobRef::Kind::kSlurm || p.job.id.empty()) continue;
    jobs[p.job.id] += p.used_memory_bytes.value_or(0);
  }
  for (const std::string& h : holders) jobs.try_emplace(h, 0);
  if (jobs.empty()) {
    if (any_process) ++metrics_.samples_unattributed;
    return;
  }
  const auto activity = efficiency::ActivityMilli(sample, options_.metric);
  if (!activity) return;  // no usable reading is no evidence either way
  const std::string gpu = efficiency::GpuKey(sample);
  for (const auto& [job, bytes] : jobs) {
    idle_->Observe(job, gpu, sample.timestamp, *activity);
    const bool held = bytes >= options_.held_memory_min_bytes;
    memory_->Observe(
        job, gpu, sample.timestamp,
        held ? *activity : std::max(*activity, options_.memory_held.idle_threshold + 1));
    memory_held_[job] = bytes;
  }
}

std::vector<SlurmReclaimRecord> SlurmReclaim::Evaluate(WallTime now) {
  std::vector<SlurmReclaimRecord> out;
  // Memory held while idle first: it is the stronger case and usually the shorter clock.
  const std::pair<const char*, efficiency::IdleReclaimer*> rules[] = {
      {"memory_held_while_idle", memory_.get()}, {"idle", idle_.get()}};
  for (const auto& [rule, reclaimer] : rules) {
    for (efficiency::ReclaimRecord& r : reclaimer->Evaluate(now)) {
      SlurmReclaimRecord rec{rule, std::move(r), 0};
      auto m = memory_held_.find(rec.record.job);
      if (m != memory_held_.end()) rec.memory_held_bytes = m->second;
      if (rec.record.action == efficiency::ReclaimAction::kExempt) ++metrics_.exemptions;
      spdlog::info("slurm reclaim: job {} {} ({}): {}{}", rec.record.job,
                   efficiency::ReclaimActionName(rec.record.action), rule, rec.record.reason,
                   rec.record.result.ok() ? "" : " -> " + rec.record.result.ToString());
      const bool acted = rec.record.result.ok() && !rec.record.dry_run &&
                         (rec.record.action == efficiency::ReclaimAction::kRequeue ||
                          rec.record.action == efficiency::ReclaimAction::kCancel);
      // A job one rule reclaimed is no other rule's business in this run.
      if (acted) {
        for (const auto& [other_rule, other] : rules) {
          if (other != reclaimer) other->Forget(rec.record.job);
        }
      }
      Append(rec);
      out.push_back(std::move(rec));
    }
  }
  return out;
}

std::string ReclaimRecordJson(const SlurmReclaimRecord& r) {
  nlohmann::json j = efficiency::ReclaimRecordToJson(r.record);
  j["engine"] = "slurm";
  j["rule"] = r.rule;
  j["memory_held_bytes"] = r.memory_held_bytes;
  return j.dump();
}

void SlurmReclaim::Append(const SlurmReclaimRecord& r) {
  // The in-memory audit keeps the newest records; the audit file keeps every one.
  if (audit_.size() >= kMaxAuditInMemory) {
    audit_.erase(audit_.begin(), audit_.begin() + kMaxAuditInMemory / 2);
  }
  audit_.push_back(r);
  if (options_.audit_path.empty()) return;
  const std::string line = ReclaimRecordJson(r) + "\n";
  const int fd =
      ::open(options_.audit_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (fd < 0 || ::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
    spdlog::error("slurm reclaim: cannot append to audit log {}", options_.audit_path);
  }
  if (fd >= 0) ::close(fd);
}

}  // namespace stoker::slurm
