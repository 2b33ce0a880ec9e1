#include "server/server.h"

#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <mutex>
#include <stdexcept>
#include <system_error>
#include <utility>

#include "core/huge_pages.h"
#include "protocol/job_status_text.h"
#include "protocol/limits.h"
#include "scheduler/queue/job_queue.h"
#include "scheduler/registry.h"

namespace stoker::server {
namespace fs = std::filesystem;

namespace {

Status Denied(const std::string& what) { return PermissionDenied(what); }

// The rules are allow-lists of roles, so a role added later reaches nothing until it is named.
bool IsPerson(const Principal& who) { return who.role == Role::kAdmin || who.role == Role::kUser; }
bool IsNodeAgentOrAdmin(const Principal& who) {
  return who.role == Role::kAdmin || who.role == Role::kAgent;
}

}  // namespace

Server::Server(store::Store* store, Clock* clock, ServerOptions options)
    : store_(store), clock_(clock), options_(std::move(options)) {}

Server::~Server() {
  Stop();
  // A clean stop records exactly where ids continue; a crash continues after the reserved block.
  std::lock_guard lock(id_mu_);
  if (id_reserved_ > 0) {
    if (Status s = store_->SaveJobIdMark(next_id_); !s.ok()) {
      spdlog::warn("store: cannot record the job-id mark: {}", s.ToString());
    }
  }
}

Result<int64_t> Server::NextJobId() {
  std::lock_guard lock(id_mu_);
  if (next_id_ >= id_reserved_) {
    STOKER_RETURN_IF_ERROR(store_->SaveJobIdMark(next_id_ + kJobIdBlock));
    id_reserved_ = next_id_ + kJobIdBlock;
  }
  return next_id_++;
}

Result<std::unique_ptr<scheduler::PlacementPolicy>> Server::MakePlacement(
    std::string_view name) const {
  if (options_.make_placement) return options_.make_placement(name);
  return scheduler::CreatePlacementPolicy(name, scheduler::PolicyConfig{});
}

Result<std::unique_ptr<Server>> Server::Create(store::Store* store, Clock* clock,
                                               ServerOptions options) {
  std::unique_ptr<Server> s(new Server(store, clock, std::move(options)));
  if (s->options_.placement_policy.empty()) {
    s->options_.placement_policy = std::string(scheduler::kDefaultPolicyName);
    if (!s->MakePlacement(s->options_.placement_policy).ok()) {
      s->options_.placement_policy = "bestfit";
    }
  }
  STOKER_ASSIGN_OR_RETURN(auto placement, s->MakePlacement(s->options_.placement_policy));
  s->pass_ = std::make_unique<pass::SchedulingPass>(std::move(placement));
  s->part_buffers_ = std::make_shared<PartBuffers>();
  s->pass_->KeepCluster(s->options_.incremental_pass);
  STOKER_ASSIGN_OR_RETURN(s->queue_policy_, queue::CreateQueuePolicy(s->options_.queue_policy));
  if (const int32_t r = s->options_.gpu_oversubscription_milli;
      r < scheduler::kMilliPerGpu || r > 1500) {
    return InvalidArgument(
        "gpu oversubscription: must be 1000..1500 milli-GPU per GPU (1.0 to "
        "1.5 : 1), got " +
        std::to_string(r));
  }
  if (s->options_.preemption_grace < Duration::zero()) {
    return InvalidArgument("preemption grace: must not be negative");
  }
  if (s->options_.activity_window < std::chrono::seconds(1)) {
    return InvalidArgument("activity window: must be at least 1 s");
  }
  if (!(s->options_.heartbeat_rate > 0) || !std::isfinite(s->options_.heartbeat_rate)) {
    return InvalidArgument("heartbeat rate: must be a positive number of reports a second");
  }
  if (s->options_.report_interval_min > s->options_.report_interval_max) {
    return InvalidArgument("report interval: the minimum must not exceed the maximum");
  }
  if (s->options_.gang_port_base < 1 || s->options_.gang_ports < 1 ||
      int64_t{s->options_.gang_port_base} + s->options_.gang_ports > 65536) {
    return InvalidArgument("gang ports: the range must lie within 1..65535");
  }
  if (!s->options_.data_dir.empty()) {
    std::error_code ec;
    fs::create_directories(s->options_.data_dir + "/logs", ec);
    if (ec) return Internal("create " + s->options_.data_dir + "/logs: " + ec.message());
  }
  STOKER_RETURN_IF_ERROR(s->Load());
  return s;
}

Status Server::Load() {
  STOKER_ASSIGN_OR_RETURN(auto tokens, store_->LoadTokens());
  tokens_.Load(tokens);
  STOKER_ASSIGN_OR_RETURN(auto jobs, store_->LoadJobs());
  STOKER_ASSIGN_OR_RETURN(auto nodes, store_->LoadNodes());
  STOKER_ASSIGN_OR_RETURN(int64_t max_id, store_->MaxJobId());
  STOKER_ASSIGN_OR_RETURN(int64_t mark, store_->LoadJobIdMark());
  for (const std::string& w : store_->open_warnings()) spdlog::warn("store: {}", w);
  {
    std::lock_guard lock(id_mu_);
    // Ids below the mark may have been handed out (and acknowledged) even if the database no
    // longer holds them: never again.
    next_id_ = std::max(max_id + 1, mark);
    id_reserved_ = next_id_;
    if (mark > max_id + 1) {
      spdlog::info("store: job ids continue at {} (the newest stored job is {})", next_id_, max_id);
    }
  }
  // A policy set through the API outlives restarts and wins over the startup options.
  STOKER_ASSIGN_OR_RETURN(auto settings, store_->LoadSettings());
  for (const auto& st : settings) {
    if (st.key != "policy") continue;
    json p = json::parse(st.value, nullptr, false);
    if (!p.is_object()) return InvalidArgument("stored policy: malformed document");
    const std::string placement = p.value("placement", options_.placement_policy);
    const std::string queue_name = p.value("queue", options_.queue_policy);
    auto pl = MakePlacement(placement);
    auto q = queue::CreateQueuePolicy(queue_name);
    if (!pl.ok() || !q.ok()) {
      // A policy this build no longer knows: keep the startup options, say so.
      spdlog::warn("stored policy {} not usable ({}); using {}/{}", st.value,
                   (!pl.ok() ? pl.status() : q.status()).ToString(), options_.placement_policy,
                   options_.queue_policy);
      continue;
    }
    std::lock_guard pass_lock(pass_mu_);
    std::lock_guard lock(mu_);
    pass_->SetPlacementPolicy(std::move(*pl));
    queue_policy_ = std::move(*q);
    options_.placement_policy = placement;
    options_.queue_policy = queue_name;
    options_.backfill = p.value("backfill", options_.backfill);
  }
  std::lock_guard lock(mu_);
  for (const auto& row : jobs) {
    json doc = json::parse(row.doc, nullptr, false);
    json status = row.status.empty() ? json() : json::parse(row.status, nullptr, false);
    auto job = JobFromJson(doc, status);
    if (!job.ok()) return job.status().WithContext("stored job " + std::to_string(row.id));
    if (job->state == JobState::kQueued) queued_.insert(job->id);
    Reindex(*job);
    jobs_[job->id] = std::move(*job);
  }
  const MonoTime now = clock_->Now();
  for (const auto& row : nodes) {
    json doc = json::parse(row.doc, nullptr, false);
    if (!doc.is_object() || !doc.contains("inventory")) {
      return InvalidArgument("stored node " + row.name + ": malformed document");
    }
    auto inv = ParseNodeInventory(doc["inventory"]);
    if (!inv.ok()) return inv.status().WithContext("stored node " + row.name);
    NodeEntry n;
    n.inv = std::move(*inv);
    n.drained = doc.value("drained", false);
    n.lost = doc.value("lost", false);
    n.registered_ms = doc.value("registered_ms", int64_t{0});
    // A restarted server gives every node a full timeout to check in again.
    n.last_heartbeat = now;
    nodes_[row.name] = std::move(n);
    ++nodes_version_;
  }
  return Status::Ok();
}

int64_t Server::NowMs() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(clock_->WallNow().time_since_epoch())
      .count();
}

store::JobRow Server::Row(const Job& j) const {
  const auto where = protocol::Assignments(j);
  return store::JobRow{j.id,
                       j.user,
                       JobStateName(j.state),
                       where.empty() ? std::string() : where.front()->node,
                       JobToJson(j).dump(),
                       {}};
}

store::JobStatusRow Server::StatusRow(const Job& j) const {
  const auto where = protocol::Assignments(j);
  return store::JobStatusRow{j.id, JobStateName(j.state),
                             where.empty() ? std::string() : where.front()->node,
                             protocol::JobStatusText(j)};
}

store::NodeRow Server::Row(const NodeEntry& n) const {
  json doc{{"inventory", NodeInventoryToJson(n.inv)},
           {"drained", n.drained},
           {"lost", n.lost},
           {"registered_ms", n.registered_ms}};
  return store::NodeRow{n.inv.name, doc.dump()};
}

void Server::Event(store::WriteBatch* b, const Job& j, const std::string& kind,
                   const std::string& msg) {
  b->AddEvent(store::EventRow{j.id, NowMs(), kind, msg});
}

void Server::Notify(std::span<const Job> changed) {
  if (changed.empty()) return;
  for (ServerObserver* o : *Observers()) o->OnJobsChanged(changed);
}

void Server::NotifyInTurn(OrderedDelivery::Ticket& turn, std::vector<Job> changed) {
  turn.Deliver([this, changed = std::move(changed)] { Notify(changed); });
}

void Server::AddObserver(ServerObserver* o) {
  std::lock_guard lock(observers_mu_);
  auto next = std::make_shared<std::vector<ServerObserver*>>(*observers_);
  next->push_back(o);
  observers_ = std::move(next);
}

std::shared_ptr<const std::vector<ServerObserver*>> Server::Observers() const {
  std::lock_guard lock(observers_mu_);
  return observers_;
}

Result<Principal> Server::AuthenticateCertificate(const std::string& common_name) const {
  auto it = options_.client_certificates.find(common_name);
  if (common_name.empty() || it == options_.client_certificates.end()) {
    return Unauthenticated("client certificate CN '" + common_name.substr(0, 64) +
                           "' is not mapped to a role (stoker server --tls-client-role)");
  }
  return it->second;
}

bool Server::CanSee(const Principal& who, const Job& j) const {
  return who.role == Role::kAdmin || (who.role == Role::kUser && j.user == who.name);
}

// ---- jobs -----------------------------------------------------------------------------------

Result<Job> Server::Submit(const Principal& who, JobSpec spec) {
  if (!IsPerson(who)) return Denied("only users and admins submit jobs");
  STOKER_RETURN_IF_ERROR(CheckSubmission(spec));
  std::string user = who.name;
  if (!spec.user.empty() && spec.user != who.name) {
    if (who.role != Role::kAdmin) return Denied("user: only admins may submit for another user");
    user = spec.user;
  }
  Job job;
  STOKER_ASSIGN_OR_RETURN(job.id, NextJobId());
  job.user = user;
  job.spec = std::move(spec);
  job.state = JobState::kQueued;
  job.submit_ms = NowMs();
  store::WriteBatch b;
  b.PutJob(Row(job));
  Event(&b, job, "submitted", "by " + who.name);
  // Durable before it is visible or acknowledged; no lock held, so concurrent submissions
  // share one group commit.
  STOKER_RETURN_IF_ERROR(store_->Apply(std::move(b)));
  OrderedDelivery::Ticket told;
  {
    std::lock_guard lock(mu_);
    jobs_[job.id] = job;
    queued_.insert(job.id);
    told = told_.Take();
  }
  NotifyInTurn(told, {job});
  Kick();
  return job;
}

Result<std::vector<Job>> Server::ListAllJobs(const Principal& who, JobFilter filter) const {
  if (filter.limit == 0) return InvalidArgument("limit: must be at least 1");
  filter.before_id = 0;
  std::vector<std::vector<Job>> pages;  // newest first
  size_t total = 0;
  while (true) {
    STOKER_ASSIGN_OR_RETURN(std::vector<Job> page, ListJobs(who, filter));
    const bool last = page.size() < filter.limit;
    if (!page.empty()) filter.before_id = page.front().id;
    total += page.size();
    pages.push_back(std::move(page));
    if (last) break;
  }
  std::vector<Job> out;
  out.reserve(total);
  for (auto it = pages.rbegin(); it != pages.rend(); ++it) {
    std::move(it->begin(), it->end(), std::back_inserter(out));
  }
  return out;
}

Result<std::vector<Job>> Server::ListJobs(const Principal& who, const JobFilter& f) const {
  if (!IsPerson(who)) return Denied("only users and admins list jobs");
  std::vector<Job> out;
  std::lock_guard lock(mu_);
  // The newest `limit` matches, walking back from the newest, so a short listing does not copy
  // (or hold the lock over) the whole history.
  auto start =
      f.before_id > 0 ? std::make_reverse_iterator(jobs_.lower_bound(f.before_id)) : jobs_.rbegin();
  for (auto it = start; it != jobs_.rend() && out.size() < f.limit; ++it) {
    const Job& j = it->second;
    if (!CanSee(who, j)) continue;
    if (!f.states.empty() && !f.states.count(j.state)) continue;
    if (!f.user.empty() && j.user != f.user) continue;
    if (!f.node.empty()) {
      const auto where = protocol::Assignments(j);
      if (std::none_of(where.begin(), where.end(),
                       [&](const Assignment* a) { return a->node == f.node; })) {
        continue;
      }
    }
    out.push_back(j);
  }
  std::reverse(out.begin(), out.end());  // newest last
  return out;
}

Result<Job> Server::GetJob(const Principal& who, int64_t id) const {
  if (!IsPerson(who)) return Denied("only users and admins read jobs");
  std::lock_guard lock(mu_);
  auto it = jobs_.find(id);
  // Other users' jobs are reported as absent: their existence is not the caller's business.
  if (it == jobs_.end() || !CanSee(who, it->second)) return NotFound("job " + std::to_string(id));
  Job j = it->second;
  if (j.state == JobState::kQueued) {
    auto r = queue_reasons_.find(id);
    if (r != queue_reasons_.end()) j.reason = r->second;
  }
  return j;
}

void Server::EndJob(Job& j, JobState state, const std::string& reason) {
  totals_.ended[JobStateName(state)]++;
  j.state = state;
  j.reason = reason;
  j.end_ms = NowMs();
  queued_.erase(j.id);
  queue_reasons_.erase(j.id);
  Reindex(j);
}

void Server::Requeue(Job& j, const std::string& why, bool may_have_started) {
  const int32_t ranks = std::max<int32_t>(1, static_cast<int32_t>(j.parts.size()));
  j.state = JobState::kQueued;
  j.reason = "requeued: " + why;
  j.preempted_by = 0;
  j.stop_to_requeue.clear();
  j.stop_to_fail.clear();
  j.assignment.reset();
  j.parts.clear();
  j.start_ms = 0;
  j.exit_code.reset();
  j.signal.reset();
  j.requeues++;
  queued_.insert(j.id);
  Reindex(j);
  // The next run writes its logs from offset 0: keep this run's as <id>.<stream>.<run>.
  if (may_have_started && !options_.data_dir.empty()) {
    std::lock_guard lock(log_mu_);
    for (int32_t rank = 0; rank < ranks; ++rank) {
      for (const char* stream : {"stdout", "stderr"}) {
        std::error_code ec;
        fs::rename(LogPath(j.id, stream, rank),
                   LogPath(j.id, stream, rank) + "." + std::to_string(j.requeues), ec);
      }
    }
  }
}

std::string Server::RequeueStopped(Job& j) {
  std::string why = j.preempted_by != 0 ? "preempted for job " + std::to_string(j.preempted_by)
                                        : j.stop_to_requeue;
  Requeue(j, why, true);
  return why;
}

void Server::RequeueUnstarted(Job& j, const std::string& why, store::WriteBatch* b) {
  // Should the node have started it meanwhile, its next report (of this attempt) is answered
  // with a cancel.
  Requeue(j, why, false);
  Event(b, j, "requeued", why);
}

void Server::Reindex(const Job& j) {
  if (auto it = job_nodes_.find(j.id); it != job_nodes_.end()) {
    for (const std::string& node : it->second) {
      auto n = node_jobs_.find(node);
      if (n != node_jobs_.end()) {
        n->second.erase(j.id);
        if (n->second.empty()) node_jobs_.erase(n);
      }
    }
    job_nodes_.erase(it);
  }
  if (!IsActive(j.state)) return;
  const auto where = protocol::Assignments(j);
  if (where.empty()) return;
  std::vector<std::string>& nodes = job_nodes_[j.id];
  for (const Assignment* a : where) {
    nodes.push_back(a->node);
    node_jobs_[a->node].insert(j.id);
  }
}

Result<Job> Server::Cancel(const Principal& who, int64_t id) {
  if (!IsPerson(who)) return Denied("only users and admins cancel jobs");
  return ChangeUnendedJob(&who, id, [&](Job& j, store::WriteBatch& b) {
    if (j.state == JobState::kRunning) {
      // The node stops it (TERM, grace, KILL); the job ends when the node reports the exit.
      j.state = JobState::kCancelling;
      j.reason = "cancel requested by " + who.name;
      Event(&b, j, "cancel", j.reason);
    } else if (j.state == JobState::kCancelling && StoppingToRequeue(j)) {
      // Being stopped to be requeued: the exit now ends the job instead.
      j.preempted_by = 0;
      j.stop_to_requeue.clear();
      j.reason = "cancel requested by " + who.name;
      Event(&b, j, "cancel", j.reason);
    } else if (j.state != JobState::kCancelling) {
      // Queued, or assigned but not yet reported running: it ends now. Should the node have
      // started it meanwhile, its next report is answered with a cancel.
      EndJob(j, JobState::kCancelled, "cancelled by " + who.name);
      Event(&b, j, "cancelled", j.reason);
    }
    return Status::Ok();
  });
}

Status Server::CancelJob(int64_t id, const std::string& reason) {
  auto r = Cancel(Principal{"system: " + reason, Role::kAdmin}, id);
  return r.ok() ? Status::Ok() : r.status();
}

ServerMetrics Server::Metrics() const {
  std::lock_guard lock(mu_);
  ServerMetrics m;
  // Jobs waiting or holding resources, from the indexes (not the whole history).
  m.jobs = {{"queued", static_cast<int64_t>(queued_.size())},
            {"assigned", 0},
            {"running", 0},
            {"cancelling", 0}};
  // Milli-GPU committed per GPU (node, position) by active jobs; MIG instances not counted.
  std::map<std::pair<std::string, uint8_t>, int64_t> committed;
  for (const auto& [id, nodes] : job_nodes_) {
    const Job& j = jobs_.at(id);
    m.jobs[JobStateName(j.state)]++;
    for (const Assignment* a : protocol::Assignments(j)) {
      for (const auto& [pos, milli] : a->shares) committed[{a->node, pos}] += milli;
    }
  }
  for (const char* state : {"succeeded", "failed", "cancelled"}) {
    auto it = totals_.ended.find(state);
    m.ended[state] = it == totals_.ended.end() ? 0 : it->second;
  }
  m.gpus = {{"free", 0}, {"partial", 0}, {"full", 0}, {"oversubscribed", 0}};
  for (const auto& [name, n] : nodes_) {
    (n.lost ? m.nodes_lost : n.drained ? m.nodes_drained : m.nodes_ready)++;
    if (n.lost) continue;
    for (size_t pos = 0; pos < n.inv.gpus.size(); ++pos) {
      if (n.inv.gpus[pos].mig_enabled) continue;
      auto it = committed.find({name, static_cast<uint8_t>(pos)});
      const int64_t c = it == committed.end() ? 0 : it->second;
      m.gpus[c == 0                         ? "free"
             : c < scheduler::kMilliPerGpu  ? "partial"
             : c == scheduler::kMilliPerGpu ? "full"
                                            : "oversubscribed"]++;
    }
  }
  m.gpu_oversubscription_milli = options_.gpu_oversubscription_milli;
  m.passes = totals_.passes;
  m.placed = totals_.placed;
  m.oversubscribed = totals_.oversubscribed;
  m.preempted = totals_.preempted;
  m.fragmentation = last_fragmentation_;
  for (const char* why : {"unknown_gpu", "index_mismatch", "clock"}) {
    auto it = totals_.samples_refused.find(why);
    m.samples_refused[why] = it == totals_.samples_refused.end() ? 0 : it->second;
  }
  m.log_chunks_refused = totals_.log_chunks_refused.load();
  m.last_pass_seconds = totals_.last_pass_seconds;
  m.last_pass_phases = totals_.last_pass_phases;
  return m;
}

Result<Job> Server::ChangeUnendedJob(
    const Principal* who, int64_t id,
    const std::function<Status(Job&, store::WriteBatch&)>& change) {
  std::shared_future<Status> done;
  Job copy;
  OrderedDelivery::Ticket told;
  {
    std::lock_guard lock(mu_);
    auto it = jobs_.find(id);
    // Other users' jobs are not found, finished or not.
    if (it == jobs_.end() || (who && !CanSee(*who, it->second))) {
      return NotFound("job " + std::to_string(id));
    }
    Job& j = it->second;
    if (IsTerminal(j.state)) {
      return FailedPrecondition("job " + std::to_string(id) + " already " + JobStateName(j.state));
    }
    store::WriteBatch b;
    STOKER_RETURN_IF_ERROR(change(j, b));
    if (b.empty()) return j;  // nothing changed
    b.UpdateJob(StatusRow(j));
    copy = j;
    told = told_.Take();
    done = store_->ApplyAsync(std::move(b));
  }
  STOKER_RETURN_IF_ERROR(Wait(done));
  NotifyInTurn(told, {copy});
  Kick();
  return copy;
}

Status Server::ConsolidateAtNextStart(int64_t id, int32_t gpu_milli, const std::string& reason) {
  if (gpu_milli <= 0 || gpu_milli >= scheduler::kMilliPerGpu) {
    return InvalidArgument("gpu_milli: must be 1..999, got " + std::to_string(gpu_milli));
  }
  return ChangeUnendedJob(
             nullptr, id,
             [&](Job& j, store::WriteBatch& b) {
               if (j.spec.gpus != 1 || j.spec.min_gpus > 1 || protocol::IsGang(j.spec)) {
                 return FailedPrecondition("job " + std::to_string(id) +
                                           ": only one-GPU jobs are consolidated onto shares");
               }
               if (j.consolidate_milli == gpu_milli) return Status::Ok();
               j.consolidate_milli = gpu_milli;
               Event(&b, j, "consolidate",
                     "from its next start: " + std::to_string(gpu_milli) +
                         " milli-GPU of a shared GPU (" + reason + ")");
               return Status::Ok();
             })
      .status();
}

Status Server::RequeueJob(int64_t id, const std::string& reason) {
  return ChangeUnendedJob(nullptr, id,
                          [&](Job& j, store::WriteBatch& b) {
                            if (j.state == JobState::kQueued || j.state == JobState::kCancelling)
                              return Status::Ok();
                            if (j.state == JobState::kRunning) {
                              // The node stops it (TERM, grace, KILL); its exit requeues it.
                              j.state = JobState::kCancelling;
                              j.stop_to_requeue = reason;
                              j.reason = reason + " (stopping to requeue)";
                              Event(&b, j, "requeue", j.reason);
                            } else {
                              RequeueUnstarted(j, reason, &b);
                            }
                            return Status::Ok();
                          })
      .status();
}

std::string Server::LogPath(int64_t id, const std::string& stream, int32_t rank) const {
  return options_.data_dir + "/logs/" + std::to_string(id) + "." + stream +
         (rank > 0 ? ".part" + std::to_string(rank) : std::string());
}

int64_t Server::LogSize(int64_t id, const std::string& stream, int32_t rank) const {
  struct stat st;
  if (options_.data_dir.empty() || ::stat(LogPath(id, stream, rank).c_str(), &st) != 0) return 0;
  return st.st_size;
}

void Server::AppendLog(int64_t id, int32_t rank, const std::string& stream, int64_t offset,
                       const std::string& data) {
  if (data.empty() || options_.data_dir.empty()) return;
  std::lock_guard lock(log_mu_);
  const int64_t size = LogSize(id, stream, rank);
  // Idempotent: a resent chunk overlaps what is held; only the new tail is appended. A gap
  // (offset past the end) means the node's offsets are ahead; it resyncs from log_offsets.
  if (offset > size || offset + static_cast<int64_t>(data.size()) <= size) return;
  std::ofstream out(LogPath(id, stream, rank), std::ios::app | std::ios::binary);
  out.write(data.data() + (size - offset),
            static_cast<std::streamsize>(data.size() - (size - offset)));
}

Result<LogChunk> Server::ReadLog(const Principal& who, int64_t id, const std::string& stream,
                                 int64_t offset, int32_t part) const {
  if (stream != "stdout" && stream != "stderr") {
    return InvalidArgument("stream: must be stdout or stderr");
  }
  if (offset < 0) return InvalidArgument("offset: must be >= 0");
  if (part < 0) return InvalidArgument("part: must be >= 0");
  bool finished = false;
  {
    auto j = GetJob(who, id);
    if (!j.ok()) return j.status();
    finished = IsTerminal(j->state);
    const int32_t ranks = protocol::IsGang(j->spec) ? std::max<int32_t>(1, j->spec.nodes) : 1;
    if (part > 0 && part >= std::max<int32_t>(ranks, static_cast<int32_t>(j->parts.size()))) {
      return InvalidArgument("part: job " + std::to_string(id) + " has no part " +
                             std::to_string(part) +
                             (protocol::IsGang(j->spec) ? "" : " (it is not a gang)"));
    }
  }
  LogChunk c;
  std::ifstream in(LogPath(id, stream, part), std::ios::binary);
  if (in) {
    in.seekg(offset);
    c.data.resize(options_.max_log_read);
    in.read(c.data.data(), static_cast<std::streamsize>(c.data.size()));
    c.data.resize(static_cast<size_t>(std::max<std::streamsize>(0, in.gcount())));
  }
  c.next_offset = offset + static_cast<int64_t>(c.data.size());
  c.finished = finished && c.next_offset >= LogSize(id, stream, part);
  return c;
}

Result<std::vector<store::EventRow>> Server::Events(const Principal& who, int64_t id) const {
  auto j = GetJob(who, id);
  if (!j.ok()) return j.status();
  return store_->ListEvents(id);
}

// ---- nodes ----------------------------------------------------------------------------------

Result<NodeStatus> Server::RegisterNode(const Principal& who, const NodeInventory& inv) {
  if (!IsNodeAgentOrAdmin(who)) return Denied("only agents and admins register nodes");
  if (who.role == Role::kAgent && who.name != inv.name) {
    return Denied("name: this agent token may only report for node '" + who.name + "'");
  }
  std::shared_future<Status> done;
  NodeStatus out;
  {
    std::lock_guard lock(mu_);
    NodeEntry& n = nodes_[inv.name];
    const bool is_new = n.inv.name.empty();
    n.generation++;
    ++nodes_version_;
    store::WriteBatch b;
    if (!is_new) {
      // A node that comes back with other GPUs (replaced, or a different machine under the
      // name) is said and audited, not taken silently.
      std::set<std::string> before, after;
      for (const GpuInfo& g : n.inv.gpus) before.insert(g.uuid);
      for (const GpuInfo& g : inv.gpus) after.insert(g.uuid);
      if (before != after) {
        activity_.ForgetNode(inv.name);
        std::string gone, added;
        for (const auto& u : before) {
          if (!after.count(u)) gone += (gone.empty() ? "" : ",") + u;
        }
        for (const auto& u : after) {
          if (!before.count(u)) added += (added.empty() ? "" : ",") + u;
        }
        spdlog::warn("node {} registered again with other GPUs: gone [{}], new [{}]", inv.name,
                     gone, added);
        Audit(&b, who, "node.inventory", inv.name, "GPUs gone [" + gone + "], new [" + added + "]");
      }
    }
    n.inv = inv;
    n.lost = false;
    n.last_heartbeat = clock_->Now();
    n.last_heartbeat_ms = NowMs();
    if (is_new) n.registered_ms = n.last_heartbeat_ms;
    b.PutNode(Row(n));
    done = store_->ApplyAsync(std::move(b));
    out = StatusOf(n);
  }
  STOKER_RETURN_IF_ERROR(Wait(done));
  Kick();
  return out;
}

bool Server::CurrentRun(const Job& j, const std::string& node, const RunReport& r) {
  // A job that ended keeps its assignment: its last log bytes may still be on their way.
  if (j.state == JobState::kQueued || r.attempt != j.attempt()) return false;
  return j.assignment ? j.assignment->node == node : protocol::PartOn(j, node) != nullptr;
}

Assignment Server::FromPass(pass::Grant pa) {
  Assignment a;
  a.node = std::move(pa.placement.node);
  a.gpu_indices = std::move(pa.gpu_indices);
  a.gpu_milli = pa.gpu_milli;
  a.mig_slices = pa.placement.mig_slices;
  a.mig_uuid = std::move(pa.placement.mig_uuid);
  a.cuda_visible_devices = std::move(pa.cuda_visible_devices);
  a.env = std::move(pa.env);
  for (const auto& [pos, milli] : pa.placement.shares) {
    a.shares.emplace_back(pos, static_cast<int16_t>(milli));
  }
  return a;
}

void Server::TellToCancel(const Job& j, HeartbeatReply& reply) const {
  reply.cancel.push_back(j.id);
  if (j.preempted_by != 0) {
    reply.cancel_grace_ms[j.id] =
        std::chrono::duration_cast<std::chrono::milliseconds>(options_.preemption_grace).count();
  }
}

LaunchOrder Server::StartOrder(const Job& j, const Assignment& a) {
  LaunchOrder o;
  o.id = j.id;
  o.attempt = j.attempt();
  o.user = j.user;
  o.command = j.spec.command;
  o.env = j.spec.env;
  for (const auto& [k, v] : a.env) o.env[k] = v;
  o.workdir = j.spec.workdir;
  o.has_gpu = !a.gpu_indices.empty();
  o.cuda_visible_devices = a.cuda_visible_devices;
  o.gpu_indices = a.gpu_indices;
  o.cpu_milli = j.spec.cpu_milli;
  o.memory_mib = j.spec.memory_mib;
  return o;
}

Result<HeartbeatReply> Server::Heartbeat(const Principal& who, const std::string& node,
                                         server::Heartbeat hb) {
  if (!IsNodeAgentOrAdmin(who)) return Denied("only agents and admins send heartbeats");
  if (who.role == Role::kAgent && who.name != node) {
    return Denied("this agent token may only report for node '" + who.name + "'");
  }
  // What the node may touch: the logs of the current run of jobs placed on it, and samples of
  // the GPUs it registered, taken around now. The rest is refused and counted.
  std::vector<bool> logs_ok(hb.jobs.size(), false);
  std::vector<int32_t> log_rank(hb.jobs.size(), 0);  // the part of a gang this node runs
  // Every second of samples: the compact form's ticks, or the full form's latest samples as
  // one tick taken now (its time set below, as the observers are told).
  if (!hb.compact) hb.ticks.push_back(SampleTick{WallTime{}, std::move(hb.gpus)});
  size_t total = 0;
  for (const SampleTick& t : hb.ticks) total += t.gpus.size();
  std::vector<std::vector<bool>> keep;
  keep.reserve(hb.ticks.size());
  size_t refused = 0;
  size_t nodes = 0;
  {
    std::lock_guard lock(mu_);
    auto nit = nodes_.find(node);
    if (nit == nodes_.end()) return NotFound("node " + node + " is not registered");
    nodes = nodes_.size();
    for (size_t i = 0; i < hb.jobs.size(); ++i) {
      auto it = jobs_.find(hb.jobs[i].id);
      logs_ok[i] = it != jobs_.end() && CurrentRun(it->second, node, hb.jobs[i]);
      if (logs_ok[i] && !it->second.parts.empty()) {
        log_rank[i] =
            static_cast<int32_t>(protocol::PartOn(it->second, node) - it->second.parts.data());
      }
    }
    const NodeInventory& inv = nit->second.inv;
    const WallTime now = clock_->WallNow();
    for (SampleTick& t : hb.ticks) {
      keep.emplace_back(t.gpus.size(), true);
      for (size_t i = 0; i < t.gpus.size(); ++i) {
        GpuSample& g = t.gpus[i];
        const char* why = nullptr;
        if (hb.compact && g.id.uuid.empty()) {
          // The compact form names a GPU by index alone when it is the registered one.
          auto gpu = std::find_if(inv.gpus.begin(), inv.gpus.end(),
                                  [&](const GpuInfo& x) { return x.index == g.id.index; });
          if (gpu == inv.gpus.end()) {
            why = "unknown_gpu";
          } else {
            g.id.uuid = gpu->uuid;
            g.id.name = gpu->model;
          }
        } else {
          auto gpu = std::find_if(inv.gpus.begin(), inv.gpus.end(),
                                  [&](const GpuInfo& x) { return x.uuid == g.id.uuid; });
          if (gpu == inv.gpus.end()) {
            why = "unknown_gpu";
          } else if (gpu->index != g.id.index) {
            why = "index_mismatch";
          }
        }
        if (why == nullptr && g.timestamp != WallTime{} &&  // unstamped: the heartbeat's time
            (g.timestamp < now - options_.sample_time_window ||
             g.timestamp > now + options_.sample_time_window)) {
          why = "clock";
        }
        if (why == nullptr) continue;
        keep.back()[i] = false;
        ++refused;
        totals_.samples_refused[why]++;
      }
    }
  }
  if (refused > 0) {
    static std::atomic<int64_t> warned{0};
    if (warned.fetch_add(1) % 1000 == 0) {
      spdlog::warn(
          "node {}: {} of {} GPU samples refused (not its registered GPUs, or taken "
          "outside {:.0f} s of the server's clock)",
          node, refused, total, ToSeconds(options_.sample_time_window));
    }
    for (size_t t = 0; t < hb.ticks.size(); ++t) {
      std::vector<GpuSample> kept;
      for (size_t i = 0; i < hb.ticks[t].gpus.size(); ++i) {
        if (keep[t][i]) kept.push_back(std::move(hb.ticks[t].gpus[i]));
      }
      hb.ticks[t].gpus = std::move(kept);
    }
    if (!hb.compact) hb.samples_json = SelectSamples(hb.samples_json, keep.front());
  }
  // Log bytes before the state change they may end with (outside the state lock; appends are
  // idempotent).
  for (size_t i = 0; i < hb.jobs.size(); ++i) {
    const RunReport& r = hb.jobs[i];
    if (!logs_ok[i]) {
      if (!r.stdout_data.empty() || !r.stderr_data.empty()) totals_.log_chunks_refused++;
      continue;
    }
    AppendLog(r.id, log_rank[i], "stdout", r.stdout_offset, r.stdout_data);
    AppendLog(r.id, log_rank[i], "stderr", r.stderr_offset, r.stderr_data);
  }
  HeartbeatReply reply;
  std::vector<Job> changed;
  std::shared_future<Status> done;
  bool persist = false;
  OrderedDelivery::Ticket told;  // the observers are told of `changed` in its turn
  std::shared_ptr<const std::string> samples;
  std::shared_ptr<const std::vector<GpuSample>> latest;
  if (!hb.compact) {
    samples = std::make_shared<const std::string>(std::move(hb.samples_json));
  } else if (!hb.ticks.empty()) {
    latest = std::make_shared<const std::vector<GpuSample>>(hb.ticks.back().gpus);
  }
  // The node's previous samples are freed after the lock is released, not under it.
  std::shared_ptr<const std::string> previous;
  std::shared_ptr<const std::vector<GpuSample>> previous_latest;
  {
    std::lock_guard lock(mu_);
    auto nit = nodes_.find(node);
    if (nit == nodes_.end()) return NotFound("node " + node + " is not registered");
    NodeEntry& n = nit->second;
    store::WriteBatch b;
    if (n.lost) {
      n.lost = false;
      ++nodes_version_;
      b.PutNode(Row(n));
      spdlog::info("node {} is back", node);
    }
    n.last_heartbeat = clock_->Now();
    n.last_heartbeat_ms = NowMs();
    if (samples || latest) {  // a compact report without ticks keeps the latest
      previous = std::exchange(n.samples, samples);
      previous_latest = std::exchange(n.latest, latest);
    }
    reply.report_interval_ms = ReportIntervalMs(nodes);

    std::set<int64_t> reported;
    for (const RunReport& r : hb.jobs) {
      auto it = jobs_.find(r.id);
      const bool mine = it != jobs_.end() && CurrentRun(it->second, node, r);
      // Only this run's jobs count as reported: a stale run of a job placed here again must not
      // keep the new run from being started once the node forgot the old one.
      if (mine) reported.insert(r.id);
      if (mine) {
        const GangPart* part = protocol::PartOn(it->second, node);
        const int32_t rank =
            part ? static_cast<int32_t>(part - it->second.parts.data()) : int32_t{0};
        reply.log_offsets[r.id] = {LogSize(r.id, "stdout", rank), LogSize(r.id, "stderr", rank)};
      } else {
        reply.log_offsets[r.id] = {r.stdout_offset, r.stderr_offset};
      }
      if (!mine) {
        // Not (or no longer) this node's job, or an earlier run of it: stop it; once it
        // exited, let the node forget it.
        (r.phase != protocol::RunPhase::kExited ? reply.cancel : reply.forget).push_back(r.id);
        continue;
      }
      Job& j = it->second;
      if (IsTerminal(j.state)) {
        // Ended here (or cancelled before it was seen running): stop it; once it exited and
        // every log byte arrived, let the node forget it.
        if (r.phase != protocol::RunPhase::kExited) {
          reply.cancel.push_back(r.id);
        } else if (r.logs_complete) {
          reply.forget.push_back(r.id);
        }
        continue;
      }
      if (GangPart* part = protocol::PartOn(j, node)) {
        bool part_changed = false;
        OnPartReport(j, *part, r, node, reply, b, &part_changed);
        if (part_changed) {
          b.UpdateJob(StatusRow(j));
          changed.push_back(j);
        }
        continue;
      }
      if (r.phase == protocol::RunPhase::kExited && StoppingToRequeue(j)) {
        // Stopped to make room for a guaranteed job, or requeued by the system: back to the
        // queue.
        const std::string why = RequeueStopped(j);
        Event(&b, j, "requeued",
              why + (r.signal ? ", stopped by signal " + std::to_string(*r.signal)
                              : ", exit code " + std::to_string(r.exit_code.value_or(-1))));
        b.UpdateJob(StatusRow(j));
        changed.push_back(j);
        // Its logs so far stay on the server; a later run appends after them.
        reply.forget.push_back(r.id);
        continue;
      }
      if (r.phase == protocol::RunPhase::kExited) {
        if (j.state == JobState::kCancelling) {
          EndJob(j, JobState::kCancelled, j.reason);
        } else if (!r.error.empty()) {
          EndJob(j, JobState::kFailed, r.error);
        } else if (r.signal) {
          EndJob(j, JobState::kFailed, "killed by signal " + std::to_string(*r.signal));
        } else if (r.exit_code && *r.exit_code == 0) {
          EndJob(j, JobState::kSucceeded, "");
        } else {
          EndJob(j, JobState::kFailed, "exit code " + std::to_string(r.exit_code.value_or(-1)));
        }
        j.exit_code = r.exit_code;
        j.signal = r.signal;
        if (j.start_ms == 0) j.start_ms = j.end_ms;
        Event(&b, j, JobStateName(j.state),
              r.signal ? "signal " + std::to_string(*r.signal)
                       : "exit code " + std::to_string(r.exit_code.value_or(-1)));
        b.UpdateJob(StatusRow(j));
        changed.push_back(j);
        if (r.logs_complete) reply.forget.push_back(r.id);
      } else {
        if (j.state == JobState::kAssigned && r.phase == protocol::RunPhase::kRunning) {
          j.state = JobState::kRunning;
          j.start_ms = NowMs();
          Event(&b, j, "running", "on " + node);
          b.UpdateJob(StatusRow(j));
          changed.push_back(j);
        }
        if (j.state == JobState::kCancelling) TellToCancel(j, reply);
      }
    }
    // Jobs the server placed on this node that the node does not report.
    std::vector<int64_t> active;
    if (auto it = node_jobs_.find(node); it != node_jobs_.end()) {
      active.assign(it->second.begin(), it->second.end());
    }
    for (int64_t id : active) {
      Job& j = jobs_.at(id);
      if (reported.count(id)) continue;
      if (GangPart* part = protocol::PartOn(j, node)) {
        if (part->Ended()) continue;
        if (part->phase == PartPhase::kAssigned &&
            (j.state == JobState::kAssigned || j.state == JobState::kRunning)) {
          reply.start.push_back(StartOrder(j, part->assignment));
          continue;
        }
        OnPartMissing(j, *part, node, b);
        b.UpdateJob(StatusRow(j));
        changed.push_back(j);
        continue;
      }
      if (j.state == JobState::kAssigned) {
        reply.start.push_back(StartOrder(j, *j.assignment));
      } else {
        // Running or cancelling yet unknown to the node (its state directory was lost).
        EndJob(j, j.state == JobState::kCancelling ? JobState::kCancelled : JobState::kFailed,
               "node " + node + " no longer knows this job");
        Event(&b, j, JobStateName(j.state), j.reason);
        b.UpdateJob(StatusRow(j));
        changed.push_back(j);
      }
    }
    if (!changed.empty()) told = told_.Take();
    persist = !b.empty();
    if (persist) done = store_->ApplyAsync(std::move(b));
  }
  if (persist) STOKER_RETURN_IF_ERROR(Wait(done));
  // Every second to the observers, in order, each with its own time: zones and alerts keep 1 s
  // resolution whatever the node's report interval.
  const WallTime now = clock_->WallNow();
  const auto observers = Observers();
  for (SampleTick& t : hb.ticks) {
    if (t.at == WallTime{}) t.at = now;
    activity_.Record(node, t.gpus, t.at);
  }
  for (ServerObserver* o : *observers) o->OnReport(node, hb.ticks);
  if (!changed.empty()) {
    NotifyInTurn(told, std::move(changed));
    Kick();
  }
  return reply;
}

int64_t Server::ReportIntervalMs(size_t nodes) const {
  using std::chrono::duration_cast;
  using std::chrono::milliseconds;
  int64_t lo = std::max<int64_t>(duration_cast<milliseconds>(options_.report_interval_min).count(),
                                 protocol::limits::kReportIntervalMsMin);
  int64_t hi = std::min<int64_t>(duration_cast<milliseconds>(options_.report_interval_max).count(),
                                 protocol::limits::kReportIntervalMsMax);
  hi = std::min<int64_t>(hi, duration_cast<milliseconds>(options_.node_timeout).count() / 3);
  hi = std::max(hi, lo);
  const auto ms = static_cast<int64_t>(
      std::ceil(static_cast<double>(nodes) * 1000.0 / options_.heartbeat_rate));
  return std::clamp(ms, lo, hi);
}

Status Server::SetDrained(const Principal& who, const std::string& node, bool drained) {
  if (who.role != Role::kAdmin) return Denied("only admins drain or undrain nodes");
  std::shared_future<Status> done;
  {
    std::lock_guard lock(mu_);
    auto it = nodes_.find(node);
    if (it == nodes_.end()) return NotFound("node " + node);
    it->second.drained = drained;
    ++nodes_version_;
    store::WriteBatch b;
    b.PutNode(Row(it->second));
    done = store_->ApplyAsync(std::move(b));
  }
  STOKER_RETURN_IF_ERROR(Wait(done));
  Kick();
  return Status::Ok();
}

NodeStatus Server::StatusOf(const NodeEntry& n, bool with_samples) const {
  NodeStatus st;
  st.inventory = n.inv;
  st.state = n.lost ? NodeState::kLost : (n.drained ? NodeState::kDrained : NodeState::kReady);
  st.drained = n.drained;
  st.last_heartbeat_ms = n.last_heartbeat_ms;
  st.registered_ms = n.registered_ms;
  auto active = node_jobs_.find(n.inv.name);
  st.active_jobs = active == node_jobs_.end() ? 0 : static_cast<int64_t>(active->second.size());
  if (with_samples) {
    st.samples_json = n.samples;
    if (!n.samples) st.samples = n.latest ? n.latest : std::make_shared<std::vector<GpuSample>>();
  }
  return st;
}

Result<std::vector<NodeStatus>> Server::ListNodes(const Principal& who) const {
  if (!IsPerson(who)) return Denied("only users and admins list nodes");
  std::lock_guard lock(mu_);
  std::vector<NodeStatus> out;
  out.reserve(nodes_.size());
  for (const auto& [name, n] : nodes_) out.push_back(StatusOf(n, /*with_samples=*/false));
  return out;
}

Result<NodeStatus> Server::GetNode(const Principal& who, const std::string& node) const {
  if (who.role == Role::kAgent) {
    if (who.name != node) return Denied("agents see only their node");
  } else if (!IsPerson(who)) {
    return Denied("only users, admins and a node's own agent read a node");
  }
  std::lock_guard lock(mu_);
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return NotFound("node " + node);
  return StatusOf(it->second);
}

Result<std::vector<Allocation>> Server::Allocations(const Principal& who) const {
  if (!IsPerson(who)) return Denied("only users and admins list allocations");
  std::lock_guard lock(mu_);
  std::vector<Allocation> out;
  for (const auto& [id, j] : jobs_) {
    if (!IsActive(j.state)) continue;
    if (who.role == Role::kUser && j.user != who.name) continue;
    const auto where = protocol::Assignments(j);
    for (size_t rank = 0; rank < where.size(); ++rank) {
      const Assignment& a = *where[rank];
      Allocation row{.job = id,
                     .user = j.user,
                     .state = j.state,
                     .node = a.node,
                     .gpu_indices = a.gpu_indices,
                     .gpu_milli = a.gpu_milli,
                     .mig_uuid = a.mig_uuid,
                     .cpu_milli = j.spec.cpu_milli,
                     .memory_mib = j.spec.memory_mib};
      if (!j.parts.empty()) row.part = static_cast<int32_t>(rank);  // a gang: a row per part
      out.push_back(std::move(row));
    }
  }
  return out;
}

Result<std::vector<QueueEntry>> Server::Queue(const Principal& who) const {
  if (!IsPerson(who)) return Denied("only users and admins read the queue");
  std::lock_guard lock(mu_);
  queue::JobQueue q(*queue_policy_);
  for (int64_t id : queued_) {
    const Job& j = jobs_.at(id);
    q.Push(queue::JobView{.id = static_cast<queue::JobId>(id),
                          .submit_ms = j.submit_ms,
                          .gpus = std::max(protocol::TotalGpus(j.spec), 1),
                          .min_gpus = j.spec.min_gpus,
                          .priority = j.spec.priority});
  }
  std::vector<QueueEntry> out;
  int64_t pos = 0;
  for (const auto& e : q) {
    const Job& j = jobs_.at(static_cast<int64_t>(e.key.id));
    ++pos;
    if (who.role == Role::kUser && j.user != who.name) continue;
    auto r = queue_reasons_.find(j.id);
    out.push_back(QueueEntry{.position = pos,
                             .job = j.id,
                             .user = j.user,
                             .name = j.spec.name,
                             .priority = j.spec.priority,
                             .reason = r == queue_reasons_.end() ? "" : r->second});
  }
  return out;
}

// ---- tokens and policy ----------------------------------------------------------------------

namespace {
TokenInfo InfoOf(const store::TokenRow& r) {
  return TokenInfo{TokenId(r), r.name, ParseRole(r.role).value_or(Role::kUser), r.created_unix_ms,
                   r.expires_unix_ms};
}
}  // namespace

void Server::Audit(store::WriteBatch* b, const Principal& who, const std::string& action,
                   const std::string& subject, const std::string& detail) {
  b->AddAudit(store::AuditRow{0, NowMs(), who.name, action, subject, detail});
  spdlog::info("audit: {} {} {} {}", who.name, action, subject, detail);
}

Result<std::string> Server::CreateToken(const Principal& who, Role role, const std::string& name,
                                        int64_t expires_unix_ms) {
  if (who.role != Role::kAdmin) return Denied("only admins create tokens");
  if (name.empty() || name.size() > 64) return InvalidArgument("name: required, at most 64 bytes");
  for (char c : name) {
    if (!(isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) {
      return InvalidArgument("name: must use only [A-Za-z0-9._-]");
    }
  }
  if (expires_unix_ms != 0 && expires_unix_ms <= NowMs()) {
    return InvalidArgument("expires: must be in the future");
  }
  STOKER_ASSIGN_OR_RETURN(std::string token, GenerateToken());
  store::TokenRow row{Sha256Hex(token), name, RoleName(role), NowMs(), expires_unix_ms};
  store::WriteBatch b;
  b.PutToken(row);
  Audit(&b, who, "token.create", TokenId(row) + " " + name,
        std::string("role ") + RoleName(role) +
            (expires_unix_ms ? ", expires " + std::to_string(expires_unix_ms) : ""));
  STOKER_RETURN_IF_ERROR(store_->Apply(std::move(b)));
  tokens_.Put(row);
  return token;
}

Result<std::vector<TokenInfo>> Server::ListTokens(const Principal& who) const {
  if (who.role != Role::kAdmin) return Denied("only admins list tokens");
  std::vector<TokenInfo> out;
  for (const store::TokenRow& r : tokens_.List()) out.push_back(InfoOf(r));
  return out;
}

Result<TokenInfo> Server::RevokeToken(const Principal& who, const std::string& id) {
  if (who.role != Role::kAdmin) return Denied("only admins revoke tokens");
  auto row = tokens_.Find(id);
  if (!row) return NotFound("token " + id.substr(0, 64));
  store::WriteBatch b;
  b.RevokeToken(row->hash_hex);
  Audit(&b, who, "token.revoke", id + " " + row->name, std::string("role ") + row->role);
  // Durable first: a revocation the store did not take must not look done.
  STOKER_RETURN_IF_ERROR(store_->Apply(std::move(b)));
  tokens_.Revoke(id);
  return InfoOf(*row);
}

Result<std::vector<store::AuditRow>> Server::ListAudit(const Principal& who, size_t limit) const {
  if (who.role != Role::kAdmin) return Denied("only admins read the audit log");
  return store_->ListAudit(limit);
}

Result<std::optional<std::string>> Server::BootstrapAdminToken(const std::string& name) {
  for (const store::TokenRow& r : tokens_.List()) {
    if (r.role == "admin") return std::optional<std::string>();
  }
  STOKER_ASSIGN_OR_RETURN(std::string token,
                          CreateToken(Principal{"bootstrap", Role::kAdmin}, Role::kAdmin, name));
  return std::optional<std::string>(token);
}

Result<std::string> Server::LocalAgentToken(const std::string& node, const std::string& previous) {
  if (!previous.empty()) {
    auto who = tokens_.Authenticate("Bearer " + previous, NowMs());
    if (who.ok() && who->role == Role::kAgent && who->name == node) return previous;
  }
  const Principal up{"stoker up", Role::kAdmin};
  STOKER_ASSIGN_OR_RETURN(std::string token, CreateToken(up, Role::kAgent, node));
  if (!previous.empty()) {
    const std::string old_id = Sha256Hex(previous).substr(0, 12);
    if (tokens_.Find(old_id)) STOKER_RETURN_IF_ERROR(RevokeToken(up, old_id).status());
  }
  return token;
}

Status Server::SetPolicy(const Principal& who, const std::string& placement,
                         const std::string& queue_name, std::optional<bool> backfill) {
  if (who.role != Role::kAdmin) return Denied("only admins change the scheduling policy");
  std::unique_ptr<scheduler::PlacementPolicy> p;
  std::unique_ptr<queue::QueuePolicy> q;
  if (!placement.empty()) {
    auto r = MakePlacement(placement);
    if (!r.ok()) return InvalidArgument("placement: " + r.status().message());
    p = std::move(*r);
  }
  if (!queue_name.empty()) {
    auto r = queue::CreateQueuePolicy(queue_name);
    if (!r.ok()) return InvalidArgument("queue: " + r.status().message());
    q = std::move(*r);
  }
  // One change at a time: durable first, then applied, so memory never holds a policy the
  // store does not (and concurrent changes reach the disk in the order they apply).
  std::lock_guard policy_lock(policy_mu_);
  json doc;
  {
    std::lock_guard lock(mu_);
    doc = json{{"placement", placement.empty() ? options_.placement_policy : placement},
               {"queue", queue_name.empty() ? options_.queue_policy : queue_name},
               {"backfill", backfill.value_or(options_.backfill)}};
  }
  store::WriteBatch b;
  b.PutSetting(store::SettingRow{"policy", doc.dump()});
  STOKER_RETURN_IF_ERROR(store_->Apply(std::move(b)));
  {
    std::lock_guard pass_lock(pass_mu_);
    std::lock_guard lock(mu_);
    if (p) {
      pass_->SetPlacementPolicy(std::move(p));
      options_.placement_policy = placement;
    }
    if (q) {
      queue_policy_ = std::move(q);
      options_.queue_policy = queue_name;
    }
    if (backfill) options_.backfill = *backfill;
  }
  Kick();
  return Status::Ok();
}

PolicySettings Server::Policy() const {
  std::lock_guard lock(mu_);
  return PolicySettings{.placement = options_.placement_policy,
                        .queue = options_.queue_policy,
                        .backfill = options_.backfill};
}

// ---- scheduling -----------------------------------------------------------------------------

namespace {

// A job's state as the scheduling pass sees it; nullopt for ended jobs.
std::optional<pass::JobPhase> PhaseOf(JobState s) {
  switch (s) {
    case JobState::kQueued:
      return pass::JobPhase::kQueued;
    case JobState::kAssigned:
      return pass::JobPhase::kAssigned;
    case JobState::kRunning:
      return pass::JobPhase::kRunning;
    case JobState::kCancelling:
      return pass::JobPhase::kCancelling;
    default:
      return std::nullopt;
  }
}

// A job as the scheduling pass sees it.
pass::JobView PassView(const Job& j) {
  pass::JobView v;
  v.id = j.id;
  v.attempt = j.attempt();
  v.phase = PhaseOf(j.state).value_or(pass::JobPhase::kQueued);
  const JobSpec& s = j.spec;
  v.cpu_milli = s.cpu_milli;
  v.memory_mib = s.memory_mib;
  v.gpu_memory_mib = s.gpu_memory_mib;
  v.gpus = s.gpus;
  v.min_gpus = s.min_gpus;
  v.nodes = s.nodes;
  v.total_gpus = s.total_gpus;
  v.gpu_milli = s.gpu_milli;
  v.mig = s.mig;
  v.job_class = s.job_class;
  v.gpu_models = s.gpu_models;
  v.consolidate_milli = j.consolidate_milli;
  v.preemptible = s.preemptible;
  v.priority = s.priority;
  v.submit_ms = j.submit_ms;
  v.start_ms = j.start_ms;
  v.preempted_by = j.preempted_by;
  if (j.assignment) {
    pass::JobPlacement p;
    p.node = j.assignment->node;
    for (const auto& [pos, milli] : j.assignment->shares) p.shares.emplace_back(pos, milli);
    p.mig_slices = j.assignment->mig_slices;
    p.mig_uuid = j.assignment->mig_uuid;
    v.placement = std::move(p);
  }
  for (const GangPart& part : j.parts) {
    pass::JobPlacement p;
    p.node = part.assignment.node;
    for (const auto& [pos, milli] : part.assignment.shares) p.shares.emplace_back(pos, milli);
    v.gang.push_back(std::move(p));
  }
  return v;
}

// Tells the observers of a large pass of its changes part by part while the pass is still
// deciding, applying and writing them: one thread per observer, each told every part in order
// (OnJobsChanged), as soon as the part is applied. Each part comes with the turn its changes
// took among the server's (a ticket taken under the lock that applied it): an observer is told
// a part in that turn, and once every observer has been told it, the turn is over and the
// changes made after that part and before the next are told (the lock is let go between parts,
// so a heartbeat or a cancel may come in between). Each observer keeps its own state under its
// own lock, so they are told side by side; none takes the server's lock to be told. Finish()
// returns once every observer has been told everything, and the destructor finishes too (a pass
// that throws still joins its threads).
class ObserverFeed {
 public:
  explicit ObserverFeed(const std::vector<ServerObserver*>& observers)
      : observers_(observers.size()) {
    threads_.reserve(observers.size());
    for (ServerObserver* o : observers) {
      threads_.emplace_back([this, o] {
        // Below the pass's own thread, which decides and applies the parts these threads tell:
        // on a machine with fewer cores than busy threads, the pass keeps a core to itself.
        (void)setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), kFeedNice);
        Tell(o);
      });
    }
  }
  ObserverFeed(const ObserverFeed&) = delete;
  ObserverFeed& operator=(const ObserverFeed&) = delete;
  ~ObserverFeed() { Finish(); }

  void Add(std::shared_ptr<const std::vector<Job>> part, OrderedDelivery::Ticket turn) {
    {
      std::lock_guard lock(mu_);
      parts_.push_back(Part{std::move(part), std::move(turn), 0});
    }
    cv_.notify_all();
  }
  void Finish() {
    {
      std::lock_guard lock(mu_);
      last_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) {
      if (t.joinable()) t.join();
    }
  }

 private:
  struct Part {
    std::shared_ptr<const std::vector<Job>> jobs;
    OrderedDelivery::Ticket turn;
    size_t told = 0;  // how many observers have been told it
  };

  void Tell(ServerObserver* o) {
    for (size_t next = 0;; ++next) {
      Part* part = nullptr;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return next < parts_.size() || last_; });
        if (next == parts_.size()) return;
        part = &parts_[next];  // a deque's elements stay where they are as it grows
      }
      // Neither field changes until every observer has been told the part (below).
      part->turn.WaitTurn();
      o->OnJobsChanged(*part->jobs);
      OrderedDelivery::Ticket done;
      std::shared_ptr<const std::vector<Job>> jobs;
      {
        std::lock_guard lock(mu_);
        if (++part->told == observers_) {
          done = std::move(part->turn);
          // Whoever is done with it last (this thread, or the store's writer) frees it.
          jobs = std::move(part->jobs);
        }
      }
      // The last observer told ends the part's turn: what changed after it is told next.
      done.Deliver({});
    }
  }

  static constexpr int kFeedNice = 10;
  const size_t observers_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Part> parts_;
  bool last_ = false;
  std::vector<std::thread> threads_;  // last: started once the rest is built
};

// The "assigned" event's message of a one-node job placed by a pass.
std::string AssignedMessage(const Job& j, bool oversubscribed, const std::string& basis) {
  const Assignment& a = *j.assignment;
  std::string m;
  m.reserve(3 + a.node.size() + 9 + a.cuda_visible_devices.size() + 2 + basis.size() + 64);
  m += "to ";
  m += a.node;
  if (!a.cuda_visible_devices.empty()) {
    m += " devices ";
    m += a.cuda_visible_devices;
  }
  if (oversubscribed) m += " (preemptible, sharing GPUs beyond their capacity)";
  if (!basis.empty()) {
    m += "; ";
    m += basis;
  }
  return m;
}

// The "assigned" event's message of a gang placed by a pass.
std::string GangAssignedMessage(const Job& j) {
  std::string where;
  for (const GangPart& part : j.parts) {
    where += (where.empty() ? "" : ", ") + part.assignment.node +
             (part.assignment.cuda_visible_devices.empty()
                  ? std::string()
                  : " devices " + part.assignment.cuda_visible_devices);
  }
  return "a gang of " + std::to_string(j.parts.size()) + " parts: " + where + "; master " +
         j.parts[0].assignment.env.at("MASTER_ADDR") + ":" +
         j.parts[0].assignment.env.at("MASTER_PORT");
}

}  // namespace

// The storage of a pass's parts' copies of their jobs (4,096 jobs of 760 bytes: 3 MiB a part).
// A part takes a buffer and hands it back, emptied, when the last of the store's writer and the
// observers is done with it; the next part, in this pass or a later one, writes into memory
// already written once instead of fresh memory, which a first pass over 100,000 jobs paid for
// 80,000 copies (docs/performance.md). At most kKept buffers are kept (about 25 MiB).
class PartBuffers {
 public:
  PartBuffers() { spare_.reserve(kKept); }  // Give (from a destructor) never allocates
  std::vector<Job> Take(size_t jobs) {
    {
      std::lock_guard lock(mu_);
      for (auto it = spare_.begin(); it != spare_.end(); ++it) {
        if (it->capacity() >= jobs) {
          std::vector<Job> buffer = std::move(*it);
          spare_.erase(it);
          return buffer;
        }
      }
    }
    std::vector<Job> buffer;
    buffer.reserve(std::max(jobs, Server::kPassPart));
    AdviseHugePagesFor(buffer);
    return buffer;
  }
  void Give(std::vector<Job> buffer) {
    buffer.clear();  // the jobs freed on the giver's thread, outside the lock
    std::lock_guard lock(mu_);
    if (spare_.size() < kKept) spare_.push_back(std::move(buffer));
  }

 private:
  static constexpr size_t kKept = 8;
  std::mutex mu_;
  std::vector<std::vector<Job>> spare_;
};

void Server::RebuildNodeView() {
  view_nodes_.clear();
  view_nodes_.reserve(nodes_.size());
  view_generations_.clear();
  view_generations_.reserve(nodes_.size());
  for (const auto& [name, n] : nodes_) {
    pass::NodeView v;
    v.name = name;
    v.cpu_milli = n.inv.cpu_milli;
    v.memory_mib = n.inv.memory_mib;
    v.drained = n.drained;
    v.lost = n.lost;
    if (!n.lost && !n.drained) {
      v.gpus.reserve(n.inv.gpus.size());
      for (const GpuInfo& g : n.inv.gpus) {
        pass::GpuView gv{g.index, g.model, g.memory_mib, g.mig_enabled, {}};
        for (const MigInfo& m : g.mig) gv.mig.push_back(pass::MigInstance{m.uuid, m.slices});
        v.gpus.push_back(std::move(gv));
      }
    }
    view_generations_.emplace(name, n.generation);
    view_nodes_.push_back(std::move(v));
  }
}

PassStats Server::RunSchedulingPass() {
  const auto t0 = std::chrono::steady_clock::now();
  // Wall time of each phase, for the metrics (and the benchmarks that split a pass).
  PassPhaseSeconds phases;
  auto mark = t0;
  auto phase_done = [&mark](double* into) {
    const auto t = std::chrono::steady_clock::now();
    *into += std::chrono::duration<double>(t - mark).count();
    mark = t;
  };
  // One pass at a time; mu_ is held only to read the view and to apply the decision, so
  // submissions, heartbeats and reads go on while the pass computes.
  std::lock_guard pass_lock(pass_mu_);
  pass::PassInput in;
  pass::PassOptions popts;
  std::shared_ptr<const queue::QueuePolicy> queue_policy;
  // node -> generation in the view (kept with it)
  const std::unordered_map<std::string, uint64_t>& generations = view_generations_;
  uint64_t view_built_at = 0;
  {
    std::lock_guard lock(mu_);
    // Fragmentation is sampled every minute, with or without queued jobs (reports chart it).
    const MonoTime now = clock_->Now();
    const bool sample_frag =
        last_frag_sample_ == MonoTime{} || now - last_frag_sample_ >= std::chrono::minutes(1);
    if (queued_.empty() && !sample_frag) return PassStats{};
    if (sample_frag) last_frag_sample_ = now;
    in.sample_fragmentation = sample_frag;
    // The node view, built again from the authoritative table only when a node changed (at
    // 10,000 nodes building it took 13-79 ms under this lock, holding up every heartbeat). It
    // is built on a thread of its own while this one builds the jobs' views (the two read and
    // write nothing in common; both under this lock): at 10,000 nodes and 100,000 queued jobs
    // the view took 0.19 s with both on this thread, 0.06-0.11 s so (docs/performance.md). A
    // rebuild that throws rethrows here, its thread joined.
    std::future<void> nodes_built;
    if (view_version_ != nodes_version_ || !options_.incremental_pass) {
      nodes_built = std::async(std::launch::async, [this] { RebuildNodeView(); });
    }
    view_built_at = nodes_version_;
    // Active placed jobs from the index (every job ever submitted would make each pass grow
    // with the server's history). The views go into the storage of the last pass's.
    in.active = std::move(view_active_);
    in.queued = std::move(view_queued_);
    in.active.reserve(job_nodes_.size());
    AdviseHugePagesFor(in.active);
    for (const auto& [id, node_names] : job_nodes_) {
      const Job& j = jobs_.at(id);
      if (IsActive(j.state)) in.active.push_back(PassView(j));
    }
    in.queued.reserve(queued_.size());
    AdviseHugePagesFor(in.queued);
    // Both in id order: most queued jobs follow the one before in jobs_ (submitted one after
    // another), so the next entry is tried before a search.
    auto at = jobs_.end();
    for (int64_t id : queued_) {
      if (at != jobs_.end()) ++at;
      if (at == jobs_.end() || at->first != id) {
        at = jobs_.find(id);
        if (at == jobs_.end()) throw std::out_of_range("queued job " + std::to_string(id));
      }
      in.queued.push_back(PassView(at->second));
    }
    if (nodes_built.valid()) nodes_built.get();
    // Lent to the pass; marked stale until it is back (a pass that throws leaves it so).
    in.nodes = std::move(view_nodes_);
    view_version_.reset();
    popts.placement_policy = options_.placement_policy;
    popts.backfill = options_.backfill;
    popts.gpu_oversubscription_milli = options_.gpu_oversubscription_milli;
    popts.activity_window_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(options_.activity_window).count();
    queue_policy = queue_policy_;
  }
  // The GPUs' measured activity (its own lock; no server lock held), anew: the view is kept.
  for (pass::NodeView& n : in.nodes) {
    for (pass::GpuView& g : n.gpus) g.activity.reset();
  }
  activity_.Fill(&in.nodes, clock_->WallNow());
  phase_done(&phases.view);

  // The decision is applied in parts of kPassPart actions, each as soon as the pass has decided
  // it (pass::ActionSink), the rest once it returns: the store's writer and the observers start
  // on the first part while the pass decides the next. Each part is applied under the lock
  // alone (heartbeats, submissions and reads go on between parts), takes its own turn among the
  // server's changes for its observers and its own place in the store's commit order, so what
  // changed between two parts is told and written between them. A part holds copies of the jobs
  // it changed, in order (for the observers, and for the rows, which the writer builds from them
  // on its thread: ApplyAsync's fill), the events of the jobs it stopped, and which of its jobs
  // were placed: their "assigned" events are written after the part's other events (each job has
  // at most one event in a pass).
  struct Placed {
    size_t at = 0;  // in Part::changed
    bool oversubscribed = false;
    std::string basis;
  };
  struct Part {
    explicit Part(std::shared_ptr<PartBuffers> from) : buffers(std::move(from)) {}
    Part(const Part&) = delete;
    Part& operator=(const Part&) = delete;
    ~Part() { buffers->Give(std::move(changed)); }
    std::shared_ptr<PartBuffers> buffers;
    std::vector<Job> changed;
    std::vector<Placed> placed;
    store::WriteBatch events;
  };
  // Parts applied: their durable commits, and (for a pass without a feed) the parts with their
  // turns, to tell the observers after the commits.
  std::vector<std::shared_future<Status>> commits;
  std::vector<std::pair<std::shared_ptr<Part>, OrderedDelivery::Ticket>> untold;
  // A pass that hands parts over while it decides tells its observers as the parts come.
  std::optional<ObserverFeed> feed;
  int64_t placed_ms = 0;  // one timestamp for all the pass's placements
  // Decisions that what changed meanwhile made stale: placements (of them oversubscribed) and
  // stops.
  int dropped_placed = 0, dropped_oversubscribed = 0, dropped_preempted = 0;
  double applying_s = 0;   // wall time in applying parts while the pass still decided
  double lock_wait_s = 0;  // of the apply, waiting for mu_
  // A decision about a job stands only if the job is as the pass saw it (the view the action
  // names, in `in`): same state, same attempt, same resize, not being stopped; and a placement
  // only on a node that is still schedulable with the inventory of the view. Under mu_.
  auto unchanged = [&](const pass::Action& act) -> Job* {
    if (act.view == nullptr || act.view->id != act.job) return nullptr;
    auto it = jobs_.find(act.job);
    if (it == jobs_.end()) return nullptr;
    const pass::JobView& v = *act.view;
    Job& j = it->second;
    if (PhaseOf(j.state) != v.phase || j.attempt() != v.attempt ||
        j.preempted_by != v.preempted_by || j.consolidate_milli != v.consolidate_milli) {
      return nullptr;
    }
    if (v.placement.has_value() != j.assignment.has_value()) return nullptr;
    if (v.placement && v.placement->node != j.assignment->node) return nullptr;
    if (v.gang.size() != j.parts.size()) return nullptr;
    for (size_t k = 0; k < v.gang.size(); ++k) {
      if (v.gang[k].node != j.parts[k].assignment.node) return nullptr;
    }
    return &j;
  };
  // Applies `acts` under mu_ as one part, and hands the part to the store and the observers.
  // `early`: the pass is still deciding (its later parts follow).
  auto apply_part = [&](std::span<pass::Action> acts, bool early) {
    if (acts.empty()) return;
    auto part = std::make_shared<Part>(part_buffers_);
    part->changed = part_buffers_->Take(acts.size());
    part->placed.reserve(acts.size());
    const auto asked = std::chrono::steady_clock::now();
    std::lock_guard lock(mu_);
    lock_wait_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - asked).count();
    // Nothing changes a node while the lock is held, and a policy that packs places many jobs
    // in a row on one node: the last node's answer is kept.
    const std::string* last_node = nullptr;
    bool last_node_unchanged = false;
    auto node_unchanged = [&](const std::string& name) {
      if (last_node != nullptr && *last_node == name) return last_node_unchanged;
      auto it = nodes_.find(name);
      if (it == nodes_.end()) return false;
      auto g = generations.find(name);
      last_node = &it->first;
      last_node_unchanged = g != generations.end() && it->second.generation == g->second &&
                            !it->second.lost && !it->second.drained;
      return last_node_unchanged;
    };
    // A changed job: its copy in the part, and out of the queue unless it went back to it.
    auto changed = [&](const Job& j) {
      part->changed.push_back(j);
      if (j.state != JobState::kQueued) queued_.erase(j.id);
    };
    for (pass::Action& act : acts) {
      Job* jp = unchanged(act);
      if (act.kind == pass::Action::Kind::kStop) {
        if (jp == nullptr) {
          ++dropped_preempted;
          continue;
        }
        // A running victim is stopped by its node (TERM, the preemption grace, KILL) and its
        // exit requeues it; an assigned one that has not started goes back to the queue now.
        Job& victim = *jp;
        victim.preemptions++;
        const std::string why = "preempted for job " + std::to_string(act.for_job);
        if (act.running) {
          victim.state = JobState::kCancelling;
          victim.preempted_by = act.for_job;
          victim.reason = why;
          Event(&part->events, victim, "preempt", why + " (stopping)");
        } else {
          RequeueUnstarted(victim, why, &part->events);
        }
        spdlog::info("job {}: preempting job {} on {}", act.for_job, victim.id,
                     victim.assignment ? victim.assignment->node : std::string("its node"));
        changed(victim);
        continue;
      }
      if (!act.gang.empty()) {
        // A gang: every part's node must be as the pass saw it, or none is placed.
        bool stale = jp == nullptr;
        for (const pass::Grant& g : act.gang) stale = stale || !node_unchanged(g.placement.node);
        Status s = stale ? Status::Ok() : AssignGang(*jp, act.gang);
        if (stale || !s.ok()) {
          ++dropped_placed;
          if (!s.ok()) queue_reasons_[act.job] = "waiting: " + s.message();
          continue;
        }
        Job& j = *jp;
        j.state = JobState::kAssigned;
        j.reason.clear();
        Reindex(j);
        queue_reasons_.erase(j.id);
        part->placed.push_back(Placed{part->changed.size(), false, {}});
        changed(j);
        continue;
      }
      pass::Grant& pa = act.assignment;
      if (jp == nullptr || !node_unchanged(pa.placement.node)) {
        ++dropped_placed;
        if (pa.oversubscribed) ++dropped_oversubscribed;
        continue;
      }
      Job& j = *jp;
      part->placed.push_back(Placed{part->changed.size(), pa.oversubscribed, std::move(pa.basis)});
      j.state = JobState::kAssigned;
      j.assignment = FromPass(std::move(pa));
      j.reason.clear();
      Reindex(j);
      queue_reasons_.erase(j.id);
      changed(j);
    }
    if (part->changed.empty() && part->events.empty()) return;
    if (commits.empty()) {
      placed_ms = NowMs();
      if (early) {
        const auto observers = Observers();
        if (!observers->empty()) feed.emplace(*observers);
      }
    }
    OrderedDelivery::Ticket turn = told_.Take();
    // The rows are built on the writer's thread from the part's copies (which nothing changes
    // from here on), in its place in the commit order.
    store::WriteBatch events = std::move(part->events);
    commits.push_back(store_->ApplyAsync(
        std::move(events), [this, part, now_ms = placed_ms](store::WriteBatch* rows) {
          for (const Job& j : part->changed) rows->UpdateJob(StatusRow(j));
          for (const Placed& p : part->placed) {
            const Job& j = part->changed[p.at];
            rows->AddEvent(store::EventRow{j.id, now_ms, "assigned",
                                           j.parts.empty()
                                               ? AssignedMessage(j, p.oversubscribed, p.basis)
                                               : GangAssignedMessage(j)});
          }
        }));
    if (feed) {
      const std::vector<Job>* jobs = &part->changed;
      feed->Add(std::shared_ptr<const std::vector<Job>>(std::move(part), jobs), std::move(turn));
    } else {
      untold.emplace_back(std::move(part), std::move(turn));
    }
  };

  pass::ActionSink sink;
  sink.every = kPassPart;
  sink.take = [&](std::span<pass::Action> acts) {
    const auto t = std::chrono::steady_clock::now();
    apply_part(acts, true);
    applying_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  };
  pass::Decision d = pass_->Run(in, *queue_policy, popts, sink);
  view_nodes_ = std::move(in.nodes);
  view_version_ = view_built_at;
  for (const std::string& w : d.warnings) spdlog::warn("scheduling pass: {}", w);
  phase_done(&phases.compute);
  // What the parts applied while the pass decided took is the apply's, not the compute's.
  phases.compute -= applying_s;
  phases.apply += applying_s;

  // The rest of the decision, in parts of at most kPassPart actions.
  const std::span<pass::Action> rest = std::span<pass::Action>(d.actions).subspan(d.handed);
  for (size_t at = 0; at < rest.size(); at += kPassPart) {
    apply_part(rest.subspan(at, std::min(kPassPart, rest.size() - at)), false);
  }
  PassStats stats = d.stats;  // less what was dropped
  stats.placed -= dropped_placed;
  stats.oversubscribed -= dropped_oversubscribed;
  stats.preempted -= dropped_preempted;
  {
    std::lock_guard lock(mu_);
    for (auto& [id, why] : d.reasons) {
      auto it = jobs_.find(id);
      if (it != jobs_.end() && it->second.state == JobState::kQueued) {
        queue_reasons_[id] = std::move(why);
      }
    }
    if (stats.fragmentation) last_fragmentation_ = stats.fragmentation;
    if (stats.queued > 0) totals_.passes++;
    totals_.placed += stats.placed;
    totals_.preempted += stats.preempted;
    totals_.oversubscribed += stats.oversubscribed;
  }
  phase_done(&phases.apply);
  phases.apply -= lock_wait_s;
  phases.apply_lock_wait += lock_wait_s;
  for (std::shared_future<Status>& done : commits) {
    if (Status s = Wait(done); !s.ok()) {
      spdlog::error("scheduling pass: cannot persist placements: {}", s.ToString());
    }
  }
  phase_done(&phases.persist);
  if (const int dropped = dropped_placed + dropped_preempted; dropped > 0) {
    spdlog::info("scheduling pass: {} decision(s) overtaken by changes; deciding again", dropped);
    Kick();
  }
  if (feed) feed->Finish();
  for (auto& [part, turn] : untold) {
    turn.Deliver([this, part = std::move(part)] { Notify(part->changed); });
  }
  if (stats.fragmentation) {
    const WallTime at = clock_->WallNow();
    for (ServerObserver* o : *Observers()) o->OnFragmentation(*stats.fragmentation, at);
  }
  phase_done(&phases.notify);
  stats.seconds = std::chrono::duration<double>(mark - t0).count();
  {
    std::lock_guard lock(mu_);
    totals_.last_pass_seconds = stats.seconds;
    totals_.last_pass_phases = phases;
  }
  in.active.clear();
  in.queued.clear();
  view_active_ = std::move(in.active);
  view_queued_ = std::move(in.queued);
  pass_->Recycle(std::move(d));
  return stats;
}

int Server::CheckNodeTimeouts() {
  std::vector<Job> changed;
  std::shared_future<Status> done;
  bool persist = false;
  OrderedDelivery::Ticket told;  // the observers are told of `changed` in its turn
  int lost = 0;
  {
    std::lock_guard lock(mu_);
    const MonoTime now = clock_->Now();
    store::WriteBatch b;
    for (auto& [name, n] : nodes_) {
      if (n.lost || now - n.last_heartbeat <= options_.node_timeout) continue;
      n.lost = true;
      ++nodes_version_;
      ++lost;
      spdlog::warn("node {} lost: no heartbeat for {:.0f} s", name,
                   ToSeconds(now - n.last_heartbeat));
      b.PutNode(Row(n));
      std::vector<int64_t> active;
      if (auto it = node_jobs_.find(name); it != node_jobs_.end()) {
        active.assign(it->second.begin(), it->second.end());
      }
      for (int64_t id : active) {
        Job& j = jobs_.at(id);
        if (GangPart* part = protocol::PartOn(j, name)) {
          OnPartLost(j, *part, name, b);
          b.UpdateJob(StatusRow(j));
          changed.push_back(j);
          continue;
        }
        if (StoppingToRequeue(j)) {
          RequeueStopped(j);
        } else if (j.state == JobState::kCancelling) {
          EndJob(j, JobState::kCancelled, j.reason + " (node " + name + " lost)");
        } else if (j.spec.on_node_loss == protocol::OnNodeLoss::kRequeue) {
          Requeue(j, "node " + name + " lost", true);
        } else {
          EndJob(j, JobState::kFailed, "node " + name + " lost");
        }
        Event(&b, j, JobStateName(j.state), "node " + name + " lost");
        b.UpdateJob(StatusRow(j));
        changed.push_back(j);
      }
    }
    if (!changed.empty()) told = told_.Take();
    persist = !b.empty();
    if (persist) done = store_->ApplyAsync(std::move(b));
  }
  if (persist) {
    Status s = Wait(done);
    if (!s.ok()) spdlog::error("node liveness: cannot persist: {}", s.ToString());
  }
  if (!changed.empty()) {
    NotifyInTurn(told, std::move(changed));
    Kick();
  }
  return lost;
}

// ---- loops ----------------------------------------------------------------------------------

void Server::Kick() {
  {
    std::lock_guard lock(loop_mu_);
    kicked_ = true;
  }
  loop_cv_.notify_all();
}

void Server::Loop(bool scheduler) {
  while (true) {
    {
      std::unique_lock lock(loop_mu_);
      if (scheduler) {
        // Passes run at most every schedule_interval, sooner only after a kick.
        loop_cv_.wait_for(lock, options_.schedule_interval, [&] { return stopping_ || kicked_; });
        kicked_ = false;
      } else {
        loop_cv_.wait_for(lock, std::chrono::seconds(1), [&] { return stopping_; });
      }
      if (stopping_) return;
    }
    if (scheduler) {
      PassStats st = RunSchedulingPass();
      if (st.placed > 0) {
        spdlog::debug("scheduling pass: {} queued, {} placed in {:.3f} s", st.queued, st.placed,
                      st.seconds);
      }
      // Batch bursts of submissions into one pass, and rest pass_rest_ratio times as long as
      // the pass took: back-to-back passes would take a whole core from the request handlers
      // (measured: 66 % of the server's CPU while 64 clients submitted). New jobs are then
      // placed within about (1 + ratio) pass times, and within a second and a pass at most.
      // The rest ends early only to stop (kicks meanwhile wait for the next pass).
      const auto rest = std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::duration<double>(st.seconds * options_.pass_rest_ratio));
      std::unique_lock lock(loop_mu_);
      loop_cv_.wait_for(
          lock, std::clamp(rest, std::chrono::milliseconds(20), std::chrono::milliseconds(1000)),
          [&] { return stopping_; });
    } else {
      CheckNodeTimeouts();
    }
  }
}

void Server::Start() {
  std::lock_guard lock(loop_mu_);
  if (!threads_.empty()) return;
  stopping_ = false;
  threads_.emplace_back([this] { Loop(true); });
  threads_.emplace_back([this] { Loop(false); });
}

void Server::Stop() {
  {
    std::lock_guard lock(loop_mu_);
    stopping_ = true;
  }
  loop_cv_.notify_all();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

}  // namespace stoker::server
