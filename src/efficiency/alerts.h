#pragma once
// Graded alerts: rules (threshold conditions + `for` duration + grade + labels) evaluated over
// GPU samples, job signals and cluster state; pending -> firing -> resolved; inhibition (a
// higher-grade alert on a GPU suppresses lower grades on it), silences, grouping and
// deduplicated notification. Time comes from the observations and Evaluate(now), never a clock.

#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/enum_table.h"
#include "core/gpu.h"
#include "core/status.h"
#include "efficiency/activity.h"
#include "efficiency/config.h"

namespace stoker::efficiency {

using Labels = std::map<std::string, std::string>;

enum class AlertState : uint8_t { kPending, kFiring, kResolved };
inline constexpr EnumTable<AlertState, 3> kAlertStateNames{"alert state",
                                                           {{{AlertState::kPending, "pending"},
                                                             {AlertState::kFiring, "firing"},
                                                             {AlertState::kResolved, "resolved"}}}};
constexpr const auto& NamesOf(AlertState) { return kAlertStateNames; }
inline const char* AlertStateName(AlertState v) { return kAlertStateNames.CName(v); }

struct Alert {
  std::string fingerprint;  // rule name + subject: identity for deduplication
  std::string rule;
  Grade grade = Grade::kYellow;
  RuleScope scope = RuleScope::kGpu;
  std::string subject;  // GPU key, job id or "cluster"
  Labels labels;        // alertname, grade, severity, gpu/job/node, rule labels
  Labels annotations;   // summary, value
  AlertState state = AlertState::kPending;
  WallTime pending_since{};
  WallTime starts_at{};  // when it started firing (pending start, like Prometheus activeAt)
  WallTime ends_at{};    // when resolved; epoch while active
  double value = 0;      // the first condition's signal value at the last evaluation
  bool silenced = false;
  bool inhibited = false;
  WallTime last_notified{};  // epoch = never
  bool notified_firing = false;
  bool evaluated = false;  // an Apply has seen it (silence and inhibition are set)
};

// Something that receives batches of alert notifications (one batch per group).
class Notifier {
 public:
  virtual ~Notifier() = default;
  virtual Status Notify(const std::vector<Alert>& batch, WallTime now) = 0;
};

// Writes one log line per alert (spdlog).
class LogNotifier final : public Notifier {
 public:
  Status Notify(const std::vector<Alert>& batch, WallTime now) override;
};

// The transport the Alertmanager notifier posts through (HTTP lives outside this library).
class HttpPoster {
 public:
  virtual ~HttpPoster() = default;
  virtual Status Post(const std::string& url, const std::string& body,
                      const std::string& content_type) = 0;
};

std::string FormatRfc3339(WallTime t);

// The Alertmanager v2 API body (POST /api/v2/alerts): a JSON array of {labels, annotations,
// startsAt, endsAt, generatorURL}. Firing alerts get endsAt = now + `hold` so Alertmanager keeps
// them until the engine's next resend; resolved ones carry their resolution time.
std::string AlertmanagerPayload(const std::vector<Alert>& batch, WallTime now, Duration hold);

class AlertmanagerNotifier final : public Notifier {
 public:
  // `base_url` like "http://127.0.0.1:9093"; `hold` should exceed the engine's repeat_interval.
  AlertmanagerNotifier(HttpPoster& poster, std::string base_url, Duration hold)
      : poster_(poster), base_url_(std::move(base_url)), hold_(hold) {}
  Status Notify(const std::vector<Alert>& batch, WallTime now) override;

 private:
  HttpPoster& poster_;
  std::string base_url_;
  Duration hold_;
};

struct ClusterSnapshot {
  // Longest wait among pending jobs that idle GPUs could run now (0 when none).
  double backlog_wait_s = 0;
  int idle_gpus = 0;
  int pending_jobs = 0;
};

// Not thread-safe: one owner serialises calls.
class AlertEngine {
 public:
  AlertEngine(AlertingConfig cfg, ActivityMetric metric);
  // Holds pointers into its own alerts: not copyable.
  AlertEngine(const AlertEngine&) = delete;
  AlertEngine& operator=(const AlertEngine&) = delete;

  // `extra` labels (node, job, user...) are attached to this GPU's alerts. `memory_bound` marks
  // the GPU's job as memory-bound (from the job record) for the bandwidth rule.
  void ObserveGpu(const GpuSample& s, const Labels& extra = {}, bool memory_bound = false);
  // Signals computed elsewhere (the simulator, tests).
  void ObserveGpuSignals(const std::string& gpu, WallTime t, const Signals& signals,
                         const Labels& extra);

  // The server's path: a GPU found by handle (its key interned once), its seconds handed over
  // together. Each row is evaluated at its own time exactly as one ObserveGpuSignals call per
  // second would be (pending since, firing, resolved: 1 s resolution); what only the latest
  // observation shows (labels, value, annotations) is written once per call, after the last
  // row. `extra` labels hold for every row. No allocation in the steady state (none when no
  // alert changes state and the labels are the previous call's).
  using GpuHandle = uint32_t;
  struct TimedRow {
    WallTime t{};
    GpuSignalRow signals;
  };
  GpuHandle InternGpu(const std::string& gpu);
  void ObserveGpuRows(GpuHandle gpu, std::span<const TimedRow> rows, const Labels& extra);
  // XIDs and other events: a red XID latches `xid_fatal` on the GPU for xid_hold.
  void ObserveEvent(const GpuEvent& e, const Labels& extra = {});
  void ObserveJob(const std::string& job, WallTime t, const Signals& signals,
                  const Labels& extra = {});
  void ObserveCluster(WallTime t, const ClusterSnapshot& snapshot);

  void AddNotifier(Notifier* n) { notifiers_.push_back(n); }
  // Returns the silence's id ("s1", "s2", ... unless it has one).
  std::string AddSilence(Silence s);
  bool RemoveSilence(const std::string& id);
  const std::vector<Silence>& silences() const { return cfg_.silences; }

  // Applies silences and inhibition, sends due notifications (new firing, repeats, resolutions)
  // grouped by group_by, drops delivered resolutions. Notifier errors are returned in `errors`
  // (when given) and never stop evaluation.
  void Apply(WallTime now, std::vector<Status>* errors = nullptr);
  // Apply, then Active().
  std::vector<Alert> Evaluate(WallTime now, std::vector<Status>* errors = nullptr);

  // The active alerts (pending and firing), sorted by grade (red first) then fingerprint.
  std::vector<Alert> Active() const;
  // Visits them in that order without copying; `evaluated_only`: only those an Apply has seen
  // (an alert that started since the last Apply has no silence or inhibition state yet).
  void ForEachActive(const std::function<void(const Alert&)>& visit,
                     bool evaluated_only = false) const;
  const std::vector<AlertRule>& rules() const { return cfg_.rules; }
  // Every alert that ever fired, in firing order (report and tests).
  const std::vector<Alert>& history() const { return history_; }

 private:
  struct Subject {
    Signals signals;
    Labels labels;
    WallTime at{};
  };
  // A GPU rule's conditions by signal position.
  struct GpuRule {
    size_t rule;  // in cfg_.rules
    struct Cond {
      GpuSignal signal;
      CompareOp op;
      double value;
    };
    std::vector<Cond> when;
  };
  struct GpuSubject {
    std::string key;
    Labels extra;   // as last given
    Labels labels;  // extra + gpu + uuid (+ an XID event's)
    bool labels_stale = true;
    GpuSignalRow signals;  // the latest row, xid_fatal set
    WallTime at{};
    WallTime xid_until{};
    // Per GPU rule (gpu_rules_ order): its alert (null: none), whether it held since the
    // alert's fields were last written, the first condition's value then, and whether the
    // alert's labels are this subject's current ones.
    struct RuleState {
      Alert* alert = nullptr;
      bool held = false;
      bool labelled = false;
      double value = 0;
    };
    std::vector<RuleState> rules;
  };
  void EvaluateSubject(RuleScope scope, const std::string& subject, const Subject& s);
  void StepGpu(GpuSubject& g, const TimedRow& row);
  void WriteAlertFields(GpuSubject& g, size_t r);
  void ForgetGpuAlert(const Alert& a);
  bool Silenced(const Alert& a, WallTime now) const;

  AlertingConfig cfg_;
  ActivityMetric metric_;
  std::vector<Notifier*> notifiers_;
  std::vector<GpuRule> gpu_rules_;
  std::vector<GpuSubject> gpus_;  // by handle
  std::unordered_map<std::string, GpuHandle> gpu_handles_;
  std::map<std::string, Alert> alerts_;  // by fingerprint
  std::vector<Alert> history_;
  int64_t next_silence_ = 1;
};

}  // namespace stoker::efficiency
