#include "efficiency/alerts.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <ctime>
#include <nlohmann/json.hpp>

#include "efficiency/xid.h"

namespace stoker::efficiency {

std::string FormatRfc3339(WallTime t) {
  const auto secs = std::chrono::floor<std::chrono::seconds>(t);
  const std::time_t tt = static_cast<std::time_t>(secs.time_since_epoch().count());
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t - secs).count();
  char out[48];
  std::snprintf(out, sizeof out, "%s.%03lldZ", buf, static_cast<long long>(ms));
  return out;
}

Status LogNotifier::Notify(const std::vector<Alert>& batch, WallTime /*now*/) {
  for (const auto& a : batch) {
    std::string labels;
    for (const auto& [k, v] : a.labels) labels += (labels.empty() ? "" : ",") + k + "=" + v;
    spdlog::warn("alert {} {} [{}] {} since {} ({})", AlertStateName(a.state), a.rule,
                 GradeName(a.grade), labels, FormatRfc3339(a.starts_at),
                 a.annotations.count("summary") ? a.annotations.at("summary") : "");
  }
  return Status::Ok();
}

std::string AlertmanagerPayload(const std::vector<Alert>& batch, WallTime now, Duration hold) {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& a : batch) {
    nlohmann::json j;
    j["labels"] = a.labels;
    j["annotations"] = a.annotations;
    j["startsAt"] = FormatRfc3339(a.starts_at);
    j["endsAt"] = FormatRfc3339(a.state == AlertState::kResolved ? a.ends_at : now + hold);
    j["generatorURL"] = "stoker://efficiency/alerts/" + a.rule;
    arr.push_back(std::move(j));
  }
  return arr.dump();
}

Status AlertmanagerNotifier::Notify(const std::vector<Alert>& batch, WallTime now) {
  Status s = poster_.Post(base_url_ + "/api/v2/alerts", AlertmanagerPayload(batch, now, hold_),
                          "application/json");
  if (!s.ok()) return s.WithContext("alertmanager " + base_url_);
  return s;
}

std::string AlertEngine::AddSilence(Silence s) {
  if (s.id.empty()) s.id = "s" + std::to_string(next_silence_++);
  std::string id = s.id;
  cfg_.silences.push_back(std::move(s));
  return id;
}

bool AlertEngine::RemoveSilence(const std::string& id) {
  return std::erase_if(cfg_.silences, [&](const Silence& s) { return s.id == id; }) > 0;
}

AlertEngine::AlertEngine(AlertingConfig cfg, ActivityMetric metric)
    : cfg_(std::move(cfg)), metric_(metric) {
  // Rules are validated at load; rules built in code are checked here so one bad rule is
  // dropped (and logged) instead of misbehaving.
  std::erase_if(cfg_.rules, [](const AlertRule& r) {
    Status s = ValidateRule(r);
    if (!s.ok()) spdlog::error("alert rule dropped: {}", s.message());
    return !s.ok();
  });
  for (Silence& s : cfg_.silences) {
    if (s.id.empty()) s.id = "s" + std::to_string(next_silence_++);
  }
}

void AlertEngine::ObserveGpu(const GpuSample& s, const Labels& extra, bool memory_bound) {
  Signals signals = GpuSignals(s, metric_);
  if (memory_bound) signals["memory_bound"] = 1;
  Labels labels = extra;
  if (!labels.count("job")) {
    const auto jobs = JobsOnGpu(s);
    if (!jobs.empty()) labels["job"] = jobs.front();
  }
  if (!s.id.name.empty()) labels.emplace("model", s.id.name);
  ObserveGpuSignals(GpuKey(s), s.timestamp, std::move(signals), labels);
}

void AlertEngine::ObserveGpuSignals(const std::string& gpu, WallTime t, Signals signals,
                                    const Labels& extra) {
  auto xit = xid_until_.find(gpu);
  signals["xid_fatal"] = (xit != xid_until_.end() && t < xit->second) ? 1 : 0;
  Subject& subj = gpus_[gpu];
  subj.signals = std::move(signals);
  subj.labels = extra;
  subj.labels["gpu"] = gpu;
  subj.labels["uuid"] = gpu;  // Alertmanager inhibition matches on uuid (agent metrics too)
  subj.at = t;
  EvaluateSubject(RuleScope::kGpu, gpu, subj);
}

void AlertEngine::ObserveEvent(const GpuEvent& e, const Labels& extra) {
  if (e.type != GpuEvent::Type::kXid && e.type != GpuEvent::Type::kDoubleBitEcc) return;
  const bool fatal = e.type == GpuEvent::Type::kDoubleBitEcc || GradeXid(e.xid) == XidGrade::kRed;
  if (!fatal) return;
  const std::string gpu = e.uuid.empty() ? "gpu" + std::to_string(e.gpu_index) : e.uuid;
  auto& until = xid_until_[gpu];
  until = std::max(until, e.timestamp + cfg_.xid_hold);
  Subject& subj = gpus_[gpu];
  for (const auto& [k, v] : extra) subj.labels[k] = v;
  subj.labels["gpu"] = gpu;
  subj.labels["xid"] = std::to_string(e.xid);
  subj.signals["xid_fatal"] = 1;
  subj.at = std::max(subj.at, e.timestamp);
  EvaluateSubject(RuleScope::kGpu, gpu, subj);
}

void AlertEngine::ObserveJob(const std::string& job, WallTime t, const Signals& signals,
                             const Labels& extra) {
  Subject subj{signals, extra, t};
  subj.labels["job"] = job;
  EvaluateSubject(RuleScope::kJob, job, subj);
}

void AlertEngine::ObserveCluster(WallTime t, const ClusterSnapshot& c) {
  Subject subj;
  subj.signals = {{"backlog_wait_s", c.backlog_wait_s},
                  {"idle_gpus", static_cast<double>(c.idle_gpus)},
                  {"pending_jobs", static_cast<double>(c.pending_jobs)}};
  // Backlog only counts while some GPU that could run the waiting jobs is idle.
  if (c.idle_gpus == 0) subj.signals["backlog_wait_s"] = 0;
  subj.labels["cluster"] = "stoker";
  subj.at = t;
  EvaluateSubject(RuleScope::kCluster, "cluster", subj);
}

void AlertEngine::EvaluateSubject(RuleScope scope, const std::string& subject, const Subject& s) {
  for (const auto& rule : cfg_.rules) {
    if (rule.scope != scope) continue;
    bool holds = true;
    for (const auto& c : rule.when) {
      auto it = s.signals.find(c.metric);
      if (it == s.signals.end() || !Compare(it->second, c.op, c.value)) {
        holds = false;
        break;
      }
    }
    const std::string fp = rule.name + "/" + subject;
    auto it = alerts_.find(fp);
    if (holds) {
      if (it == alerts_.end() || it->second.state == AlertState::kResolved) {
        Alert a;
        a.fingerprint = fp;
        a.rule = rule.name;
        a.grade = rule.grade;
        a.scope = scope;
        a.subject = subject;
        a.pending_since = s.at;
        it = alerts_.insert_or_assign(fp, std::move(a)).first;
      }
      Alert& a = it->second;
      a.labels = s.labels;
      for (const auto& [k, v] : rule.labels) a.labels[k] = v;
      a.labels["alertname"] = rule.name;
      a.labels["grade"] = GradeName(rule.grade);
      a.labels["severity"] = rule.grade == Grade::kRed ? "critical" : "warning";
      a.value = s.signals.at(rule.when.front().metric);
      a.annotations["summary"] = rule.summary;
      a.annotations["value"] = std::to_string(a.value);
      if (a.state == AlertState::kPending && s.at - a.pending_since >= rule.for_duration) {
        a.state = AlertState::kFiring;
        a.starts_at = a.pending_since;
        history_.push_back(a);
      }
    } else if (it != alerts_.end()) {
      Alert& a = it->second;
      if (a.state == AlertState::kPending) {
        alerts_.erase(it);
      } else if (a.state == AlertState::kFiring) {
        a.state = AlertState::kResolved;
        a.ends_at = s.at;
      }
    }
  }
}

bool AlertEngine::Silenced(const Alert& a, WallTime now) const {
  for (const auto& s : cfg_.silences) {
    if (now < s.starts_at || now >= s.ends_at) continue;
    bool match = true;
    for (const auto& [k, v] : s.matchers) {
      auto it = a.labels.find(k);
      if (it == a.labels.end() || it->second != v) {
        match = false;
        break;
      }
    }
    if (match) return true;
  }
  return false;
}

std::vector<Alert> AlertEngine::Evaluate(WallTime now, std::vector<Status>* errors) {
  // Inhibition: the highest firing grade per GPU and per job.
  std::map<std::string, Grade> top_gpu, top_job;
  for (const auto& [fp, a] : alerts_) {
    if (a.state != AlertState::kFiring) continue;
    if (auto g = a.labels.find("gpu"); g != a.labels.end()) {
      auto& t = top_gpu.try_emplace(g->second, a.grade).first->second;
      t = std::max(t, a.grade);
    }
    if (auto j = a.labels.find("job"); j != a.labels.end() && a.grade == Grade::kRed) {
      auto& t = top_job.try_emplace(j->second, a.grade).first->second;
      t = std::max(t, a.grade);
    }
  }
  std::map<std::string, std::vector<Alert*>> groups;
  for (auto& [fp, a] : alerts_) {
    a.silenced = Silenced(a, now);
    a.inhibited = false;
    if (auto g = a.labels.find("gpu"); g != a.labels.end()) {
      auto t = top_gpu.find(g->second);
      a.inhibited = t != top_gpu.end() && t->second > a.grade;
    } else if (auto j = a.labels.find("job"); j != a.labels.end()) {
      auto t = top_job.find(j->second);
      a.inhibited = t != top_job.end() && t->second > a.grade;
    }
    bool due = false;
    if (a.state == AlertState::kFiring && !a.silenced && !a.inhibited) {
      due = !a.notified_firing || now - a.last_notified >= cfg_.repeat_interval;
    } else if (a.state == AlertState::kResolved) {
      due = a.notified_firing;  // only tell receivers about resolutions they saw fire
    }
    if (!due) continue;
    std::string key;
    for (const auto& l : cfg_.group_by) {
      auto it = a.labels.find(l);
      key += l + "=" + (it == a.labels.end() ? "" : it->second) + ";";
    }
    groups[key].push_back(&a);
  }
  for (auto& [key, members] : groups) {
    std::vector<Alert> batch;
    for (Alert* a : members) batch.push_back(*a);
    for (Notifier* n : notifiers_) {
      Status s = n->Notify(batch, now);
      if (!s.ok()) {
        spdlog::error("alert notification failed: {}", s.ToString());
        if (errors) errors->push_back(s);
      }
    }
    for (Alert* a : members) {
      a->last_notified = now;
      if (a->state == AlertState::kFiring) a->notified_firing = true;
    }
  }
  std::erase_if(alerts_, [](const auto& kv) { return kv.second.state == AlertState::kResolved; });
  return Active();
}

std::vector<Alert> AlertEngine::Active() const {
  std::vector<Alert> out;
  for (const auto& [fp, a] : alerts_) {
    if (a.state != AlertState::kResolved) out.push_back(a);
  }
  std::sort(out.begin(), out.end(), [](const Alert& a, const Alert& b) {
    return a.grade != b.grade ? a.grade > b.grade : a.fingerprint < b.fingerprint;
  });
  return out;
}

}  // namespace stoker::efficiency
