#include "sim/jobs_sim.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "scheduler/pass/gpu_commitments.h"
#include "scheduler/registry.h"

namespace stoker::sim {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return a <= 0 ? 0 : (a + b - 1) / b; }

// numpy-style linear interpolation between closest ranks.
double Quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(sorted.size() - 1, lo + 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
}

Percentiles Summarise(std::vector<double> v) {
  Percentiles p;
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  p.mean = sum / static_cast<double>(v.size());
  p.median = Quantile(v, 0.5);
  p.p99 = Quantile(v, 0.99);
  p.max = v.back();
  return p;
}

}  // namespace

Percentiles SummarisePercentiles(std::vector<double> values) {
  return Summarise(std::move(values));
}

std::vector<SimJobSpec> JobsFromTrace(const Trace& trace) {
  std::vector<SimJobSpec> out;
  out.reserve(trace.jobs.size());
  for (const auto& t : trace.jobs) {
    SimJobSpec s;
    s.name = t.id;
    s.submit_ms = t.submit_ms;
    s.duration_ms = t.duration_ms;
    s.gpus = t.gpus;
    s.min_gpus = t.min_gpus;
    s.priority = t.priority;
    out.push_back(std::move(s));
  }
  return out;
}

JobsSim::JobsSim(std::vector<SimJobSpec> jobs, std::unique_ptr<queue::QueuePolicy> queue_policy,
                 JobsSimOptions options)
    : policy_(std::move(queue_policy)), options_(std::move(options)), waiting_(*policy_) {
  jobs_.reserve(jobs.size());
  for (auto& spec : jobs) {
    SimJob j;
    j.spec = std::move(spec);
    jobs_.push_back(std::move(j));
  }
}

Result<std::unique_ptr<JobsSim>> JobsSim::Create(std::vector<SimJobSpec> jobs,
                                                 std::unique_ptr<queue::QueuePolicy> queue_policy,
                                                 JobsSimOptions options) {
  if (!queue_policy) return InvalidArgument("jobs sim: no queue policy");
  std::unique_ptr<JobsSim> sim(
      new JobsSim(std::move(jobs), std::move(queue_policy), std::move(options)));
  STOKER_RETURN_IF_ERROR(sim->Init());
  return sim;
}

Status JobsSim::Init() {
  const ClusterShape& c = options_.cluster;
  if (c.nodes <= 0 || c.gpus_per_node <= 0 || c.gpus_per_node > scheduler::kMaxGpusPerNode) {
    return InvalidArgument("cluster: need at least one node and 1.." +
                           std::to_string(scheduler::kMaxGpusPerNode) + " GPUs per node");
  }
  STOKER_ASSIGN_OR_RETURN(const scheduler::GpuModelId model, cluster_.models().Intern("sim-gpu"));
  for (int n = 0; n < c.nodes; ++n) {
    scheduler::NodeSpec spec;
    spec.name = "node-" + std::to_string(n);
    // Jobs in these traces ask only for GPUs; CPU and memory are sized so they never bind.
    spec.cpu_milli = int64_t{c.gpus_per_node} * 16'000;
    spec.memory_mib = int64_t{c.gpus_per_node} * 128 * 1024;
    spec.num_gpus = c.gpus_per_node;
    spec.gpu_model = model;
    STOKER_ASSIGN_OR_RETURN(const int32_t id, cluster_.AddNode(spec));
    (void)id;
  }
  const std::string name = options_.placement_policy.empty()
                               ? std::string(scheduler::kDefaultPolicyName)
                               : options_.placement_policy;
  options_.placement_policy = name;
  STOKER_ASSIGN_OR_RETURN(auto placement,
                          scheduler::CreatePlacementPolicy(name, options_.placement_config));
  pass_ = std::make_unique<pass::SchedulingPass>(std::move(placement));
  for (size_t i = 0; i < jobs_.size(); ++i) {
    SimJobSpec& s = jobs_[i].spec;
    const std::string where = "job " + std::to_string(i) + " ('" + s.name + "')";
    if (s.duration_ms <= 0) return InvalidArgument(where + ": duration must be positive");
    if (s.submit_ms < 0) return InvalidArgument(where + ": submission time is negative");
    if (s.gpus <= 0) return InvalidArgument(where + ": gpus must be positive");
    if (s.min_gpus <= 0) s.min_gpus = s.gpus;
    if (s.min_gpus > s.gpus) return InvalidArgument(where + ": min_gpus exceeds gpus");
    if (s.gpu_util && (*s.gpu_util < 0 || *s.gpu_util > 1)) {
      return InvalidArgument(where + ": gpu_util must be within 0..1");
    }
    // GPU-ms; guarded against overflow for absurd inputs (~290,000 GPU-years).
    if (s.duration_ms > std::numeric_limits<int64_t>::max() / 4 / s.gpus) {
      return InvalidArgument(where + ": duration x gpus too large");
    }
    if (s.idle_tail_ms < 0 || s.idle_tail_ms > s.duration_ms) {
      return InvalidArgument(where + ": idle_tail_ms must be within 0..duration");
    }
    if (coloc() && s.preemptible && s.gpus != 1) {
      return InvalidArgument(
          where + ": a preemptible job shares one GPU (gpus must be 1 with co-location)");
    }
  }
  if (coloc()) {
    const int64_t milli = options_.colocation->preemptible_milli();
    if (milli <= 0 || milli > 1000)
      return InvalidArgument("colocation: ratio must be above 1000 and at most 2000 milli-GPU");
    if (options_.colocation->grace_ms < 0)
      return InvalidArgument("colocation: grace must not be negative");
    if (!(options_.colocation->shared_speed > 0 && options_.colocation->shared_speed <= 1.0))
      return InvalidArgument("colocation: shared speed must be above 0 and at most 1");
    gpu_host_.assign(static_cast<size_t>(cluster_.total_gpus()), kNoJob);
    gpu_pre_.assign(static_cast<size_t>(cluster_.total_gpus()), {});
  }
  views_.resize(jobs_.size());
  for (size_t i = 0; i < jobs_.size(); ++i) {
    pass::JobView& v = views_[i];
    v.id = static_cast<int64_t>(i);
    v.gpus = jobs_[i].spec.gpus;
    v.min_gpus = jobs_[i].spec.min_gpus;
    v.priority = jobs_[i].spec.priority;
    v.submit_ms = jobs_[i].spec.submit_ms;
  }
  return Status::Ok();
}

queue::JobView JobsSim::View(queue::JobId id) const {
  const SimJob& j = jobs_[id];
  queue::JobView v;
  v.id = id;
  v.submit_ms = j.spec.submit_ms;
  v.duration_ms = j.spec.duration_ms;
  v.remaining_ms = CeilDiv(j.remaining_work, j.spec.gpus);
  v.attained_gpu_ms = j.attained_gpu_ms;
  v.gpus = j.spec.gpus;
  v.min_gpus = j.spec.min_gpus;
  v.priority = j.spec.priority;
  v.running = j.state == JobState::kRunning;
  return v;
}

void JobsSim::UpdateProgress(SimJob& job) const {
  // last_update_ms is in the future while a guaranteed job waits out its victims' grace period.
  if (job.state != JobState::kRunning || now_ <= job.last_update_ms) return;
  const SimMs dt = now_ - job.last_update_ms;
  int64_t service = dt * job.alloc_gpus;
  if (job.gpu >= 0) {
    service = std::llround(static_cast<double>(dt) * job.rate);
  } else if (job.host_rate < 1.0) {
    service = std::llround(static_cast<double>(service) * job.host_rate);
  }
  job.remaining_work = std::max<int64_t>(0, job.remaining_work - service);
  job.attained_gpu_ms += service;
  job.last_update_ms = now_;
}

void JobsSim::Notify(JobEventKind kind, queue::JobId id) {
  for (SimObserver* o : observers_) o->OnJobEvent(now_, kind, id, *this);
}

void JobsSim::Enqueue(queue::JobId id) {
  SimJob& j = jobs_[id];
  j.state = JobState::kWaiting;
  j.waiting_since_ms = now_;
  views_[id].work_gpu_ms = j.remaining_work;
  if (coloc() && j.spec.preemptible) {
    pre_waiting_.insert({j.spec.submit_ms, id});
    pre_scan_dirty_ = true;
    return;
  }
  waiting_.Push(View(id));
}

void JobsSim::MarkInfeasible(queue::JobId id) {
  waiting_.Remove(id);
  jobs_[id].state = JobState::kInfeasible;
  Notify(JobEventKind::kInfeasible, id);
}

Result<pass::Decision> JobsSim::RunPass(pass::KeptCluster kept) {
  kept.cluster = &cluster_;
  kept.gpus_per_node = options_.cluster.gpus_per_node;
  kept.jobs = views_;
  pass::PassInput in;
  in.kept = &kept;
  pass::Decision d = pass_->Run(in, *policy_, pass::PassOptions{});
  // What the pass placed is allocated on cluster_ already: the allocation counts all of it
  // before the starts are told, so observers see the cluster and the allocation agree (the
  // decision is one instant's).
  for (const pass::Action& act : d.actions) allocated_gpus_ += act.gpus;
  // An EASY reservation is told before the jobs that start behind it.
  if (d.reserved_at_ms) {
    for (SimObserver* o : observers_) {
      o->OnReservation(now_, static_cast<queue::JobId>(kept.head), *d.reserved_at_ms);
    }
  }
  for (pass::Action& act : d.actions) {
    const auto id = static_cast<queue::JobId>(act.job);
    if (act.kind == pass::Action::Kind::kInfeasible) {
      MarkInfeasible(id);
    } else {
      STOKER_RETURN_IF_ERROR(Start(id, std::move(act.placed), act.gpus));
    }
  }
  if (!d.status.ok()) return d.status.WithContext("jobs sim");
  return d;
}

Status JobsSim::Start(queue::JobId id, std::vector<scheduler::Placement> placements, int gpus) {
  SimJob& j = jobs_[id];
  waiting_.Remove(id);
  j.state = JobState::kRunning;
  j.alloc_gpus = gpus;
  j.host_rate = 1.0;
  j.placements = std::move(placements);
  // Co-location: the placement saw only guaranteed work; preemptible jobs on the chosen GPUs are
  // preempted with the policy's grace period, and the guaranteed job runs once they are gone.
  SimMs delay = 0;
  std::vector<int32_t> gpu_ids;
  if (coloc()) {
    gpu_ids = GpusOf(j.placements);
    // The pass's preemption rule on each GPU the job takes (no guaranteed work there: the
    // placement found it free), its preemptible jobs all movable.
    std::vector<queue::JobId> evict_now;
    const SimMs grace = options_.colocation->grace_ms;
    const int64_t share = options_.colocation->preemptible_milli();
    for (int32_t g : gpu_ids) {
      if (gpu_pre_[g].empty()) continue;
      std::vector<pass::ShareHolder> holders;
      for (queue::JobId p : gpu_pre_[g]) {
        holders.push_back(
            pass::ShareHolder{static_cast<int64_t>(p), share, true, jobs_[p].active_from_ms});
      }
      const auto victims = pass::ShareVictims(std::move(holders), scheduler::kMilliPerGpu);
      if (!victims) continue;
      for (int64_t v64 : *victims) {
        const auto v = static_cast<queue::JobId>(v64);
        SimJob& vj = jobs_[v];
        if (!vj.evicting) {
          vj.evicting = true;
          vj.evict_at_ms = now_ + grace;
          if (grace == 0) {
            evict_now.push_back(v);
          } else {
            PushEvent(Event{vj.evict_at_ms, 3, v, vj.epoch});
          }
        }
        delay = std::max(delay, vj.evict_at_ms - now_);
      }
    }
    for (int32_t g : gpu_ids) gpu_host_[g] = id;
    for (queue::JobId v : evict_now) EndPreemptible(v, /*finished=*/false);
  }
  j.active_from_ms = now_ + delay;
  if (j.first_start_ms < 0) j.first_start_ms = now_ + delay;
  j.waiting_ms += now_ + delay - j.waiting_since_ms;
  j.last_update_ms = now_ + delay;
  ++j.epoch;
  running_.push_back(id);
  ScheduleJobEvents(id);
  for (int32_t g : gpu_ids) Retime(g);
  Notify(JobEventKind::kStart, id);
  return Status::Ok();
}

void JobsSim::PushEvent(const Event& e) {
  events_.push_back(e);
  std::push_heap(events_.begin(), events_.end(), std::greater<>());
}

void JobsSim::ScheduleJobEvents(queue::JobId id) {
  const SimJob& j = jobs_[id];
  const SimMs base = std::max(now_, j.last_update_ms);  // after a grace period, if any
  const SimMs finish = base + RunMs(j, j.remaining_work);
  PushEvent(Event{finish, 0, id, j.epoch});
  if (auto next = policy_->NextKeyChangeGpuMs(View(id))) {
    const SimMs at = base + RunMs(j, *next - j.attained_gpu_ms);
    if (at < finish) PushEvent(Event{at, 1, id, j.epoch});
  }
  // Co-location: the moment the job's GPUs go idle, co-located jobs get all of them.
  const int64_t tail = j.spec.idle_tail_ms * j.spec.gpus;
  if (coloc() && tail > 0 && j.remaining_work > tail) {
    PushEvent(Event{base + RunMs(j, j.remaining_work - tail), 2, id, j.epoch});
  }
}

SimMs JobsSim::RunMs(const SimJob& job, int64_t work) const {
  if (job.host_rate >= 1.0) return CeilDiv(work, job.alloc_gpus);
  if (work <= 0) return 0;
  return static_cast<SimMs>(
      std::ceil(static_cast<double>(work) / (static_cast<double>(job.alloc_gpus) * job.host_rate)));
}

std::vector<int32_t> JobsSim::GpusOf(const std::vector<scheduler::Placement>& placements) const {
  std::vector<int32_t> out;
  const int32_t per_node = options_.cluster.gpus_per_node;
  for (const auto& p : placements) {
    for (uint8_t k = 0; k < p.num_gpus; ++k) out.push_back(p.node * per_node + p.gpus[k].gpu);
  }
  return out;
}

int64_t JobsSim::CommittedMilli(int32_t gpu) const {
  return (gpu_host_[gpu] != kNoJob ? scheduler::kMilliPerGpu : 0) +
         options_.colocation->preemptible_milli() * static_cast<int64_t>(gpu_pre_[gpu].size());
}

int64_t JobsSim::GpuLoadMilli(int32_t gpu) const {
  if (!coloc()) return 0;
  const queue::JobId h = gpu_host_[gpu];
  const int64_t host = h != kNoJob && now_ >= jobs_[h].active_from_ms ? 1000 : 0;
  return host +
         options_.colocation->preemptible_milli() * static_cast<int64_t>(gpu_pre_[gpu].size());
}

double JobsSim::SpareActivity(int32_t gpu) const {
  if (!coloc()) return 0;
  const queue::JobId h = gpu_host_[gpu];
  if (h == kNoJob) return 1.0;
  const SimJob& j = jobs_[h];
  if (now_ < j.active_from_ms) return 1.0;  // holds the GPU but waits out the grace period
  int64_t remaining = j.remaining_work;
  if (now_ > j.last_update_ms) {
    const int64_t full = (now_ - j.last_update_ms) * j.alloc_gpus;
    remaining -= j.host_rate < 1.0 ? std::llround(static_cast<double>(full) * j.host_rate) : full;
  }
  if (remaining <= j.spec.idle_tail_ms * j.spec.gpus) return 1.0;  // in its idle tail
  return 1.0 - j.spec.gpu_util.value_or(1.0);
}

void JobsSim::RetimeHost(queue::JobId id) {
  SimJob& j = jobs_[id];
  if (j.state != JobState::kRunning || j.gpu >= 0) return;
  UpdateProgress(j);
  bool shared = false;
  // Waiting out a grace period or in its idle tail, the job has nothing to slow down.
  if (now_ >= j.active_from_ms && j.remaining_work > j.spec.idle_tail_ms * j.spec.gpus) {
    for (int32_t g : GpusOf(j.placements)) shared |= !gpu_pre_[g].empty();
  }
  const double rate = shared ? options_.colocation->shared_speed : 1.0;
  if (rate == j.host_rate) return;
  j.host_rate = rate;
  ++j.epoch;
  ScheduleJobEvents(id);
}

void JobsSim::Retime(int32_t gpu) {
  pre_scan_dirty_ = true;
  if (options_.colocation->shared_speed < 1.0 && gpu_host_[gpu] != kNoJob) {
    RetimeHost(gpu_host_[gpu]);
  }
  const auto& pre = gpu_pre_[gpu];
  if (pre.empty()) return;
  // Co-located jobs split what the guaranteed job leaves; the guaranteed job is not slowed.
  const double rate = SpareActivity(gpu) / static_cast<double>(pre.size());
  for (queue::JobId p : pre) {
    SimJob& j = jobs_[p];
    UpdateProgress(j);
    j.rate = rate;
    ++j.epoch;
    if (rate > 1e-9) {  // below that the job waits for the next change (no overflow)
      const double left = std::ceil(static_cast<double>(j.remaining_work) / rate);
      PushEvent(Event{now_ + static_cast<SimMs>(left), 0, p, j.epoch});
    }
  }
}

void JobsSim::ReleaseHost(queue::JobId id, const std::vector<scheduler::Placement>& placements) {
  for (int32_t g : GpusOf(placements)) {
    if (gpu_host_[g] != id) continue;  // already taken by a job started in the same round
    gpu_host_[g] = kNoJob;
    Retime(g);
  }
}

void JobsSim::SchedulePreemptible() {
  if (!coloc() || pre_waiting_.empty() || !pre_scan_dirty_) return;
  const CoLocation& co = *options_.colocation;
  const int64_t milli = co.preemptible_milli();
  const auto n = static_cast<int32_t>(gpu_pre_.size());
  while (!pre_waiting_.empty()) {
    // The GPU where the job would run fastest (most spare activity per co-located job); the
    // pass's admission decides whether it may go there at all. Ties go to the highest index:
    // placement policies break ties toward low node ids, so guaranteed work lands there less often.
    int32_t best = -1;
    double best_rate = 0;
    for (int32_t g = n - 1; g >= 0; --g) {
      const double rate = SpareActivity(g) / static_cast<double>(gpu_pre_[g].size() + 1);
      if (rate <= best_rate) continue;
      if (!pass::AdmitsPreemptible(CommittedMilli(g), milli, co.ratio_milli)) continue;
      best = g;
      best_rate = rate;
      if (rate >= 1.0) break;
    }
    if (best < 0) {
      pre_scan_dirty_ = false;  // nothing changes until a GPU does
      return;
    }
    StartPreemptible(pre_waiting_.begin()->second, best);
  }
}

void JobsSim::StartPreemptible(queue::JobId id, int32_t gpu) {
  SimJob& j = jobs_[id];
  pre_waiting_.erase({j.spec.submit_ms, id});
  j.state = JobState::kRunning;
  j.gpu = gpu;
  j.alloc_gpus = 0;  // a share, outside the whole-GPU allocation
  if (j.first_start_ms < 0) j.first_start_ms = now_;
  j.waiting_ms += now_ - j.waiting_since_ms;
  j.last_update_ms = now_;
  j.active_from_ms = now_;
  j.attained_at_run_start = j.attained_gpu_ms;
  gpu_pre_[gpu].push_back(id);
  ++pre_running_;
  Retime(gpu);
  Notify(JobEventKind::kStart, id);
}

void JobsSim::EndPreemptible(queue::JobId id, bool finished) {
  SimJob& j = jobs_[id];
  UpdateProgress(j);
  const int32_t gpu = j.gpu;
  auto& on = gpu_pre_[gpu];
  on.erase(std::find(on.begin(), on.end(), id));
  --pre_running_;
  j.gpu = -1;
  j.evicting = false;
  ++j.epoch;
  if (finished) {
    j.remaining_work = 0;
    j.state = JobState::kDone;
    j.finish_ms = now_;
  } else {
    // Best-effort jobs are not assumed to checkpoint: the run restarts from scratch.
    const int64_t lost = j.attained_gpu_ms - j.attained_at_run_start;
    j.remaining_work += lost + options_.preemption_overhead_ms;
    j.lost_gpu_ms += lost;
    ++j.preemptions;
    Enqueue(id);
  }
  Retime(gpu);
  Notify(finished ? JobEventKind::kFinish : JobEventKind::kPreempt, id);
}

Status JobsSim::Preempt(queue::JobId id, bool released) {
  SimJob& j = jobs_[id];
  UpdateProgress(j);
  if (!released) {
    for (const auto& p : j.placements) STOKER_RETURN_IF_ERROR(cluster_.Release(p));
    allocated_gpus_ -= j.alloc_gpus;
  }
  if (coloc()) ReleaseHost(id, j.placements);
  j.placements.clear();
  j.alloc_gpus = 0;
  j.remaining_work += options_.preemption_overhead_ms * j.spec.gpus;
  ++j.preemptions;
  ++j.epoch;
  running_.erase(std::find(running_.begin(), running_.end(), id));
  Enqueue(id);
  Notify(JobEventKind::kPreempt, id);
  return Status::Ok();
}

Status JobsSim::Finish(queue::JobId id) {
  SimJob& j = jobs_[id];
  UpdateProgress(j);
  j.remaining_work = 0;
  for (const auto& p : j.placements) STOKER_RETURN_IF_ERROR(cluster_.Release(p));
  if (coloc()) ReleaseHost(id, j.placements);
  j.placements.clear();
  allocated_gpus_ -= j.alloc_gpus;
  j.alloc_gpus = 0;
  j.state = JobState::kDone;
  j.finish_ms = now_;
  ++j.epoch;
  running_.erase(std::find(running_.begin(), running_.end(), id));
  Notify(JobEventKind::kFinish, id);
  return Status::Ok();
}

Status JobsSim::Schedule() {
  ++rounds_;
  const int64_t total = cluster_.total_gpus();
  if (policy_->preemptive() && !waiting_.empty() && !running_.empty()) {
    std::vector<queue::RunningEntry> entries;
    entries.reserve(running_.size());
    const queue::QueueKey best_waiting = waiting_.begin()->key;
    bool contested = false;
    for (queue::JobId r : running_) {
      UpdateProgress(jobs_[r]);
      const queue::QueueKey k = policy_->Key(View(r));
      contested |= best_waiting < k;
      entries.push_back({k, r, jobs_[r].alloc_gpus});
    }
    // Only when some waiting job outranks a running one can the plan preempt anything.
    if (contested) {
      const queue::PreemptionPlan plan = queue::PlanPreemption(std::move(entries), waiting_, total);
      // The plan counts GPUs; the cluster has nodes. Release the victims tentatively, start what
      // the topology allows, then put back every victim whose GPUs are still free: only jobs
      // whose GPUs were really taken are preempted (otherwise a gang that does not fit would
      // evict the same jobs at every round).
      for (queue::JobId v : plan.preempt) {
        for (const auto& p : jobs_[v].placements) STOKER_RETURN_IF_ERROR(cluster_.Release(p));
        allocated_gpus_ -= jobs_[v].alloc_gpus;
      }
      // The plan's starts (distinct waiting jobs) in its order, through the scheduling pass,
      // which goes on past a job that does not fit, as the plan does.
      const std::vector<int64_t> starts(plan.start.begin(), plan.start.end());
      pass::KeptCluster kept;
      kept.order = starts;
      kept.blocked = pass::Blocked::kSkip;
      STOKER_RETURN_IF_ERROR(RunPass(std::move(kept)).status());
      for (queue::JobId v : plan.preempt) {
        SimJob& j = jobs_[v];
        size_t restored = 0;
        while (restored < j.placements.size() && cluster_.Allocate(j.placements[restored]).ok())
          ++restored;
        if (restored == j.placements.size()) {
          allocated_gpus_ += j.alloc_gpus;
          continue;
        }
        for (size_t i = 0; i < restored; ++i)
          STOKER_RETURN_IF_ERROR(cluster_.Release(j.placements[i]));
        STOKER_RETURN_IF_ERROR(Preempt(v, /*released=*/true));
      }
    }
  }
  // Fill in key order, through the scheduling pass. With EASY the first job that cannot start
  // gets a reservation; otherwise it blocks the rest under non-preemptive policies (strict order,
  // as Helios' FIFO/SJF), while preemptive policies skip it like their capacity plan does
  // (Helios' SRTF, Tiresias).
  const bool skip_blocked = policy_->preemptive() && options_.backfill == BackfillMode::kNone;
  pass::KeptCluster kept;
  kept.queue = &waiting_;
  kept.blocked = skip_blocked ? pass::Blocked::kSkip : pass::Blocked::kStop;
  STOKER_ASSIGN_OR_RETURN(const pass::Decision d, RunPass(std::move(kept)));
  if (d.blocked && options_.backfill == BackfillMode::kEasy) {
    STOKER_RETURN_IF_ERROR(EasyBackfill(static_cast<queue::JobId>(*d.blocked)));
  }
  SchedulePreemptible();
  return Status::Ok();
}

Status JobsSim::EasyBackfill(queue::JobId head) {
  // The reservation and the backfill behind it are the scheduling pass's; it needs when each
  // running job is expected to end.
  pass::KeptCluster kept;
  kept.queue = &waiting_;
  kept.blocked = pass::Blocked::kBackfill;
  kept.head = static_cast<int64_t>(head);
  kept.now_ms = now_;
  kept.running.reserve(running_.size());
  for (queue::JobId r : running_) {
    UpdateProgress(jobs_[r]);
    kept.running.push_back(pass::RunningEnd{now_ + RunMs(jobs_[r], jobs_[r].remaining_work),
                                            static_cast<int64_t>(r), &jobs_[r].placements});
  }
  return RunPass(std::move(kept)).status();
}

void JobsSim::RecordAllocation() {
  if (!alloc_changes_.empty() && alloc_changes_.back().second == allocated_gpus_) return;
  if (!alloc_changes_.empty() && alloc_changes_.back().first == now_) {
    alloc_changes_.back().second = allocated_gpus_;
    return;
  }
  alloc_changes_.emplace_back(now_, allocated_gpus_);
}

Result<JobsSimReport> JobsSim::Run() {
  std::vector<queue::JobId> order(jobs_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](queue::JobId a, queue::JobId b) {
    return jobs_[a].spec.submit_ms < jobs_[b].spec.submit_ms;
  });
  const SimMs origin = order.empty() ? 0 : jobs_[order.front()].spec.submit_ms;
  now_ = origin;
  RecordAllocation();
  size_t next_arrival = 0;
  SimMs next_tick =
      options_.tick_ms > 0 ? origin + options_.tick_ms : std::numeric_limits<SimMs>::max();
  const size_t progress_every = std::max<size_t>(1, order.size() / 1000);
  for (SimJob& j : jobs_) j.remaining_work = j.spec.duration_ms * j.spec.gpus;

  while (true) {
    const bool work_left = next_arrival < order.size() || !running_.empty() || !waiting_.empty() ||
                           pre_running_ > 0 || !pre_waiting_.empty();
    SimMs t = std::numeric_limits<SimMs>::max();
    if (next_arrival < order.size()) t = jobs_[order[next_arrival]].spec.submit_ms;
    if (!events_.empty()) t = std::min(t, events_.front().t);
    // Nothing left that can change the state (ticks alone cannot start a job).
    if (!work_left || t == std::numeric_limits<SimMs>::max()) break;
    if (options_.tick_ms > 0) t = std::min(t, next_tick);
    if (t > now_) {
      for (SimObserver* o : observers_) o->OnAdvance(now_, t, *this);
      now_ = t;
    }
    // Completions first, so that arrivals at the same instant see the freed GPUs.
    while (!events_.empty() && events_.front().t == now_) {
      std::pop_heap(events_.begin(), events_.end(), std::greater<>());
      const Event e = events_.back();
      events_.pop_back();
      ++events_processed_;
      const SimJob& j = jobs_[e.id];
      if (j.state != JobState::kRunning) continue;  // stale
      if (e.kind == 3) {  // a preemptible job's grace period ends (unless it finished or moved)
        if (j.evicting && j.evict_at_ms == now_) EndPreemptible(e.id, /*finished=*/false);
        continue;
      }
      if (j.epoch != e.epoch) continue;  // stale
      if (e.kind == 0 && j.gpu >= 0) {
        EndPreemptible(e.id, /*finished=*/true);
      } else if (e.kind == 0) {
        STOKER_RETURN_IF_ERROR(Finish(e.id));
      } else if (e.kind == 2) {
        for (int32_t g : GpusOf(j.placements)) Retime(g);
      }
      // kind 1 (a LAS threshold crossed): nothing to do but the scheduling round below.
    }
    while (next_arrival < order.size() && jobs_[order[next_arrival]].spec.submit_ms == now_) {
      const queue::JobId id = order[next_arrival++];
      ++events_processed_;
      Notify(JobEventKind::kArrive, id);
      SimJob& j = jobs_[id];
      j.waiting_since_ms = now_;
      const int per_node = options_.cluster.gpus_per_node;
      // Co-located jobs never go through the placement policy, so they are not part of the
      // workload it learns from.
      for (int left = j.spec.gpus; left > 0 && !(coloc() && j.spec.preemptible); left -= per_node) {
        pass_->placement().Observe(scheduler::Request::WholeGpus(std::min(left, per_node), 0, 0));
      }
      if (j.spec.min_gpus > cluster_.total_gpus()) {
        j.state = JobState::kInfeasible;
        Notify(JobEventKind::kInfeasible, id);
        continue;
      }
      Enqueue(id);
      if (options_.progress && next_arrival % progress_every == 0) {
        options_.progress(static_cast<double>(next_arrival) / static_cast<double>(order.size()));
      }
    }
    if (options_.tick_ms > 0 && now_ >= next_tick) {
      for (SimObserver* o : observers_) o->OnTick(now_, *this);
      next_tick = now_ + options_.tick_ms;
    }
    STOKER_RETURN_IF_ERROR(Schedule());
    RecordAllocation();
  }
  if (!waiting_.empty() || !pre_waiting_.empty()) {
    return Internal("jobs sim: " + std::to_string(waiting_.size() + pre_waiting_.size()) +
                    " jobs still waiting on an idle cluster (scheduler made no progress)");
  }
  if (options_.progress) options_.progress(1.0);

  finished_ = true;
  return SummariseRuns({this});
}

Result<JobsSimReport> SummariseRuns(const std::vector<const JobsSim*>& sims) {
  if (sims.empty()) return InvalidArgument("summarise: no simulations");
  JobsSimReport rep;
  const JobsSim& first = *sims.front();
  rep.queue_policy = std::string(first.policy_->Name());
  rep.placement_policy = first.options_.placement_policy;
  rep.backfill = first.options_.backfill == BackfillMode::kEasy ? "easy" : "none";
  rep.cluster = {0, first.options_.cluster.gpus_per_node};
  std::vector<double> jct, qd, wait;
  SimMs origin = std::numeric_limits<SimMs>::max();
  SimMs last_finish = std::numeric_limits<SimMs>::min();
  int64_t total = 0;
  // The allocation of all simulations summed: merge their change points as deltas.
  std::vector<std::pair<SimMs, int64_t>> deltas;
  for (const JobsSim* sim : sims) {
    if (!sim->finished_) return FailedPrecondition("summarise: a simulation has not run");
    if (sim->options_.cluster.gpus_per_node != rep.cluster.gpus_per_node) {
      rep.cluster.gpus_per_node = 0;  // mixed shapes: only the GPU total is meaningful
    }
    rep.cluster.nodes += sim->options_.cluster.nodes;
    total += sim->cluster_.total_gpus();
    rep.events += sim->events_processed_;
    rep.scheduling_rounds += sim->rounds_;
    rep.jobs_total += static_cast<int64_t>(sim->jobs_.size());
    for (const SimJob& j : sim->jobs_) {
      origin = std::min(origin, j.spec.submit_ms);
      rep.preemptions += j.preemptions;
      rep.lost_gpu_hours += static_cast<double>(j.lost_gpu_ms) / 3.6e6;
      if (j.state == JobState::kInfeasible) {
        ++rep.jobs_infeasible;
        continue;
      }
      ++rep.jobs_completed;
      jct.push_back(static_cast<double>(j.finish_ms - j.spec.submit_ms) / 1000.0);
      qd.push_back(static_cast<double>(j.first_start_ms - j.spec.submit_ms) / 1000.0);
      wait.push_back(static_cast<double>(j.waiting_ms) / 1000.0);
      last_finish = std::max(last_finish, j.finish_ms);
    }
    int64_t prev = 0;
    for (const auto& [t, v] : sim->alloc_changes_) {
      deltas.emplace_back(t, v - prev);
      prev = v;
    }
  }
  rep.total_gpus = total;
  if (origin == std::numeric_limits<SimMs>::max()) origin = 0;
  if (last_finish < origin) last_finish = origin;
  std::sort(deltas.begin(), deltas.end());
  std::vector<std::pair<SimMs, int64_t>> changes;  // (time, allocated) of the sum
  int64_t level = 0;
  for (const auto& [t, d] : deltas) {
    level += d;
    if (!changes.empty() && changes.back().first == t) {
      changes.back().second = level;
    } else {
      changes.emplace_back(t, level);
    }
  }
  rep.jct_s = Summarise(std::move(jct));
  rep.queue_delay_s = Summarise(std::move(qd));
  rep.waiting_s = Summarise(std::move(wait));
  const SimMs span = last_finish - origin;
  rep.makespan_s = static_cast<double>(span) / 1000.0;
  // Exact integral of the step function (GPU-ms in int64; fits for 1e6 GPUs over 290 years).
  int64_t used_gpu_ms = 0;
  for (size_t i = 0; i < changes.size(); ++i) {
    const SimMs begin = std::max(origin, changes[i].first);
    const SimMs end =
        std::min(last_finish, i + 1 < changes.size() ? changes[i + 1].first : last_finish);
    if (end > begin) used_gpu_ms += changes[i].second * (end - begin);
  }
  rep.gpu_hours_used = static_cast<double>(used_gpu_ms) / 3.6e6;
  rep.idle_gpu_hours = static_cast<double>(total * span - used_gpu_ms) / 3.6e6;
  rep.mean_allocation_pct =
      span > 0 ? 100.0 * static_cast<double>(used_gpu_ms) / static_cast<double>(total * span) : 0;
  // Downsample the step function into equal buckets (time-weighted means).
  const size_t buckets = std::max<size_t>(1, first.options_.allocation_series_points);
  if (span > 0) {
    const SimMs width = std::max<SimMs>(1, CeilDiv(span, static_cast<int64_t>(buckets)));
    size_t k = 0;
    for (SimMs b = origin; b < last_finish; b += width) {
      const SimMs be = std::min(last_finish, b + width);
      int64_t acc = 0;
      while (k + 1 < changes.size() && changes[k + 1].first <= b) ++k;
      for (size_t i = k; i < changes.size() && changes[i].first < be; ++i) {
        const SimMs s = std::max(b, changes[i].first);
        const SimMs e = std::min(be, i + 1 < changes.size() ? changes[i + 1].first : last_finish);
        if (e > s) acc += changes[i].second * (e - s);
      }
      rep.allocation.push_back(
          {b - origin, static_cast<double>(acc) / static_cast<double>(be - b)});
    }
  }
  return rep;
}

}  // namespace stoker::sim
