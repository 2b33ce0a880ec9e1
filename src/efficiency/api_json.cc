#include "efficiency/api_json.h"

#include <cmath>

#include "json/enum_json.h"

namespace stoker::efficiency {
namespace {

using nlohmann::json;

double Unix(WallTime t) { return std::chrono::duration<double>(t.time_since_epoch()).count(); }

}  // namespace

json ZoneStatusToJson(const ZoneStatus& s) {
  return {{"key", s.key},
          {"zone", s.zone},
          {"mean_pct", static_cast<double>(s.mean_milli) / 1000.0},
          {"peak_pct", static_cast<double>(s.peak_milli) / 1000.0},
          {"samples", s.samples},
          {"zero_samples", s.zero_samples},
          {"covered_s", std::chrono::duration<double>(s.covered).count()},
          {"metric", s.metric},
          {"last_sample", FormatRfc3339(s.last_sample)}};
}

json PackGroupToJson(const PackGroup& g) {
  return {{"jobs", g.jobs},
          {"mode", g.mode},
          {"mig_layout", g.mig_layout},
          {"combined_pct", static_cast<double>(g.combined_milli) / 1000.0},
          {"apply_now", g.apply_now},
          {"gpus_freed", g.gpus_freed},
          {"reason", g.reason}};
}

json ZonesToJson(const std::vector<ZoneStatus>& gpus, const std::vector<ZoneStatus>& jobs,
                 const ConsolidationPlan& plan, const ZoneConfig& cfg) {
  json out = {{"gpus", json::array()},
              {"jobs", json::array()},
              {"consolidation", json::array()},
              {"gpus_freed", plan.gpus_freed},
              {"window", FormatDuration(cfg.window)},
              // A zone stays unknown until its window holds this much of samples.
              {"min_coverage", FormatDuration(cfg.min_coverage)}};
  for (const auto& s : gpus) out["gpus"].push_back(ZoneStatusToJson(s));
  for (const auto& s : jobs) out["jobs"].push_back(ZoneStatusToJson(s));
  for (const auto& g : plan.groups) out["consolidation"].push_back(PackGroupToJson(g));
  return out;
}

json AlertToJson(const Alert& a) {
  auto summary = a.annotations.find("summary");
  return {
      {"rule", a.rule},
      {"grade", a.grade},
      {"state", a.state},
      {"subject", a.subject},
      {"labels", a.labels},
      // A pending alert has not started firing: no starts_at, only pending_since.
      {"starts_at", a.starts_at == WallTime{} ? json(nullptr) : json(FormatRfc3339(a.starts_at))},
      {"pending_since",
       a.pending_since == WallTime{} ? json(nullptr) : json(FormatRfc3339(a.pending_since))},
      {"summary", summary == a.annotations.end() ? "" : summary->second},
      {"value", std::isfinite(a.value) ? a.value : 0.0},
      {"silenced", a.silenced},
      {"inhibited", a.inhibited}};
}

json SilenceToJson(const Silence& s) {
  json j = {{"id", s.id},
            {"matchers", s.matchers},
            {"starts_at", Unix(s.starts_at)},
            {"comment", s.comment}};
  j["ends_at"] = s.ends_at == WallTime::max() ? json(nullptr) : json(Unix(s.ends_at));
  return j;
}

Result<Silence> SilenceFromJson(const json& j, WallTime now) {
  if (!j.is_object()) return InvalidArgument("body: must be a JSON object");
  Silence s;
  s.starts_at = now;
  s.ends_at = WallTime::max();
  bool have_end = false;
  for (const auto& [k, v] : j.items()) {
    if (k == "matchers") {
      if (!v.is_object() || v.empty())
        return InvalidArgument("matchers: must be a non-empty object of label: value");
      for (const auto& [label, value] : v.items()) {
        if (!value.is_string()) return InvalidArgument("matchers." + label + ": must be a string");
        s.matchers[label] = value.get<std::string>();
      }
    } else if (k == "starts_at" || k == "ends_at") {
      if (!v.is_number() || v.get<double>() < 0 || v.get<double>() > 4e9) {
        return InvalidArgument(k + ": must be a Unix time in seconds");
      }
      const WallTime t(
          std::chrono::duration_cast<Duration>(std::chrono::duration<double>(v.get<double>())));
      (k == "starts_at" ? s.starts_at : s.ends_at) = t;
      have_end |= k == "ends_at";
    } else if (k == "duration") {
      if (!v.is_string()) return InvalidArgument("duration: must be a string like \"2h\"");
      auto d = ParseDuration(v.get<std::string>());
      if (!d.ok()) return d.status().WithContext("duration");
      if (d->count() <= 0) return InvalidArgument("duration: must be positive");
      s.ends_at = now + *d;
      have_end = true;
    } else if (k == "comment") {
      if (!v.is_string()) return InvalidArgument("comment: must be a string");
      s.comment = v.get<std::string>();
    } else {
      return InvalidArgument(k + ": unknown field");
    }
  }
  if (s.matchers.empty()) return InvalidArgument("matchers: required");
  if (have_end && s.ends_at <= s.starts_at) return InvalidArgument("ends_at: not after starts_at");
  return s;
}

json ReclaimRecordToJson(const ReclaimRecord& r) {
  return {{"at", FormatRfc3339(r.at)},
          {"job", r.job},
          {"user", r.user},
          {"action", r.action},
          {"dry_run", r.dry_run},
          {"result", r.result.ok() ? "ok" : r.result.ToString()},
          {"reason", r.reason},
          {"evidence",
           {{"window_start", FormatRfc3339(r.evidence.window_start)},
            {"window_end", FormatRfc3339(r.evidence.window_end)},
            {"samples", r.evidence.samples},
            {"max_activity_pct", static_cast<double>(r.evidence.max_activity_milli) / 1000.0},
            {"gpus", r.evidence.gpus},
            {"idle_gpus", r.evidence.idle_gpus},
            {"idle_threshold_pct", static_cast<double>(r.evidence.idle_threshold_milli) / 1000.0},
            {"warn_after", FormatDuration(r.evidence.warn_after)},
            {"act_after", FormatDuration(r.evidence.act_after)}}}};
}

json LedgerEntryJson(const LedgerEntry& e) {
  return {{"seq", e.seq},
          {"at", FormatRfc3339(e.at)},
          {"team", e.team},
          {"kind", e.kind},
          {"credits", static_cast<double>(e.micro_credits) / 1e6},
          {"micro_credits", e.micro_credits},
          {"job", e.job},
          {"tier", e.tier},
          {"gpu_model", e.gpu_model},
          {"gpu_hours", static_cast<double>(e.milli_gpu_seconds) / 3.6e6},
          {"reclaimed", e.reclaimed},
          {"note", e.note}};
}

}  // namespace stoker::efficiency
