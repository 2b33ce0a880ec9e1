#pragma once
// The internal compute market: team credit budgets, prices per GPU model and tier, idle
// allocations charged like used ones, reclaimed capacity sold to the preemptible tier at a
// discount, and an append-only ledger in integer micro-credits. A team out of credit may only
// run preemptible work. Persistence goes through LedgerStore (the server's store implements it;
// an in-memory and a JSON-lines file store are here).

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/enum_table.h"
#include "core/status.h"
#include "efficiency/config.h"
#include "efficiency/jobs.h"

namespace stoker::efficiency {

enum class LedgerKind : uint8_t { kGrant, kCharge, kIdleCharge, kRefund };
inline constexpr EnumTable<LedgerKind, 4> kLedgerKindNames{
    "ledger kind",
    {{{LedgerKind::kGrant, "grant"},
      {LedgerKind::kCharge, "charge"},
      {LedgerKind::kIdleCharge, "idle_charge"},
      {LedgerKind::kRefund, "refund"}}}};
constexpr const auto& NamesOf(LedgerKind) { return kLedgerKindNames; }
inline const char* LedgerKindName(LedgerKind v) { return kLedgerKindNames.CName(v); }

struct LedgerEntry {
  int64_t seq = 0;  // 1, 2, ... in append order
  WallTime at{};
  std::string team;
  LedgerKind kind = LedgerKind::kCharge;
  int64_t micro_credits = 0;  // + grants/refunds, - charges
  std::string job;
  Tier tier = Tier::kGuaranteed;
  std::string gpu_model;
  int64_t milli_gpu_seconds = 0;  // usage charged (0 for grants)
  bool reclaimed = false;         // usage on capacity reclaimed from idle jobs
  std::string note;
};

// The JSON form of an entry (JSON-lines file, the server's store, the API).
std::string LedgerEntryToJson(const LedgerEntry& e);
// Errors name `where` and the field.
Result<LedgerEntry> LedgerEntryFromJson(const std::string& text, const std::string& where);

class LedgerStore {
 public:
  virtual ~LedgerStore() = default;
  virtual Status Append(const LedgerEntry& e) = 0;
  virtual Result<std::vector<LedgerEntry>> LoadAll() = 0;
};

class MemoryLedgerStore final : public LedgerStore {
 public:
  Status Append(const LedgerEntry& e) override {
    entries_.push_back(e);
    return Status::Ok();
  }
  Result<std::vector<LedgerEntry>> LoadAll() override { return entries_; }

 private:
  std::vector<LedgerEntry> entries_;
};

// One JSON object per line, appended and flushed per entry; a torn last line is reported.
class JsonlLedgerStore final : public LedgerStore {
 public:
  explicit JsonlLedgerStore(std::string path) : path_(std::move(path)) {}
  Status Append(const LedgerEntry& e) override;
  Result<std::vector<LedgerEntry>> LoadAll() override;

 private:
  std::string path_;
};

struct UsageCharge {
  std::string team;
  std::string job;
  std::string gpu_model;
  Tier tier = Tier::kGuaranteed;
  int64_t milli_gpu_seconds = 0;  // allocation x time, idle or not
  bool idle = false;              // the allocation sat idle (charged all the same, recorded apart)
  bool reclaimed = false;         // preemptible usage of reclaimed capacity
  WallTime at{};
};

// Not thread-safe: one owner serialises calls.
class ComputeMarket {
 public:
  ComputeMarket(MarketConfig cfg, LedgerStore& store) : cfg_(std::move(cfg)), store_(store) {}

  // Replays the store (balances and sequence numbers); call once before use.
  Status Load();
  // Grants the configured budgets to teams that have no ledger entries yet.
  Status GrantInitialBudgets(WallTime at);

  Status Grant(const std::string& team, int64_t micro_credits, WallTime at,
               const std::string& note);
  // Price in micro-credits per GPU-hour for the model and tier (reclaimed discount applied).
  int64_t PricePerGpuHour(const std::string& gpu_model, Tier tier, bool reclaimed) const;
  Result<LedgerEntry> Charge(const UsageCharge& u);

  int64_t Balance(const std::string& team) const;
  // Guaranteed while the team has credit; preemptible only once it is spent.
  Tier AllowedTier(const std::string& team) const {
    return Balance(team) > 0 ? Tier::kGuaranteed : Tier::kPreemptible;
  }
  bool MayRun(const std::string& team, Tier tier) const {
    return tier == Tier::kPreemptible || AllowedTier(team) == Tier::kGuaranteed;
  }
  const std::vector<LedgerEntry>& entries() const { return entries_; }

 private:
  Status Append(LedgerEntry e);

  MarketConfig cfg_;
  LedgerStore& store_;
  std::vector<LedgerEntry> entries_;
  std::map<std::string, int64_t> balances_;
};

}  // namespace stoker::efficiency
