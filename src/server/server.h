#pragma once
// The Stoker server core: jobs, nodes and tokens in memory, every change written through the
// Store before it is acknowledged, a scheduling loop built on the scheduler library (placement
// policy) and the queue library (ordering), and the node-liveness monitor.
//
// Every operation takes the caller's Principal and enforces authorization here (not in the
// HTTP layer), so the rules are tested and fuzzed without sockets:
//   admin: everything;   user: submit, see and cancel own jobs, read nodes/queue;
//   agent: register and heartbeat for the node named like its token, nothing else.
//
// Concurrency: one mutex guards the in-memory state. Changes are applied in memory and handed
// to the store under the mutex (so their order on disk is the order in memory), and the caller
// waits for the durable COMMIT after releasing it; concurrent requests share one group commit.

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/clock.h"
#include "core/ordered_delivery.h"
#include "core/status.h"
#include "protocol/model.h"
#include "scheduler/pass/pass.h"
#include "scheduler/policy.h"
#include "scheduler/queue/queue_policy.h"
#include "server/activity.h"
#include "server/auth.h"
#include "store/store.h"

namespace stoker::server {

// The domain speaks the protocol's types (protocol/model.h); they are named here for its callers.
using protocol::Allocation;
using protocol::Assignment;
using protocol::CheckSubmission;
using protocol::GangPart;
using protocol::GpuInfo;
using protocol::Heartbeat;
using protocol::HeartbeatBody;
using protocol::HeartbeatReply;
using protocol::HeartbeatReplyToJson;
using protocol::IsActive;
using protocol::IsTerminal;
using protocol::Job;
using protocol::JobFromJson;
using protocol::JobSpec;
using protocol::JobSpecToJson;
using protocol::JobState;
using protocol::JobStateName;
using protocol::JobToJson;
using protocol::json;
using protocol::LaunchOrder;
using protocol::MigInfo;
using protocol::NodeInventory;
using protocol::NodeInventoryToJson;
using protocol::NodeState;
using protocol::NodeStatus;
using protocol::ParseHeartbeat;
using protocol::ParseHeartbeatReply;
using protocol::ParseJobSpec;
using protocol::ParseJobState;
using protocol::ParseNodeInventory;
using protocol::ParseRole;
using protocol::PartPhase;
using protocol::PolicySettings;
using protocol::QueueEntry;
using protocol::RoleName;
using protocol::RunReport;
using protocol::SampleTick;
using protocol::SelectSamples;

struct ServerOptions {
  std::string data_dir;  // job logs live in <data_dir>/logs
  // scheduler::CreatePlacementPolicy names; empty: the library's default (kDefaultPolicyName),
  // or "bestfit" while a library build lacks it.
  std::string placement_policy;
  std::string queue_policy = "fifo";  // queue::CreateQueuePolicy names
  // true: a job that does not fit now does not block later jobs that do (greedy backfill);
  // false: strict queue order (the first blocked job stops the pass).
  bool backfill = true;
  Duration node_timeout = std::chrono::seconds(30);
  Duration schedule_interval = std::chrono::milliseconds(500);
  // After a pass the scheduling loop rests this many times as long as the pass took (at least
  // 20 ms, at most a second) before the next, however often submissions kick it: passes then
  // take at most 1 / (1 + ratio) of a core, and submissions that arrive meanwhile are placed
  // together by the next pass. At 10,000 nodes a pass takes about 17 ms of CPU: with a ratio of
  // 1, ten submissions a second ran ten passes a second, a sixth of the server's CPU.
  double pass_rest_ratio = 9;
  // Each pass reuses what it built before where nothing changed: the node view (built again only
  // after a registration, a drain or undrain, a node lost or back) and the cluster it places on
  // (only the nodes whose state changed are scored again). false builds both afresh every pass,
  // which gives the same decisions (tests compare the two); it costs O(nodes) per pass.
  bool incremental_pass = true;
  size_t max_log_read = 1 << 20;
  // GPU oversubscription for preemptible jobs: a GPU's total commitments may reach this many
  // milli-GPU (1000 = off, the default; at most 1500 = 1.5:1). Guaranteed work never shares
  // beyond one GPU: preemptible jobs in its way are preempted (gpu_commitments.h).
  int32_t gpu_oversubscription_milli = 1000;
  // How long a preempted job has between SIGTERM and SIGKILL on its node (the node's own
  // cancel grace applies to ordinary cancels).
  Duration preemption_grace = std::chrono::minutes(2);
  // GPU samples taken further than this from the server's clock (either way) are refused.
  Duration sample_time_window = std::chrono::minutes(5);
  // How often nodes sending the compact heartbeat form report (the reply's report_interval_ms;
  // they still sample every second and send every second's samples): the number of registered
  // nodes divided by heartbeat_rate, so the server receives about that many reports a second,
  // kept within report_interval_min..max (and protocol::limits' bounds, and a third of
  // node_timeout so a node is not taken for lost between two reports).
  double heartbeat_rate = 1000;
  Duration report_interval_min = std::chrono::seconds(1);
  Duration report_interval_max = std::chrono::seconds(10);
  // MASTER_PORT of a gang: the lowest port from gang_port_base (PyTorch's default) up that no
  // other active gang with rank 0 on the same node uses, among gang_ports ports.
  int32_t gang_port_base = 29500;
  int32_t gang_ports = 1000;
  // Placement by measured use: the window over which the agents' GPU activity is averaged
  // (ActivityTracker). The weighted policy's utilization is that mean where GPUs report it, and
  // oversubscription needs it to cover the whole window (pass::PassOptions).
  Duration activity_window = std::chrono::minutes(5);
  // Makes the placement policy of a name (at start, from a stored policy, on SetPolicy);
  // scheduler::CreatePlacementPolicy when empty. Injected like the clock, so a test can see a
  // pass from inside its decisions.
  std::function<Result<std::unique_ptr<scheduler::PlacementPolicy>>(std::string_view name)>
      make_placement;
  // Who a verified client certificate is, by its Common Name (HTTPS with a client CA):
  // "kube-scheduler" -> {name "kube-scheduler", role scheduler}. Unlisted names are refused.
  std::map<std::string, Principal> client_certificates;
};

// The cluster's fragmentation by FGD's measure (scheduler/pass/pass.h).
using pass::Fragmentation;

// Extension point for the efficiency engine: told about every heartbeat (with the agent's GPU
// samples) and every job change. Called outside every server lock, concurrently from request
// threads: an observer guards its own state.
class ServerObserver {
 public:
  virtual ~ServerObserver() = default;
  virtual void OnHeartbeat(const std::string& /*node*/, const std::vector<GpuSample>& /*gpus*/,
                           WallTime /*at*/) {}
  // Every second of one report of `node`, in time order, each tick's `at` set. By default one
  // OnHeartbeat call per second; an observer that takes a report's seconds together (the
  // efficiency engine: per-GPU state found once per report) overrides it, keeping each
  // second's own time.
  virtual void OnReport(const std::string& node, std::span<const SampleTick> ticks) {
    for (const SampleTick& t : ticks) OnHeartbeat(node, t.gpus, t.at);
  }
  // Job changes come in the order the jobs changed, one change at a time (never two at once to
  // one observer). The call that made a change may return before it is told: while an earlier
  // change is still being told, a later one is told after it, on the thread telling it. A pass
  // of more than Server::kPassPart decisions tells each observer on a thread of its own, its
  // parts in order (each in its turn among the server's changes), and returns once all are told.
  virtual void OnJobChanged(const Job& /*job*/) {}
  // Every job one change of the server touched, in the order they changed: a scheduling pass's
  // placed and stopped jobs (part by part, as it hands them to the store, when it tells them
  // from its feed); at stoker server's start, every unended job. By default one OnJobChanged
  // call each; an observer overrides it to take its lock once for them all.
  virtual void OnJobsChanged(std::span<const Job> jobs) {
    for (const Job& j : jobs) OnJobChanged(j);
  }
  // A fragmentation sample (at most one a minute, from the scheduling loop).
  virtual void OnFragmentation(const Fragmentation& /*f*/, WallTime /*at*/) {}
};

// Actions other modules (the efficiency engine's reclaim) may take on jobs, as the system.
class JobActions {
 public:
  virtual ~JobActions() = default;
  virtual Status CancelJob(int64_t id, const std::string& reason) = 0;
  // Puts an active job back in the queue: a running one is stopped by its node first (and
  // requeued when it exits), an assigned one at once. FailedPrecondition for ended jobs.
  virtual Status RequeueJob(int64_t id, const std::string& reason) = 0;
  // From its next start, a job that asked for one whole GPU runs as a share of `gpu_milli`
  // (1..999) of one (the consolidation plan). FailedPrecondition for other shapes and ended jobs.
  virtual Status ConsolidateAtNextStart(int64_t id, int32_t gpu_milli,
                                        const std::string& reason) = 0;
};

struct JobFilter {
  std::set<JobState> states;  // empty: all
  std::string user;
  std::string node;
  size_t limit = 1000;
  int64_t before_id = 0;  // > 0: only jobs with a smaller id (the next page)
};

struct LogChunk {
  std::string data;
  int64_t next_offset = 0;
  bool finished = false;  // the job ended and every byte the node sent is here
};

// A token as an admin sees it (never the token itself).
struct TokenInfo {
  std::string id;  // auth.h TokenId
  std::string name;
  Role role = Role::kUser;
  int64_t created_unix_ms = 0;
  int64_t expires_unix_ms = 0;  // 0: does not expire
};

// What one scheduling pass did (scheduler/pass/pass.h); `fragmentation` is sampled at most once a
// minute.
using pass::PassStats;

// The server's counters and gauges as GET /metrics reports them (the API writes the Prometheus
// text: server/api.h ServerMetricsText).
// Where the wall time of a scheduling pass went, in seconds.
struct PassPhaseSeconds {
  double view = 0;             // the view read under the lock, and the GPUs' measured activity
  double compute = 0;          // the pass's decision (no server lock held)
  double apply_lock_wait = 0;  // waiting for the server lock to apply the decision
  double apply = 0;            // applying it under the lock, the store's batch queued
  double persist = 0;          // waiting for the durable COMMIT of that batch
  double notify = 0;           // observers told of the changed jobs
};

struct ServerMetrics {
  std::map<std::string, int64_t> jobs;   // queued, assigned, running, cancelling -> count
  std::map<std::string, int64_t> ended;  // succeeded, failed, cancelled since the process started
  int64_t nodes_ready = 0, nodes_drained = 0, nodes_lost = 0;
  // Non-MIG GPUs of nodes not lost by commitment: free, partial, full, oversubscribed.
  std::map<std::string, int64_t> gpus;
  int32_t gpu_oversubscription_milli = 1000;
  int64_t passes = 0, placed = 0, oversubscribed = 0, preempted = 0;
  std::optional<Fragmentation> fragmentation;  // the last minute's sample, once there is one
  // Heartbeat input refused: GPU samples by reason (unknown_gpu, index_mismatch, clock), and
  // log chunks of jobs that are not the sending node's current run.
  std::map<std::string, int64_t> samples_refused;
  int64_t log_chunks_refused = 0;
  double last_pass_seconds = 0;
  PassPhaseSeconds last_pass_phases;
};

class PartBuffers;  // server.cc: the storage of a pass's parts' copies of their jobs

class Server final : public JobActions {
 public:
  // Loads jobs, nodes and tokens from the store.
  static Result<std::unique_ptr<Server>> Create(store::Store* store, Clock* clock,
                                                ServerOptions options);
  ~Server() override;

  WallTime WallNow() const { return clock_->WallNow(); }

  // Background loops (scheduling, node liveness). Tests drive the passes directly instead.
  void Start();
  void Stop();

  Result<Principal> Authenticate(std::string_view authorization_header) const {
    return tokens_.Authenticate(authorization_header, NowMs());
  }
  // The principal a verified client certificate's CN maps to (ServerOptions::
  // client_certificates); Unauthenticated for a CN that is not mapped.
  Result<Principal> AuthenticateCertificate(const std::string& common_name) const;

  // Jobs.
  Result<Job> Submit(const Principal& who, JobSpec spec);
  Result<std::vector<Job>> ListJobs(const Principal& who, const JobFilter& filter) const;
  // Every match of `filter`, oldest first, read `filter.limit` at a time (its before_id is
  // ignored): what an observer joining a running server is told of, however many jobs match.
  Result<std::vector<Job>> ListAllJobs(const Principal& who, JobFilter filter) const;
  Result<Job> GetJob(const Principal& who, int64_t id) const;
  Result<Job> Cancel(const Principal& who, int64_t id);
  // `part`: the rank of a gang's part (each part has its own logs); 0 for other jobs.
  Result<LogChunk> ReadLog(const Principal& who, int64_t id, const std::string& stream,
                           int64_t offset, int32_t part = 0) const;
  Result<std::vector<store::EventRow>> Events(const Principal& who, int64_t id) const;
  Status CancelJob(int64_t id, const std::string& reason) override;
  Status RequeueJob(int64_t id, const std::string& reason) override;
  Status ConsolidateAtNextStart(int64_t id, int32_t gpu_milli, const std::string& reason) override;
  // Jobs by state, nodes, GPU commitments, scheduler counters (GET /metrics).
  ServerMetrics Metrics() const;

  // Nodes.
  Result<NodeStatus> RegisterNode(const Principal& who, const NodeInventory& inv);
  // Takes the heartbeat by value: its samples are kept as the node's latest without a copy.
  Result<HeartbeatReply> Heartbeat(const Principal& who, const std::string& node,
                                   server::Heartbeat hb);
  Status SetDrained(const Principal& who, const std::string& node, bool drained);
  // Every node without its samples; one node with them.
  Result<std::vector<NodeStatus>> ListNodes(const Principal& who) const;
  Result<NodeStatus> GetNode(const Principal& who, const std::string& node) const;

  // Views.
  Result<std::vector<Allocation>> Allocations(const Principal& who) const;
  Result<std::vector<QueueEntry>> Queue(const Principal& who) const;

  // Tokens (admin). Every creation and revocation is audited (ListAudit). `expires_unix_ms`: 0
  // for a token that does not expire.
  Result<std::string> CreateToken(const Principal& who, Role role, const std::string& name,
                                  int64_t expires_unix_ms = 0);
  Result<std::vector<TokenInfo>> ListTokens(const Principal& who) const;
  // Revokes the token with this id (TokenInfo::id); NotFound when there is none.
  Result<TokenInfo> RevokeToken(const Principal& who, const std::string& id);
  Result<std::vector<store::AuditRow>> ListAudit(const Principal& who, size_t limit) const;
  // Creates an admin token named `name` if no admin token exists; returns it (nullopt if one
  // existed already).
  Result<std::optional<std::string>> BootstrapAdminToken(const std::string& name);
  // The agent token of `up`'s local node: `previous` (the one `up` kept) while it still
  // authenticates as that node's agent, else a new one; a replaced `previous` is revoked by
  // its hash. No other token is touched (tokens are never removed by name).
  Result<std::string> LocalAgentToken(const std::string& node, const std::string& previous);
  Status SetPolicy(const Principal& who, const std::string& placement, const std::string& queue,
                   std::optional<bool> backfill);
  PolicySettings Policy() const;

  // A pass applies its decision in parts of this many actions, each as soon as it is decided
  // (the lock is let go between parts). A pass that hands parts over while it still decides
  // (more than this many actions) tells its observers of each part on a thread each, while the
  // rest is decided, applied and written (ObserverFeed).
  static constexpr size_t kPassPart = 4096;
  // One scheduling pass / one liveness check (the loops call these).
  PassStats RunSchedulingPass();
  int CheckNodeTimeouts();

  void AddObserver(ServerObserver* o);
  // Wakes the scheduling loop (after a submission or a job end).
  void Kick();

 private:
  struct NodeEntry {
    NodeInventory inv;
    bool drained = false;
    bool lost = false;
    MonoTime last_heartbeat{};
    int64_t last_heartbeat_ms = 0;
    int64_t registered_ms = 0;
    // Shared, immutable: a heartbeat swaps the pointer under mu_ (no deep copy of ~20 KB of JSON).
    std::shared_ptr<const std::string> samples = std::make_shared<const std::string>("[]");
    // Or, from the compact form, the latest second's samples (samples is then null).
    std::shared_ptr<const std::vector<GpuSample>> latest;
    // Raised by every registration: a pass's decision about this node is applied only if the
    // inventory it was computed on is still the node's.
    uint64_t generation = 0;
  };

  Server(store::Store* store, Clock* clock, ServerOptions options);
  Status Load();
  int64_t NowMs() const;
  // The report interval the compact form's nodes are told, for `nodes` registered nodes.
  int64_t ReportIntervalMs(size_t nodes) const;
  NodeStatus StatusOf(const NodeEntry& n, bool with_samples = true) const;
  // A job's whole row (at submission), and its change once stored.
  store::JobRow Row(const Job& j) const;
  store::JobStatusRow StatusRow(const Job& j) const;
  store::NodeRow Row(const NodeEntry& n) const;
  void Event(store::WriteBatch* b, const Job& j, const std::string& kind, const std::string& msg);
  // Whether a node's report is about the run of `j` now placed on `node` (same node, same
  // attempt), including a run that ended and is still sending its last log bytes.
  static bool CurrentRun(const Job& j, const std::string& node, const RunReport& r);
  // Waits for a write handed to the store under mu_.
  static Status Wait(std::shared_future<Status>& f) { return f.get(); }
  void Notify(std::span<const Job> changed);
  // Tells the observers of `changed` in the turn of `turn` (taken under mu_ where the jobs
  // changed; see told_).
  void NotifyInTurn(OrderedDelivery::Ticket& turn, std::vector<Job> changed);
  bool CanSee(const Principal& who, const Job& j) const;
  // A job's log file; a gang's part `rank` > 0 has its own.
  std::string LogPath(int64_t id, const std::string& stream, int32_t rank = 0) const;
  int64_t LogSize(int64_t id, const std::string& stream, int32_t rank = 0) const;
  void AppendLog(int64_t id, int32_t rank, const std::string& stream, int64_t offset,
                 const std::string& data);
  // What a node is told to start for `a` (the job's assignment, or one part of a gang).
  static LaunchOrder StartOrder(const Job& j, const Assignment& a);
  // The job's assignment for the pass's decision `pa` (a one-node job, or one part of a gang).
  static Assignment FromPass(pass::Grant pa);
  // Tells the node in `reply` to stop `j` (cancelling), with the preemption grace when `j` is
  // preempted.
  void TellToCancel(const Job& j, HeartbeatReply& reply) const;

  // Gangs (gang.cc). A gang's parts run and end on their own nodes; the job follows them:
  // running once any part runs, succeeded once every part exited 0. A part that fails, or whose
  // node is lost, stops the others (state cancelling) and, once every part has stopped, the
  // gang fails, or is requeued as a whole (node loss with on_node_loss requeue, preemption,
  // a requeue by the system). All of it is in the job's document, so it survives a restart.
  //
  // A node's report about its part of gang `j` (under mu_; the caller persists `j` when
  // `*changed`).
  void OnPartReport(Job& j, GangPart& part, const RunReport& r, const std::string& node,
                    HeartbeatReply& reply, store::WriteBatch& b, bool* changed);
  // A part of `j` its node no longer has (never started, or forgotten); under mu_.
  void OnPartMissing(Job& j, GangPart& part, const std::string& node, store::WriteBatch& b);
  // The node of a part of `j` was lost; under mu_.
  void OnPartLost(Job& j, GangPart& part, const std::string& node, store::WriteBatch& b);
  // After a part changed: stops the gang when a part failed or was lost, ends or requeues it
  // once every part has stopped, marks it succeeded once every part exited 0.
  void GangStep(Job& j, store::WriteBatch& b);
  // The parts of gang `j` from the pass's decision, each with its launcher environment
  // (protocol::GangEnv). FailedPrecondition when no master port is free on rank 0's node.
  Status AssignGang(Job& j, const std::vector<pass::Grant>& parts);
  void EndJob(Job& j, JobState state, const std::string& reason);
  // Keeps node_jobs_ in step with j's state and assignment; call after every such change.
  void Reindex(const Job& j);
  // Puts a job whose run ended without ending the job back in the queue (a new attempt), with
  // `why` as its reason; the run's logs are set aside when it may have started.
  void Requeue(Job& j, const std::string& why, bool may_have_started);
  // A job stopped to be requeued (preempted, or requeued by the system) whose process stopped,
  // or whose node was lost, goes back to the queue. Returns why it was stopped.
  std::string RequeueStopped(Job& j);
  // Runs `change` under mu_ on job `id` (NotFound if it does not exist or `who`, when given,
  // may not see it; FailedPrecondition if it has ended); if it wrote to the batch, persists it
  // with the job, then notifies observers and kicks the scheduler. Returns the job after.
  // Cancels and the system's actions (requeue, consolidation) all change jobs this way.
  Result<Job> ChangeUnendedJob(const Principal* who, int64_t id,
                               const std::function<Status(Job&, store::WriteBatch&)>& change);
  // An assigned job that has not started goes back to the queue at once, for `why`.
  void RequeueUnstarted(Job& j, const std::string& why, store::WriteBatch* b);
  static bool StoppingToRequeue(const Job& j) {
    return j.preempted_by != 0 || !j.stop_to_requeue.empty();
  }
  void Loop(bool scheduler);

  store::Store* store_;
  Clock* clock_;
  ServerOptions options_;
  void Audit(store::WriteBatch* b, const Principal& who, const std::string& action,
             const std::string& subject, const std::string& detail);
  // Hands out the next job id, first raising the durable high-water mark when it is reached.
  Result<int64_t> NextJobId();
  // The placement policy of a name (ServerOptions::make_placement).
  Result<std::unique_ptr<scheduler::PlacementPolicy>> MakePlacement(std::string_view name) const;

  TokenRegistry tokens_;
  // Job ids: next to hand out, and the durable mark below which every id may have been used
  // (store::Store::LoadJobIdMark). Ids are reserved kJobIdBlock at a time.
  static constexpr int64_t kJobIdBlock = 1000;
  std::mutex id_mu_;
  int64_t next_id_ = 1;      // guarded by id_mu_
  int64_t id_reserved_ = 0;  // guarded by id_mu_

  mutable std::mutex mu_;
  std::map<int64_t, Job> jobs_;                      // guarded by mu_
  std::set<int64_t> queued_;                         // guarded by mu_
  std::map<std::string, NodeEntry> nodes_;           // guarded by mu_
  MonoTime last_frag_sample_{};                      // guarded by mu_
  std::optional<Fragmentation> last_fragmentation_;  // guarded by mu_
  struct Totals {
    int64_t passes = 0, placed = 0, preempted = 0, oversubscribed = 0;
    double last_pass_seconds = 0;
    PassPhaseSeconds last_pass_phases;
    std::map<std::string, int64_t> ended;  // final state -> count
    // Heartbeat input refused: GPU samples by reason, log chunks of jobs that are not the
    // sending node's current run.
    std::map<std::string, int64_t> samples_refused;
    std::atomic<int64_t> log_chunks_refused{0};  // not guarded: counted outside mu_
  } totals_;                                     // guarded by mu_
  // Shared with a pass in progress, which orders its queue by the policy of its view.
  std::shared_ptr<const queue::QueuePolicy> queue_policy_;  // guarded by mu_
  std::map<int64_t, std::string> queue_reasons_;            // guarded by mu_: why still queued
  // Active (assigned/running/cancelling) jobs per node, so a heartbeat or a node listing costs
  // the node's jobs, not every job ever submitted (a gang is on every node of its parts).
  std::unordered_map<std::string, std::set<int64_t>> node_jobs_;     // guarded by mu_
  std::unordered_map<int64_t, std::vector<std::string>> job_nodes_;  // guarded by mu_

  ActivityTracker activity_{options_.activity_window};  // its own lock
  std::mutex policy_mu_;  // serializes SetPolicy (taken before pass_mu_)
  // One pass at a time; the pass (with the placement policies it keeps between passes) is
  // used without mu_, which a pass takes only to read its view and to apply its decision.
  std::mutex pass_mu_;                          // taken before mu_
  std::unique_ptr<pass::SchedulingPass> pass_;  // guarded by pass_mu_
  // What a pass reads of the nodes (inventory, drained, lost) changed: raised by a
  // registration, a drain or undrain, a node lost or back. A pass builds its node view again
  // only then; between, it reuses the one it kept (its activity filled in again each pass).
  uint64_t nodes_version_ = 0;                                  // guarded by mu_
  std::vector<pass::NodeView> view_nodes_;                      // guarded by pass_mu_
  std::unordered_map<std::string, uint64_t> view_generations_;  // guarded by pass_mu_
  std::optional<uint64_t> view_version_;  // guarded by pass_mu_: the nodes_version_ it was built at
  // The storage of the jobs' views, kept between passes (emptied after each): at 100,000 queued
  // jobs the views take tens of megabytes, and fresh memory each pass cost its page faults.
  std::vector<pass::JobView> view_active_, view_queued_;  // guarded by pass_mu_
  // The storage of a pass's parts' copies of the jobs they changed, handed back by whoever is
  // done with a part last (the store's writer or an observer's thread) and reused by the next
  // part (its own lock).
  std::shared_ptr<PartBuffers> part_buffers_;
  // Builds view_nodes_ and view_generations_ from nodes_ (mu_ held).
  void RebuildNodeView();
  std::mutex log_mu_;
  // Copy-on-write, so observers are called without a server lock: a heartbeat's observer work
  // (the efficiency engine's) must not serialize all heartbeats.
  mutable std::mutex observers_mu_;
  std::shared_ptr<const std::vector<ServerObserver*>> observers_ =
      std::make_shared<const std::vector<ServerObserver*>>();
  std::shared_ptr<const std::vector<ServerObserver*>> Observers() const;
  // The order the observers are told of job changes in: a ticket is taken under mu_ where the
  // jobs change, and the change is told in its turn (after the lock, and the durable write, are
  // let go). So a job that a heartbeat ends right after a long pass placed it reaches the
  // observers ended, not placed again by the pass's late news.
  OrderedDelivery told_;

  std::mutex loop_mu_;
  std::condition_variable loop_cv_;
  bool stopping_ = false;
  bool kicked_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace stoker::server
