// SQLite implementation of Store: one writer connection driven by a group-commit thread, one
// reader connection (WAL lets readers run while the writer commits).

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <fstream>
#include <future>
#include <mutex>
#include <sstream>
#include <thread>

#include "store/store.h"

namespace stoker::store {
namespace {

// Schema migrations, applied in order; user_version records how many ran. Never edit a
// migration that shipped: append a new one.
constexpr const char* kMigrations[] = {
    R"sql(
CREATE TABLE jobs (id INTEGER PRIMARY KEY, user TEXT NOT NULL, state TEXT NOT NULL,
                   node TEXT NOT NULL DEFAULT '', doc TEXT NOT NULL);
CREATE INDEX jobs_state ON jobs(state);
CREATE INDEX jobs_user ON jobs(user);
CREATE TABLE nodes (name TEXT PRIMARY KEY, doc TEXT NOT NULL);
CREATE TABLE tokens (hash TEXT PRIMARY KEY, name TEXT NOT NULL, role TEXT NOT NULL,
                     created_ms INTEGER NOT NULL);
CREATE TABLE events (seq INTEGER PRIMARY KEY AUTOINCREMENT, job_id INTEGER NOT NULL,
                     ts_ms INTEGER NOT NULL, kind TEXT NOT NULL, message TEXT NOT NULL);
CREATE INDEX events_job ON events(job_id);
)sql",
    // 2: the efficiency engine's compute-market ledger.
    R"sql(
CREATE TABLE ledger (seq INTEGER PRIMARY KEY, ts_ms INTEGER NOT NULL, team TEXT NOT NULL,
                     doc TEXT NOT NULL);
CREATE INDEX ledger_team ON ledger(team);
)sql",
    // 3: server settings (the scheduling policy set through the API).
    R"sql(
CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
)sql",
    // 4: token expiry and the audit log (token creation and revocation).
    R"sql(
ALTER TABLE tokens ADD COLUMN expires_ms INTEGER NOT NULL DEFAULT 0;
CREATE TABLE audit (seq INTEGER PRIMARY KEY AUTOINCREMENT, ts_ms INTEGER NOT NULL,
                    actor TEXT NOT NULL, action TEXT NOT NULL, subject TEXT NOT NULL,
                    detail TEXT NOT NULL);
)sql",
    // 5: a job's changes in a narrow table beside the row written at submission: a placement
    // writes its state, node and status there, not the whole row again. A job_status row, when
    // there is one, holds the job's state and node (the jobs row keeps those of its put).
    R"sql(
CREATE TABLE job_status (id INTEGER PRIMARY KEY, state TEXT NOT NULL, node TEXT NOT NULL,
                         status TEXT NOT NULL);
)sql",
};
constexpr int kSchemaVersion = static_cast<int>(std::size(kMigrations));

Status SqlError(sqlite3* db, const std::string& what) {
  return Internal("sqlite: " + what + ": " + (db ? sqlite3_errmsg(db) : "no database"));
}

Status Exec(sqlite3* db, const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    return Internal("sqlite: " + msg + " in: " + sql.substr(0, 80));
  }
  return Status::Ok();
}

// RAII prepared statement.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) : db_(db) {
    if (sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt_, nullptr) != SQLITE_OK) {
      stmt_ = nullptr;
    }
  }
  ~Stmt() { sqlite3_finalize(stmt_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  bool ok() const { return stmt_ != nullptr; }
  sqlite3_stmt* get() { return stmt_; }
  void Reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  void Bind(int i, const std::string& s) {
    sqlite3_bind_text(stmt_, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
  }
  void Bind(int i, int64_t v) { sqlite3_bind_int64(stmt_, i, v); }
  std::string Text(int col) {
    const unsigned char* t = sqlite3_column_text(stmt_, col);
    return t ? std::string(reinterpret_cast<const char*>(t),
                           static_cast<size_t>(sqlite3_column_bytes(stmt_, col)))
             : std::string();
  }
  int64_t Int(int col) { return sqlite3_column_int64(stmt_, col); }
  // Runs a statement that returns no rows.
  Status Run(const char* what) {
    const int rc = sqlite3_step(stmt_);
    Reset();
    return rc == SQLITE_DONE ? Status::Ok() : SqlError(db_, what);
  }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

// What a look at the write-ahead log before SQLite opens it can tell (the WAL file format is
// documented by SQLite: a 32-byte header, then frames of a 24-byte header and one page, each
// frame's cumulative checksum and the header's salts tying it to the log). SQLite recovers the
// committed frames and silently ignores the rest; a frame of the current log whose checksum
// fails, or a log that ends inside a frame, means a transaction was cut, and it may have been
// acknowledged before the damage.
std::vector<std::string> InspectWal(const std::string& db_path) {
  const std::string path = db_path + "-wal";
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (data.size() < 32) return {};
  auto be32 = [&](size_t at) {
    return (static_cast<uint32_t>(static_cast<unsigned char>(data[at])) << 24) |
           (static_cast<uint32_t>(static_cast<unsigned char>(data[at + 1])) << 16) |
           (static_cast<uint32_t>(static_cast<unsigned char>(data[at + 2])) << 8) |
           static_cast<uint32_t>(static_cast<unsigned char>(data[at + 3]));
  };
  const uint32_t magic = be32(0);
  if (magic != 0x377f0682 && magic != 0x377f0683) return {};
  const bool big_endian = magic == 0x377f0683;
  auto word = [&](size_t at) {
    if (big_endian) return be32(at);
    return static_cast<uint32_t>(static_cast<unsigned char>(data[at])) |
           (static_cast<uint32_t>(static_cast<unsigned char>(data[at + 1])) << 8) |
           (static_cast<uint32_t>(static_cast<unsigned char>(data[at + 2])) << 16) |
           (static_cast<uint32_t>(static_cast<unsigned char>(data[at + 3])) << 24);
  };
  uint32_t s0 = 0, s1 = 0;
  auto sum = [&](size_t from, size_t len) {
    for (size_t i = from; i + 8 <= from + len; i += 8) {
      s0 += word(i) + s1;
      s1 += word(i + 4) + s0;
    }
  };
  const uint32_t page_size = be32(8) == 1 ? 65536 : be32(8);
  if (page_size < 512 || (page_size & (page_size - 1)) != 0) return {};
  sum(0, 24);
  if (s0 != be32(24) || s1 != be32(28)) return {};  // a header SQLite itself would not trust
  const uint32_t salt1 = be32(16), salt2 = be32(20);
  const size_t frame = 24 + page_size;
  size_t at = 32;
  int64_t valid = 0;
  for (; at + frame <= data.size(); at += frame) {
    if (be32(at + 8) != salt1 || be32(at + 12) != salt2) return {};  // an older log's frames
    sum(at, 8);
    sum(at + 24, page_size);
    if (s0 != be32(at + 16) || s1 != be32(at + 20)) {
      return {"the write-ahead log " + path + " holds a damaged frame after " +
              std::to_string(valid) +
              " good ones: the transaction it belonged to was lost, and it may have been "
              "acknowledged (disk or file-system damage, or the file was cut)"};
    }
    ++valid;
  }
  if (at < data.size() && data.size() - at >= 16 && be32(at + 8) == salt1 &&
      be32(at + 12) == salt2) {
    return {"the write-ahead log " + path + " ends inside a frame after " + std::to_string(valid) +
            " good ones: the last transaction was cut short and lost, and it may have been "
            "acknowledged (disk or file-system damage, or the file was cut)"};
  }
  return {};
}

// Writes `content` to `path` durably: a temporary file, fsync, rename, fsync of the directory.
Status WriteFileDurably(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Internal("open " + tmp + ": " + std::strerror(errno));
  const bool ok =
      ::write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size()) &&
      ::fsync(fd) == 0;
  const int err = errno;
  ::close(fd);
  if (!ok) return Internal("write " + tmp + ": " + std::strerror(err));
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    return Internal("rename " + tmp + ": " + std::strerror(errno));
  }
  const std::string dir = path.substr(0, path.find_last_of('/') + 1);
  const int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return Status::Ok();
}

class SqliteStore final : public Store {
 public:
  SqliteStore(sqlite3* writer, sqlite3* reader, SqliteOptions options, std::string path,
              std::vector<std::string> warnings)
      : writer_(writer),
        reader_(reader),
        options_(options),
        path_(std::move(path)),
        warnings_(std::move(warnings)) {
    // An upsert changes a stored job in place (REPLACE would delete the row and insert it
    // again, updating every index twice); indexes change only where their column does.
    put_job_ = std::make_unique<Stmt>(
        writer_,
        "INSERT INTO jobs(id,user,state,node,doc) VALUES(?,?,?,?,?) ON CONFLICT(id) DO UPDATE "
        "SET user=excluded.user,state=excluded.state,node=excluded.node,doc=excluded.doc");
    clear_job_status_ = std::make_unique<Stmt>(writer_, "DELETE FROM job_status WHERE id=?");
    // Only for a stored job: ApplyOne looks the job up first (job_stored_) and reports an
    // update of a job that is not stored. The two are separate statements on purpose: an
    // upsert from `SELECT ... WHERE EXISTS` is a multi-row INSERT, for which SQLite keeps a
    // statement journal, and inside a batch's SAVEPOINT that journal grows with every row (it
    // copied about 90,000 pages to a temporary file in the 100,000-job pass, half of the
    // write's time; docs/performance.md). A single-row upsert needs none.
    job_stored_ = std::make_unique<Stmt>(writer_, "SELECT 1 FROM jobs WHERE id=?");
    update_job_ = std::make_unique<Stmt>(
        writer_,
        "INSERT INTO job_status(id,state,node,status) VALUES(?1,?2,?3,?4) ON CONFLICT(id) DO "
        "UPDATE SET state=excluded.state,node=excluded.node,status=excluded.status");
    put_node_ =
        std::make_unique<Stmt>(writer_, "INSERT OR REPLACE INTO nodes(name,doc) VALUES(?,?)");
    put_token_ = std::make_unique<Stmt>(
        writer_,
        "INSERT OR REPLACE INTO tokens(hash,name,role,created_ms,expires_ms) VALUES(?,?,?,?,?)");
    del_token_ = std::make_unique<Stmt>(writer_, "DELETE FROM tokens WHERE hash=?");
    add_audit_ = std::make_unique<Stmt>(
        writer_, "INSERT INTO audit(ts_ms,actor,action,subject,detail) VALUES(?,?,?,?,?)");
    add_event_ = std::make_unique<Stmt>(
        writer_, "INSERT INTO events(job_id,ts_ms,kind,message) VALUES(?,?,?,?)");
    put_setting_ = std::make_unique<Stmt>(writer_,
                                          "INSERT INTO settings(key,value) VALUES(?,?) "
                                          "ON CONFLICT(key) DO UPDATE SET value=excluded.value");
    add_ledger_ =
        std::make_unique<Stmt>(writer_, "INSERT INTO ledger(seq,ts_ms,team,doc) VALUES(?,?,?,?)");
    // The writer checkpoints the log itself, after acknowledging a commit (WriterLoop); this
    // replaces SQLite's automatic checkpoint, which runs inside the COMMIT that crosses it.
    sqlite3_wal_hook(writer_, &SqliteStore::OnWalCommit, this);
    writer_thread_ = std::thread([this] { WriterLoop(); });
  }

  ~SqliteStore() override {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    writer_thread_.join();
    put_job_.reset();
    clear_job_status_.reset();
    job_stored_.reset();
    update_job_.reset();
    put_node_.reset();
    put_token_.reset();
    del_token_.reset();
    add_audit_.reset();
    add_event_.reset();
    add_ledger_.reset();
    put_setting_.reset();
    sqlite3_close_v2(reader_);
    sqlite3_close_v2(writer_);
  }

  bool Prepared() const {
    return put_job_->ok() && clear_job_status_->ok() && job_stored_->ok() && update_job_->ok() &&
           put_node_->ok() && put_token_->ok() && del_token_->ok() && add_audit_->ok() &&
           add_event_->ok() && add_ledger_->ok() && put_setting_->ok();
  }

  using Store::ApplyAsync;
  std::shared_future<Status> ApplyAsync(WriteBatch batch,
                                        std::function<void(WriteBatch*)> fill) override {
    auto p = std::make_unique<Pending>();
    p->batch = std::move(batch);
    p->fill = std::move(fill);
    if (p->batch.empty() && !p->fill) {
      p->promise.set_value(Status::Ok());
      return p->promise.get_future().share();
    }
    return Enqueue(std::move(p));
  }

  Result<std::vector<JobRow>> LoadJobs() override {
    std::lock_guard lock(read_mu_);
    Stmt s(reader_,
           "SELECT j.id,j.user,COALESCE(s.state,j.state),COALESCE(s.node,j.node),j.doc,"
           "COALESCE(s.status,'') FROM jobs j LEFT JOIN job_status s ON s.id=j.id ORDER BY j.id");
    if (!s.ok()) return SqlError(reader_, "prepare LoadJobs");
    std::vector<JobRow> out;
    int rc;
    while ((rc = sqlite3_step(s.get())) == SQLITE_ROW) {
      out.push_back(JobRow{s.Int(0), s.Text(1), s.Text(2), s.Text(3), s.Text(4), s.Text(5)});
    }
    if (rc != SQLITE_DONE) return SqlError(reader_, "LoadJobs");
    return out;
  }

  Result<std::vector<NodeRow>> LoadNodes() override {
    std::lock_guard lock(read_mu_);
    Stmt s(reader_, "SELECT name,doc FROM nodes ORDER BY name");
    if (!s.ok()) return SqlError(reader_, "prepare LoadNodes");
    std::vector<NodeRow> out;
    int rc;
    while ((rc = sqlite3_step(s.get())) == SQLITE_ROW) out.push_back(NodeRow{s.Text(0), s.Text(1)});
    if (rc != SQLITE_DONE) return SqlError(reader_, "LoadNodes");
    return out;
  }

  Result<std::vector<TokenRow>> LoadTokens() override {
    std::lock_guard lock(read_mu_);
    Stmt s(reader_, "SELECT hash,name,role,created_ms,expires_ms FROM tokens ORDER BY name");
    if (!s.ok()) return SqlError(reader_, "prepare LoadTokens");
    std::vector<TokenRow> out;
    int rc;
    while ((rc = sqlite3_step(s.get())) == SQLITE_ROW) {
      out.push_back(TokenRow{s.Text(0), s.Text(1), s.Text(2), s.Int(3), s.Int(4)});
    }
    if (rc != SQLITE_DONE) return SqlError(reader_, "LoadTokens");
    return out;
  }

  Result<std::vector<EventRow>> ListEvents(int64_t job_id) override {
    std::lock_guard lock(read_mu_);
    Stmt s(reader_, "SELECT job_id,ts_ms,kind,message FROM events WHERE job_id=? ORDER BY seq");
    if (!s.ok()) return SqlError(reader_, "prepare ListEvents");
    s.Bind(1, job_id);
    std::vector<EventRow> out;
    int rc;
    while ((rc = sqlite3_step(s.get())) == SQLITE_ROW) {
      out.push_back(EventRow{s.Int(0), s.Int(1), s.Text(2), s.Text(3)});
    }
    if (rc != SQLITE_DONE) return SqlError(reader_, "ListEvents");
    return out;
  }

  Result<int64_t> MaxJobId() override {
    std::lock_guard lock(read_mu_);
    Stmt s(reader_, "SELECT COALESCE(MAX(id),0) FROM jobs");
    if (!s.ok() || sqlite3_step(s.get()) != SQLITE_ROW) return SqlError(reader_, "MaxJobId");
    return s.Int(0);
  }

  Result<std::vector<SettingRow>> LoadSettings() override {
    std::lock_guard lock(read_mu_);
    Stmt s(reader_, "SELECT key,value FROM settings ORDER BY key");
    if (!s.ok()) return SqlError(reader_, "prepare LoadSettings");
    std::vector<SettingRow> out;
    int rc;
    while ((rc = sqlite3_step(s.get())) == SQLITE_ROW)
      out.push_back(SettingRow{s.Text(0), s.Text(1)});
    if (rc != SQLITE_DONE) return SqlError(reader_, "LoadSettings");
    return out;
  }

  Result<std::vector<LedgerRow>> LoadLedger() override {
    std::lock_guard lock(read_mu_);
    Stmt s(reader_, "SELECT seq,ts_ms,team,doc FROM ledger ORDER BY seq");
    if (!s.ok()) return SqlError(reader_, "prepare LoadLedger");
    std::vector<LedgerRow> out;
    int rc;
    while ((rc = sqlite3_step(s.get())) == SQLITE_ROW) {
      out.push_back(LedgerRow{s.Int(0), s.Int(1), s.Text(2), s.Text(3)});
    }
    if (rc != SQLITE_DONE) return SqlError(reader_, "LoadLedger");
    return out;
  }

  Result<std::vector<AuditRow>> ListAudit(size_t limit) override {
    std::lock_guard lock(read_mu_);
    Stmt s(reader_,
           "SELECT seq,ts_ms,actor,action,subject,detail FROM "
           "(SELECT * FROM audit ORDER BY seq DESC LIMIT ?) ORDER BY seq");
    if (!s.ok()) return SqlError(reader_, "prepare ListAudit");
    s.Bind(1, static_cast<int64_t>(limit));
    std::vector<AuditRow> out;
    int rc;
    while ((rc = sqlite3_step(s.get())) == SQLITE_ROW) {
      out.push_back(AuditRow{s.Int(0), s.Int(1), s.Text(2), s.Text(3), s.Text(4), s.Text(5)});
    }
    if (rc != SQLITE_DONE) return SqlError(reader_, "ListAudit");
    return out;
  }

  Result<int64_t> LoadJobIdMark() override {
    std::ifstream in(path_ + ".ids");
    if (!in) return int64_t{0};
    int64_t mark = 0;
    if (!(in >> mark) || mark < 0) {
      return Internal("job-id mark " + path_ +
                      ".ids is unreadable; remove it only if the "
                      "database is known to be complete");
    }
    return mark;
  }

  Status SaveJobIdMark(int64_t next_free) override {
    std::lock_guard lock(mark_mu_);
    return WriteFileDurably(path_ + ".ids", std::to_string(next_free) + "\n");
  }

  const std::vector<std::string>& open_warnings() const override { return warnings_; }

  int schema_version() const override { return kSchemaVersion; }

 private:
  struct Pending {
    WriteBatch batch;
    std::function<void(WriteBatch*)> fill;
    std::promise<Status> promise;
  };

  // Queues `p` for the writer thread (or fails it when the store is closing); its future.
  std::shared_future<Status> Enqueue(std::unique_ptr<Pending> p) {
    std::shared_future<Status> f = p->promise.get_future().share();
    std::lock_guard lock(mu_);
    if (stopping_) {
      p->promise.set_value(Unavailable("store is closing"));
      return f;
    }
    queue_.push_back(std::move(p));
    cv_.notify_all();
    return f;
  }

  Status ApplyOne(const WriteBatch& b) {
    for (const JobRow& j : b.jobs()) {
      put_job_->Bind(1, j.id);
      put_job_->Bind(2, j.user);
      put_job_->Bind(3, j.state);
      put_job_->Bind(4, j.node);
      put_job_->Bind(5, j.doc);
      STOKER_RETURN_IF_ERROR(put_job_->Run("put job"));
      clear_job_status_->Bind(1, j.id);
      STOKER_RETURN_IF_ERROR(clear_job_status_->Run("put job"));
    }
    for (const JobStatusRow& u : b.job_updates()) {
      job_stored_->Bind(1, u.id);
      const int stored = sqlite3_step(job_stored_->get());
      job_stored_->Reset();
      if (stored == SQLITE_DONE) {
        return NotFound("sqlite: update of job " + std::to_string(u.id) + ", which is not stored");
      }
      if (stored != SQLITE_ROW) return SqlError(writer_, "update job");
      update_job_->Bind(1, u.id);
      update_job_->Bind(2, u.state);
      update_job_->Bind(3, u.node);
      update_job_->Bind(4, u.status);
      STOKER_RETURN_IF_ERROR(update_job_->Run("update job"));
    }
    for (const NodeRow& n : b.nodes()) {
      put_node_->Bind(1, n.name);
      put_node_->Bind(2, n.doc);
      STOKER_RETURN_IF_ERROR(put_node_->Run("put node"));
    }
    for (const std::string& hash : b.revoked_tokens()) {
      del_token_->Bind(1, hash);
      STOKER_RETURN_IF_ERROR(del_token_->Run("revoke token"));
    }
    for (const TokenRow& t : b.tokens()) {
      put_token_->Bind(1, t.hash_hex);
      put_token_->Bind(2, t.name);
      put_token_->Bind(3, t.role);
      put_token_->Bind(4, t.created_unix_ms);
      put_token_->Bind(5, t.expires_unix_ms);
      STOKER_RETURN_IF_ERROR(put_token_->Run("put token"));
    }
    for (const AuditRow& a : b.audit()) {
      add_audit_->Bind(1, a.ts_unix_ms);
      add_audit_->Bind(2, a.actor);
      add_audit_->Bind(3, a.action);
      add_audit_->Bind(4, a.subject);
      add_audit_->Bind(5, a.detail);
      STOKER_RETURN_IF_ERROR(add_audit_->Run("add audit row"));
    }
    for (const EventRow& e : b.events()) {
      add_event_->Bind(1, e.job_id);
      add_event_->Bind(2, e.ts_unix_ms);
      add_event_->Bind(3, e.kind);
      add_event_->Bind(4, e.message);
      STOKER_RETURN_IF_ERROR(add_event_->Run("add event"));
    }
    for (const SettingRow& st : b.settings()) {
      put_setting_->Bind(1, st.key);
      put_setting_->Bind(2, st.value);
      STOKER_RETURN_IF_ERROR(put_setting_->Run("put setting"));
    }
    for (const LedgerRow& l : b.ledger()) {
      add_ledger_->Bind(1, l.seq);
      add_ledger_->Bind(2, l.ts_unix_ms);
      add_ledger_->Bind(3, l.team);
      add_ledger_->Bind(4, l.doc);
      STOKER_RETURN_IF_ERROR(add_ledger_->Run("add ledger entry"));
    }
    return Status::Ok();
  }

  // Called by SQLite on the writer thread after each COMMIT: the log's length in frames.
  static int OnWalCommit(void* self, sqlite3*, const char*, int frames) {
    static_cast<SqliteStore*>(self)->wal_frames_ = frames;
    return SQLITE_OK;
  }

  // Group commit: take every batch waiting now, run each inside its own SAVEPOINT (a failing
  // batch rolls back alone), COMMIT once, then acknowledge them all. Then, once the log holds
  // kCheckpointFrames or more (kBusyCheckpointFrames while more batches wait), copy it into the
  // database (a passive checkpoint, SQLite's own default threshold and kind): the commit is
  // durable in the log already, so its callers do not wait for the copy; the next group does.
  void WriterLoop() {
    std::unique_lock lock(mu_);
    while (true) {
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty() && stopping_) return;
      std::vector<std::unique_ptr<Pending>> group;
      while (!queue_.empty() && static_cast<int>(group.size()) < options_.max_group) {
        group.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      std::vector<Status> results(group.size());
      lock.unlock();
      for (auto& p : group) {
        if (p->fill) p->fill(&p->batch);
      }
      Status begin = Exec(writer_, "BEGIN IMMEDIATE");
      if (begin.ok()) {
        for (size_t i = 0; i < group.size(); ++i) {
          Status s = Exec(writer_, "SAVEPOINT b");
          if (s.ok()) {
            s = ApplyOne(group[i]->batch);
            if (s.ok()) {
              s = Exec(writer_, "RELEASE b");
            } else {
              (void)Exec(writer_, "ROLLBACK TO b");
              (void)Exec(writer_, "RELEASE b");
            }
          }
          results[i] = s;
        }
        Status commit = Exec(writer_, "COMMIT");
        if (!commit.ok()) {
          (void)Exec(writer_, "ROLLBACK");
          for (auto& r : results) r = commit;
        }
      } else {
        for (auto& r : results) r = begin;
      }
      for (size_t i = 0; i < group.size(); ++i) group[i]->promise.set_value(results[i]);
      group.clear();
      lock.lock();
      // While batches wait, the copy waits for them (up to kBusyCheckpointFrames): a burst of
      // commits (a large pass in parts) copies the pages it rewrites once, not once a commit.
      if (wal_frames_ >= (queue_.empty() ? kCheckpointFrames : kBusyCheckpointFrames)) {
        lock.unlock();
        // A checkpoint that cannot finish now (a reader holds old pages) leaves the rest for
        // the next one; nothing committed depends on it.
        (void)sqlite3_wal_checkpoint_v2(writer_, nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr,
                                        nullptr);
        wal_frames_ = 0;
        lock.lock();
      }
    }
  }

  sqlite3* writer_;
  sqlite3* reader_;
  SqliteOptions options_;
  std::string path_;
  std::vector<std::string> warnings_;
  std::unique_ptr<Stmt> put_job_, clear_job_status_, job_stored_, update_job_, put_node_,
      put_token_, del_token_, add_audit_, add_event_, add_ledger_, put_setting_;
  std::mutex mark_mu_;
  // SQLite's default threshold (SQLITE_DEFAULT_WAL_AUTOCHECKPOINT).
  static constexpr int kCheckpointFrames = 1000;
  static constexpr int kBusyCheckpointFrames = 16 * kCheckpointFrames;
  int wal_frames_ = 0;  // writer thread only

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Pending>> queue_;
  bool stopping_ = false;
  std::thread writer_thread_;

  std::mutex read_mu_;
};

Result<sqlite3*> OpenConnection(const std::string& path, bool create) {
  sqlite3* db = nullptr;
  const int flags = SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0) | SQLITE_OPEN_NOMUTEX;
  if (sqlite3_open_v2(path.c_str(), &db, flags, nullptr) != SQLITE_OK) {
    Status s = SqlError(db, "open " + path);
    sqlite3_close_v2(db);
    return s;
  }
  sqlite3_busy_timeout(db, 5000);
  return db;
}

Status Migrate(sqlite3* db) {
  Stmt v(db, "PRAGMA user_version");
  if (!v.ok() || sqlite3_step(v.get()) != SQLITE_ROW) return SqlError(db, "read user_version");
  const int current = static_cast<int>(v.Int(0));
  v.Reset();
  if (current > kSchemaVersion) {
    return FailedPrecondition("database schema version " + std::to_string(current) +
                              " is newer than this binary supports (" +
                              std::to_string(kSchemaVersion) + ")");
  }
  for (int i = current; i < kSchemaVersion; ++i) {
    STOKER_RETURN_IF_ERROR(Exec(db, "BEGIN IMMEDIATE"));
    Status s = Exec(db, kMigrations[i]);
    if (s.ok()) s = Exec(db, "PRAGMA user_version=" + std::to_string(i + 1));
    if (!s.ok()) {
      (void)Exec(db, "ROLLBACK");
      return s.WithContext("migration " + std::to_string(i + 1));
    }
    STOKER_RETURN_IF_ERROR(Exec(db, "COMMIT"));
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path,
                                               const SqliteOptions& options) {
  // Before SQLite's recovery rewrites the log.
  std::vector<std::string> warnings = InspectWal(path);
  STOKER_ASSIGN_OR_RETURN(sqlite3 * writer, OpenConnection(path, true));
  auto fail = [&](Status s) -> Result<std::unique_ptr<Store>> {
    sqlite3_close_v2(writer);
    return s;
  };
  Status s = Exec(writer, "PRAGMA journal_mode=WAL");
  if (s.ok()) {
    s = Exec(writer,
             options.synchronous_full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL");
  }
  if (s.ok()) s = Migrate(writer);
  if (!s.ok()) return fail(s);
  auto reader = OpenConnection(path, false);
  if (!reader.ok()) return fail(reader.status());
  auto store = std::make_unique<SqliteStore>(writer, *reader, options, path, std::move(warnings));
  if (!store->Prepared()) return Internal("sqlite: cannot prepare statements");
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace stoker::store
