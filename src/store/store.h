#pragma once
// The server's durable state behind one interface. Rows are small: indexed columns the store
// filters on plus a JSON document the server owns (the store does not interpret it), so the
// schema changes rarely and the server's model can evolve without migrations.
//
// Writes go through Apply(): a batch is atomic (all or nothing) and durable when Apply returns
// OK. Concurrent Apply() calls are group-committed: one writer thread folds every batch waiting
// at that moment into a single transaction and acknowledges them all after its COMMIT.

#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace stoker::store {

struct JobRow {
  int64_t id = 0;
  std::string user;
  std::string state;
  std::string node;
  std::string doc;  // JSON document owned by the server
  // The newest JobStatusRow's document; empty when there was none since `doc` was written.
  std::string status;
};

// A stored job's change: its state, node and the document of what changes (the server's),
// written beside the job's row, which stays as it was put (a write proportional to the change,
// not to the job). A job that is not stored is an error (NOT_FOUND) that fails the batch.
struct JobStatusRow {
  int64_t id = 0;
  std::string state;
  std::string node;
  std::string status;
};

struct NodeRow {
  std::string name;
  std::string doc;
};

struct TokenRow {
  std::string hash_hex;  // SHA-256 of the token; the token itself is never stored
  std::string name;      // user name, agent node name, or admin name
  std::string role;      // admin | agent | user
  int64_t created_unix_ms = 0;
  int64_t expires_unix_ms = 0;  // 0: does not expire
};

// One audited action (token created or revoked, ...): who did what to what, and when.
struct AuditRow {
  int64_t seq = 0;  // assigned by the store
  int64_t ts_unix_ms = 0;
  std::string actor;
  std::string action;   // "token.create", "token.revoke", ...
  std::string subject;  // what it was done to (a token's id and name, ...)
  std::string detail;
};

struct EventRow {
  int64_t job_id = 0;
  int64_t ts_unix_ms = 0;
  std::string kind;
  std::string message;
};

// One entry of the efficiency engine's compute-market ledger (append-only; `seq` is the
// ledger's own sequence number, so a replayed append fails instead of doubling a charge).
struct LedgerRow {
  int64_t seq = 0;
  int64_t ts_unix_ms = 0;
  std::string team;
  std::string doc;  // JSON document owned by the efficiency engine
};

// A server setting that outlives restarts (e.g. key "policy": the scheduling policy set with
// PUT /api/v1/policy), as a JSON document the server owns.
struct SettingRow {
  std::string key;
  std::string value;
};

// An atomic set of writes.
class WriteBatch {
 public:
  // Writes the whole row; its status is cleared.
  void PutJob(JobRow row) { jobs_.push_back(std::move(row)); }
  // Applied after every PutJob of the batch.
  void UpdateJob(JobStatusRow row) { job_updates_.push_back(std::move(row)); }
  void PutNode(NodeRow row) { nodes_.push_back(std::move(row)); }
  void PutToken(TokenRow row) { tokens_.push_back(std::move(row)); }
  void RevokeToken(std::string hash_hex) { revoked_tokens_.push_back(std::move(hash_hex)); }
  void AddAudit(AuditRow row) { audit_.push_back(std::move(row)); }
  void AddEvent(EventRow row) { events_.push_back(std::move(row)); }
  void PutSetting(SettingRow row) { settings_.push_back(std::move(row)); }
  void AddLedger(LedgerRow row) { ledger_.push_back(std::move(row)); }
  bool empty() const {
    return jobs_.empty() && job_updates_.empty() && nodes_.empty() && tokens_.empty() &&
           revoked_tokens_.empty() && events_.empty() && ledger_.empty() && settings_.empty() &&
           audit_.empty();
  }

  const std::vector<JobRow>& jobs() const { return jobs_; }
  const std::vector<JobStatusRow>& job_updates() const { return job_updates_; }
  const std::vector<NodeRow>& nodes() const { return nodes_; }
  const std::vector<TokenRow>& tokens() const { return tokens_; }
  const std::vector<std::string>& revoked_tokens() const { return revoked_tokens_; }
  const std::vector<AuditRow>& audit() const { return audit_; }
  const std::vector<EventRow>& events() const { return events_; }
  const std::vector<SettingRow>& settings() const { return settings_; }
  const std::vector<LedgerRow>& ledger() const { return ledger_; }

 private:
  std::vector<JobRow> jobs_;
  std::vector<JobStatusRow> job_updates_;
  std::vector<NodeRow> nodes_;
  std::vector<TokenRow> tokens_;
  std::vector<std::string> revoked_tokens_;
  std::vector<AuditRow> audit_;
  std::vector<EventRow> events_;
  std::vector<SettingRow> settings_;
  std::vector<LedgerRow> ledger_;
};

// Thread-safe.
class Store {
 public:
  virtual ~Store() = default;

  // Atomic and durable on OK (see the durability note on SqliteOptions).
  Status Apply(WriteBatch batch) { return ApplyAsync(std::move(batch)).get(); }
  // Queues the batch and returns at once; the future turns ready after the COMMIT that holds
  // it. Batches commit in the order they were queued, so a caller that queues under its own
  // lock gets its in-memory order on disk.
  std::shared_future<Status> ApplyAsync(WriteBatch batch) {
    return ApplyAsync(std::move(batch), {});
  }
  // The same, with rows that `fill` adds to the batch on the store's writer thread when the
  // batch's turn comes (before its transaction begins): a caller that queues under its own
  // lock keeps its place in the commit order without building those rows under the lock.
  // `fill` must not call the store; whatever it reads must stay unchanged until it has run.
  virtual std::shared_future<Status> ApplyAsync(WriteBatch batch,
                                                std::function<void(WriteBatch*)> fill) = 0;

  virtual Result<std::vector<JobRow>> LoadJobs() = 0;
  virtual Result<std::vector<NodeRow>> LoadNodes() = 0;
  virtual Result<std::vector<TokenRow>> LoadTokens() = 0;
  virtual Result<std::vector<EventRow>> ListEvents(int64_t job_id) = 0;
  virtual Result<int64_t> MaxJobId() = 0;
  virtual Result<std::vector<SettingRow>> LoadSettings() = 0;
  // The whole ledger in seq order.
  virtual Result<std::vector<LedgerRow>> LoadLedger() { return Unimplemented("no ledger"); }
  // The newest `limit` audit rows, oldest first.
  virtual Result<std::vector<AuditRow>> ListAudit(size_t limit) = 0;
  virtual int schema_version() const = 0;

  // The job-id high-water mark, kept beside the database so that no id is ever handed out
  // twice, even when the database lost its newest rows (a write-ahead log cut short): every id
  // below the mark may have been acknowledged. 0 when none was saved. Saving is durable on OK.
  virtual Result<int64_t> LoadJobIdMark() = 0;
  virtual Status SaveJobIdMark(int64_t next_free) = 0;
  // Damage found when the store was opened that may have lost committed state (each a
  // sentence for the log); empty when there was none, or none could be told.
  virtual const std::vector<std::string>& open_warnings() const = 0;
};

struct SqliteOptions {
  // WAL with synchronous=FULL syncs the WAL on every COMMIT: an acknowledged write survives
  // both kill -9 and power loss. NORMAL survives kill -9 (the WAL is in the page cache, the OS
  // writes it out) but may lose the last transactions on power loss.
  bool synchronous_full = true;
  // Upper bound on batches folded into one transaction.
  int max_group = 512;
};

// Opens (creating if needed) the database at `path` and runs pending schema migrations.
Result<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path,
                                               const SqliteOptions& options = {});

}  // namespace stoker::store
