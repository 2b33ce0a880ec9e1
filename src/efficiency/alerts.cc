#include "efficiency/alerts.h"

#include <fmt/core.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <ctime>
#include <nlohmann/json.hpp>
#include <string_view>
#include <unordered_map>

#include "efficiency/xid.h"

namespace stoker::efficiency {

std::string FormatRfc3339(WallTime t) {
  const auto secs = std::chrono::floor<std::chrono::seconds>(t);
  const std::time_t tt = static_cast<std::time_t>(secs.time_since_epoch().count());
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[32];  // fits any year a std::tm holds
  const size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t - secs).count();
  return fmt::format("{}.{:03}Z", std::string_view(buf, n), ms);
}

Status LogNotifier::Notify(const std::vector<Alert>& batch, WallTime /*now*/) {
  for (const auto& a : batch) {
    std::string labels;
    for (const auto& [k, v] : a.labels) {
      if (!labels.empty()) labels += ',';
      labels += k;
      labels += '=';
      labels += v;
    }
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
  for (size_t i = 0; i < cfg_.rules.size(); ++i) {
    const AlertRule& r = cfg_.rules[i];
    if (r.scope != RuleScope::kGpu) continue;
    GpuRule g{i, {}};
    for (const Condition& c : r.when) {
      // ValidateRule admitted only GPU signals for GPU rules.
      g.when.push_back({GpuSignalOf(c.metric).value(), c.op, c.value});
    }
    gpu_rules_.push_back(std::move(g));
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
  ObserveGpuSignals(GpuKey(s), s.timestamp, signals, labels);
}

void AlertEngine::ObserveGpuSignals(const std::string& gpu, WallTime t, const Signals& signals,
                                    const Labels& extra) {
  const TimedRow row{t, ToGpuSignalRow(signals)};
  ObserveGpuRows(InternGpu(gpu), std::span<const TimedRow>(&row, 1), extra);
}

AlertEngine::GpuHandle AlertEngine::InternGpu(const std::string& gpu) {
  auto [it, fresh] = gpu_handles_.try_emplace(gpu, static_cast<GpuHandle>(gpus_.size()));
  if (fresh) {
    GpuSubject g;
    g.key = gpu;
    g.rules.resize(gpu_rules_.size());
    gpus_.push_back(std::move(g));
  }
  return it->second;
}

void AlertEngine::ObserveGpuRows(GpuHandle gpu, std::span<const TimedRow> rows,
                                 const Labels& extra) {
  GpuSubject& g = gpus_.at(gpu);
  if (g.labels_stale || g.extra != extra) {
    g.extra = extra;
    g.labels = extra;
    g.labels["gpu"] = g.key;
    g.labels["uuid"] = g.key;  // Alertmanager inhibition matches on uuid (agent metrics too)
    g.labels_stale = false;
    for (auto& st : g.rules) st.labelled = false;
  }
  for (const TimedRow& in : rows) {
    TimedRow row = in;
    row.signals.Set(GpuSignal::kXidFatal, row.t < g.xid_until ? 1 : 0);
    StepGpu(g, row);
  }
  for (size_t r = 0; r < g.rules.size(); ++r) {
    if (g.rules[r].held && g.rules[r].alert != nullptr) WriteAlertFields(g, r);
  }
}

void AlertEngine::StepGpu(GpuSubject& g, const TimedRow& row) {
  g.signals = row.signals;
  g.at = row.t;
  for (size_t r = 0; r < gpu_rules_.size(); ++r) {
    const GpuRule& gr = gpu_rules_[r];
    const AlertRule& rule = cfg_.rules[gr.rule];
    bool holds = true;
    for (const GpuRule::Cond& c : gr.when) {
      if (!row.signals.Has(c.signal) || !Compare(row.signals.Get(c.signal), c.op, c.value)) {
        holds = false;
        break;
      }
    }
    GpuSubject::RuleState& st = g.rules[r];
    if (holds) {
      if (st.alert == nullptr || st.alert->state == AlertState::kResolved) {
        Alert a;
        a.fingerprint = rule.name + "/" + g.key;
        a.rule = rule.name;
        a.grade = rule.grade;
        a.scope = RuleScope::kGpu;
        a.subject = g.key;
        a.pending_since = row.t;
        std::string fp = a.fingerprint;
        st.alert = &alerts_.insert_or_assign(std::move(fp), std::move(a)).first->second;
        st.labelled = false;
      }
      st.held = true;
      st.value = row.signals.Get(gr.when.front().signal);
      Alert& a = *st.alert;
      if (a.state == AlertState::kPending && row.t - a.pending_since >= rule.for_duration) {
        WriteAlertFields(g, r);  // what fires carries this second's labels and value
        a.state = AlertState::kFiring;
        a.starts_at = a.pending_since;
        history_.push_back(a);
      }
    } else if (st.alert != nullptr) {
      Alert& a = *st.alert;
      if (a.state == AlertState::kPending) {
        alerts_.erase(alerts_.find(a.fingerprint));
        st.alert = nullptr;
        st.held = false;
      } else if (a.state == AlertState::kFiring) {
        a.state = AlertState::kResolved;
        a.ends_at = row.t;
      }
    }
  }
}

// What EvaluateSubject writes on every observation where the rule holds: the subject's labels
// with the rule's, the first condition's value and the annotations.
void AlertEngine::WriteAlertFields(GpuSubject& g, size_t r) {
  GpuSubject::RuleState& st = g.rules[r];
  const AlertRule& rule = cfg_.rules[gpu_rules_[r].rule];
  Alert& a = *st.alert;
  if (!st.labelled) {
    a.labels = g.labels;
    for (const auto& [k, v] : rule.labels) a.labels[k] = v;
    a.labels["alertname"] = rule.name;
    a.labels["grade"] = GradeName(rule.grade);
    a.labels["severity"] = rule.grade == Grade::kRed ? "critical" : "warning";
    a.annotations["summary"] = rule.summary;
    st.labelled = true;
  }
  a.value = st.value;
  a.annotations["value"] = std::to_string(a.value);
  st.held = false;
}

void AlertEngine::ForgetGpuAlert(const Alert& a) {
  if (a.scope != RuleScope::kGpu) return;
  auto h = gpu_handles_.find(a.subject);
  if (h == gpu_handles_.end()) return;
  for (auto& st : gpus_[h->second].rules) {
    if (st.alert == &a) {
      st.alert = nullptr;
      st.held = false;
    }
  }
}

void AlertEngine::ObserveEvent(const GpuEvent& e, const Labels& extra) {
  if (e.type != GpuEvent::Type::kXid && e.type != GpuEvent::Type::kDoubleBitEcc) return;
  const bool fatal = e.type == GpuEvent::Type::kDoubleBitEcc || GradeXid(e.xid) == XidGrade::kRed;
  if (!fatal) return;
  const std::string gpu = e.uuid.empty() ? "gpu" + std::to_string(e.gpu_index) : e.uuid;
  GpuSubject& g = gpus_[InternGpu(gpu)];
  g.xid_until = std::max(g.xid_until, e.timestamp + cfg_.xid_hold);
  for (const auto& [k, v] : extra) g.labels[k] = v;
  g.labels["gpu"] = gpu;
  g.labels["xid"] = std::to_string(e.xid);
  // The next observation starts again from its own labels, as it always did.
  g.labels_stale = true;
  for (auto& st : g.rules) st.labelled = false;
  TimedRow row{std::max(g.at, e.timestamp), g.signals};
  row.signals.Set(GpuSignal::kXidFatal, 1);
  StepGpu(g, row);
  for (size_t r = 0; r < g.rules.size(); ++r) {
    if (g.rules[r].held && g.rules[r].alert != nullptr) WriteAlertFields(g, r);
  }
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
  Apply(now, errors);
  return Active();
}

void AlertEngine::Apply(WallTime now, std::vector<Status>* errors) {
  // Inhibition: the highest firing grade per GPU and per job (keys: the alerts' label values,
  // which outlive this call's use of them).
  std::unordered_map<std::string_view, Grade> top_gpu, top_job;
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
    a.evaluated = true;
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
  for (auto it = alerts_.begin(); it != alerts_.end();) {
    if (it->second.state != AlertState::kResolved) {
      ++it;
      continue;
    }
    ForgetGpuAlert(it->second);
    it = alerts_.erase(it);
  }
}

std::vector<Alert> AlertEngine::Active() const {
  std::vector<Alert> out;
  ForEachActive([&out](const Alert& a) { out.push_back(a); });
  return out;
}

void AlertEngine::ForEachActive(const std::function<void(const Alert&)>& visit,
                                bool evaluated_only) const {
  // alerts_ is ordered by fingerprint: one walk per grade, red first, needs no sort (and no
  // copy of every alert, which at 80,000 GPUs took a fifth of a second under the caller's lock).
  for (Grade g : {Grade::kRed, Grade::kOrange, Grade::kYellow}) {
    for (const auto& [fp, a] : alerts_) {
      if (a.grade != g || a.state == AlertState::kResolved) continue;
      if (evaluated_only && !a.evaluated) continue;
      visit(a);
    }
  }
}

}  // namespace stoker::efficiency
