#include "efficiency/market.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "json/enum_json.h"

namespace stoker::efficiency {

std::string LedgerEntryToJson(const LedgerEntry& e) {
  nlohmann::json j = {{"seq", e.seq},
                      {"at_ns", e.at.time_since_epoch().count()},
                      {"team", e.team},
                      {"kind", e.kind},
                      {"micro_credits", e.micro_credits},
                      {"job", e.job},
                      {"tier", e.tier},
                      {"gpu_model", e.gpu_model},
                      {"milli_gpu_seconds", e.milli_gpu_seconds},
                      {"reclaimed", e.reclaimed},
                      {"note", e.note}};
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Result<LedgerEntry> LedgerEntryFromJson(const std::string& text, const std::string& where) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgument(where + ": not a JSON object");
  try {
    LedgerEntry e;
    e.seq = j.at("seq").get<int64_t>();
    e.at = WallTime(Duration(j.at("at_ns").get<int64_t>()));
    e.team = j.at("team").get<std::string>();
    e.kind = j.at("kind").get<LedgerKind>();
    e.micro_credits = j.at("micro_credits").get<int64_t>();
    e.job = j.value("job", "");
    e.tier = j.value("tier", Tier::kGuaranteed);
    e.gpu_model = j.value("gpu_model", "");
    e.milli_gpu_seconds = j.value("milli_gpu_seconds", int64_t{0});
    e.reclaimed = j.value("reclaimed", false);
    e.note = j.value("note", "");
    return e;
  } catch (const nlohmann::json::exception& ex) {
    return InvalidArgument(where + ": " + ex.what());
  }
}

Status JsonlLedgerStore::Append(const LedgerEntry& e) {
  std::ofstream out(path_, std::ios::app);
  if (!out) return Unavailable(path_ + ": cannot open for append");
  out << LedgerEntryToJson(e) << '\n';
  out.flush();
  if (!out) return Unavailable(path_ + ": write failed");
  return Status::Ok();
}

Result<std::vector<LedgerEntry>> JsonlLedgerStore::LoadAll() {
  std::vector<LedgerEntry> out;
  std::ifstream in(path_);
  if (!in) return out;  // no ledger yet
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty()) continue;
    STOKER_ASSIGN_OR_RETURN(LedgerEntry e,
                            LedgerEntryFromJson(line, path_ + ":" + std::to_string(n)));
    if (e.seq != static_cast<int64_t>(out.size()) + 1) {
      return InvalidArgument(path_ + ":" + std::to_string(n) + ": seq: expected " +
                             std::to_string(out.size() + 1) + ", got " + std::to_string(e.seq) +
                             " (ledger is append-only)");
    }
    out.push_back(std::move(e));
  }
  return out;
}

Status ComputeMarket::Load() {
  STOKER_ASSIGN_OR_RETURN(entries_, store_.LoadAll());
  balances_.clear();
  for (const auto& e : entries_) balances_[e.team] += e.micro_credits;
  return Status::Ok();
}

Status ComputeMarket::GrantInitialBudgets(WallTime at) {
  for (const auto& [team, budget] : cfg_.budgets) {
    if (balances_.count(team)) continue;
    STOKER_RETURN_IF_ERROR(Grant(team, budget, at, "initial budget"));
  }
  return Status::Ok();
}

Status ComputeMarket::Append(LedgerEntry e) {
  e.seq = static_cast<int64_t>(entries_.size()) + 1;
  STOKER_RETURN_IF_ERROR(store_.Append(e));  // persisted first: memory never runs ahead
  balances_[e.team] += e.micro_credits;
  entries_.push_back(std::move(e));
  return Status::Ok();
}

Status ComputeMarket::Grant(const std::string& team, int64_t micro, WallTime at,
                            const std::string& note) {
  if (team.empty()) return InvalidArgument("grant: team: empty");
  if (micro <= 0) return InvalidArgument("grant: amount must be positive");
  LedgerEntry e;
  e.at = at;
  e.team = team;
  e.kind = LedgerKind::kGrant;
  e.micro_credits = micro;
  e.note = note;
  return Append(std::move(e));
}

int64_t ComputeMarket::PricePerGpuHour(const std::string& model, Tier tier, bool reclaimed) const {
  const auto& table = tier == Tier::kGuaranteed ? cfg_.guaranteed_price : cfg_.preemptible_price;
  int64_t price = 0;
  bool found = false;
  for (const auto& [k, v] : table) {
    if (k != "*" && model.find(k) != std::string::npos) {
      price = v;
      found = true;
      break;
    }
  }
  if (!found) {
    auto it = table.find("*");
    if (it != table.end()) price = it->second;
  }
  if (tier == Tier::kPreemptible && reclaimed)
    price = price * (100 - cfg_.reclaimed_discount_pct) / 100;
  return price;
}

Result<LedgerEntry> ComputeMarket::Charge(const UsageCharge& u) {
  if (u.team.empty()) return InvalidArgument("charge: team: empty");
  if (u.milli_gpu_seconds < 0) return InvalidArgument("charge: milli_gpu_seconds: negative");
  const int64_t price = PricePerGpuHour(u.gpu_model, u.tier, u.reclaimed);
  // price [micro/GPU-h] x milli-GPU-s / (1000 x 3600), rounded half up. Split into whole
  // GPU-hours and the remainder so the product cannot overflow for year-long charges.
  constexpr int64_t kMilliGpuSecondsPerGpuHour = 3'600'000;
  const int64_t whole = u.milli_gpu_seconds / kMilliGpuSecondsPerGpuHour;
  const int64_t rest = u.milli_gpu_seconds % kMilliGpuSecondsPerGpuHour;
  const int64_t cost =
      price * whole + (price * rest + kMilliGpuSecondsPerGpuHour / 2) / kMilliGpuSecondsPerGpuHour;
  LedgerEntry e;
  e.at = u.at;
  e.team = u.team;
  e.kind = u.idle ? LedgerKind::kIdleCharge : LedgerKind::kCharge;
  e.micro_credits = -cost;
  e.job = u.job;
  e.tier = u.tier;
  e.gpu_model = u.gpu_model;
  e.milli_gpu_seconds = u.milli_gpu_seconds;
  e.reclaimed = u.reclaimed;
  STOKER_RETURN_IF_ERROR(Append(e));
  return entries_.back();
}

int64_t ComputeMarket::Balance(const std::string& team) const {
  auto it = balances_.find(team);
  return it == balances_.end() ? 0 : it->second;
}

}  // namespace stoker::efficiency
