#include "node/node_agent.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "protocol/limits.h"
#include "protocol/samples.h"

namespace stoker::node {
using protocol::json;

namespace {

int64_t FileSize(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? st.st_size : 0;
}

std::string ReadRange(const std::string& path, int64_t offset, size_t max) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  in.seekg(offset);
  std::string out(max, '\0');
  in.read(out.data(), static_cast<std::streamsize>(max));
  out.resize(static_cast<size_t>(std::max<std::streamsize>(0, in.gcount())));
  return out;
}

// A runner's phase as the protocol reports it.
protocol::RunPhase RunPhaseOf(runner::JobPhase p) {
  switch (p) {
    case runner::JobPhase::kStarting:
      return protocol::RunPhase::kStarting;
    case runner::JobPhase::kRunning:
      return protocol::RunPhase::kRunning;
    case runner::JobPhase::kExited:
      return protocol::RunPhase::kExited;
  }
  return protocol::RunPhase::kExited;
}

int64_t HostMemoryMib() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key == "MemTotal:") return kib / 1024;
  }
  return 0;
}

}  // namespace

protocol::NodeInventory BuildInventory(const std::string& name, GpuSource* source) {
  protocol::NodeInventory inv;
  inv.name = name;
  inv.cpu_milli = static_cast<int64_t>(::sysconf(_SC_NPROCESSORS_ONLN)) * 1000;
  inv.memory_mib = HostMemoryMib();
  if (source == nullptr) return inv;
  inv.simulated = source->simulated();
  inv.source = source->Describe();
  GpuSample s;
  for (uint32_t i = 0; i < source->DeviceCount(); ++i) {
    if (!source->Sample(i, &s).ok()) continue;
    protocol::GpuInfo g;
    g.index = s.id.index;
    g.uuid = s.id.uuid;
    g.model = s.id.name.empty() ? "unknown" : s.id.name;
    g.memory_mib = static_cast<int64_t>(s.memory_total_bytes.value_or(0) >> 20);
    g.mig_enabled = s.mig_enabled.value_or(false);
    if (s.id.minor.has_value()) g.minor = s.id.minor.value();
    for (const MigInstance& m : s.mig_instances) {
      g.mig.push_back(protocol::MigInfo{m.uuid, m.profile, m.slices});
    }
    inv.gpus.push_back(std::move(g));
  }
  return inv;
}

NodeAgent::NodeAgent(NodeOptions options, Clock* clock, protocol::NodeInventory inventory,
                     std::function<json()> samples)
    : options_(std::move(options)),
      clock_(clock),
      inventory_(std::move(inventory)),
      samples_(std::move(samples)),
      runner_(runner::RunnerOptions{.state_dir = options_.state_dir,
                                    .shim_argv = options_.shim_argv,
                                    .grace = options_.cancel_grace,
                                    .users = options_.users,
                                    .cgroups = options_.cgroups},
              clock),
      client_(options_.server_url, options_.token, 10, options_.ca_file) {
  report_interval_ = options_.heartbeat_interval;
  jitter_.seed(std::hash<std::string>{}(inventory_.name));
  client_.set_keep_alive(false);
  inventory_.isolation = options_.cgroups.Describe();
  if (!options_.address.empty()) inventory_.address = options_.address;
}

NodeAgent::NodeAgent(NodeOptions options, Clock* clock, protocol::NodeInventory inventory,
                     GpuSamplesFeed samples)
    : NodeAgent(std::move(options), clock, std::move(inventory), std::function<json()>()) {
  feed_ = std::move(samples);
}

protocol::RunReport NodeAgent::ReportFor(const runner::JobStatus& st) {
  protocol::RunReport r;
  r.id = std::stoll(st.job_id);
  r.attempt = st.attempt;
  r.phase = RunPhaseOf(st.phase);
  r.exit_code = st.exit_code;
  r.signal = st.signal;
  r.error = st.error;
  auto& [out_sent, err_sent] = sent_[r.id];
  const std::string dir = runner_.JobDir(st.job_id);
  r.stdout_offset = out_sent;
  r.stdout_data = ReadRange(dir + "/stdout.log", out_sent, options_.max_log_chunk);
  r.stderr_offset = err_sent;
  r.stderr_data = ReadRange(dir + "/stderr.log", err_sent, options_.max_log_chunk);
  r.logs_complete =
      st.phase == runner::JobPhase::kExited &&
      out_sent + static_cast<int64_t>(r.stdout_data.size()) >= FileSize(dir + "/stdout.log") &&
      err_sent + static_cast<int64_t>(r.stderr_data.size()) >= FileSize(dir + "/stderr.log");
  return r;
}

void NodeAgent::Sample() {
  if (!feed_.latest) return;
  protocol::SampleTick t{clock_->WallNow(), feed_.latest()};
  for (GpuSample& g : t.gpus) g.timestamp = t.at;
  pending_.push_back(std::move(t));
  // The server unreachable for long: the oldest seconds go first.
  const auto max = static_cast<size_t>(protocol::limits::kReportTicksMax);
  if (pending_.size() > max) pending_.erase(pending_.begin(), pending_.end() - max);
}

std::map<int64_t, std::string> NodeAgent::PhasesOf(
    const std::vector<runner::JobStatus>& polled) const {
  std::map<int64_t, std::string> out;
  for (const runner::JobStatus& st : polled) {
    if (st.job_id.empty() || st.job_id.find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    out[std::stoll(st.job_id)] = runner::JobPhaseName(st.phase);
  }
  return out;
}

Status NodeAgent::RunOnce() {
  Sample();
  return Send(runner_.Poll());
}

Status NodeAgent::Tick() {
  Sample();
  std::vector<runner::JobStatus> polled = runner_.Poll();
  if (failures_ > 0 && clock_->Now() < retry_at_) return last_error_;  // backing off
  const bool due = !feed_.latest || !registered_ || failures_ > 0 ||
                   clock_->Now() >= next_report_ || !launch_errors_.empty() ||
                   PhasesOf(polled) != reported_phases_;
  if (!due) return Status::Ok();
  return Send(polled);
}

// The compact form reports in this node's own slot of the interval: at a phase given by its
// name's hash, anchored on the wall clock. So the nodes of a cluster spread evenly over the
// interval whenever each heard it, and a node keeps its slot report after report: its reports
// come one interval apart, not an interval plus the report's round trip and the wait for the
// next one-second tick after it.
MonoTime NodeAgent::NextSlot() const {
  const int64_t every = std::max<int64_t>(
      1, std::chrono::duration_cast<std::chrono::milliseconds>(report_interval_).count());
  const int64_t wall =
      std::chrono::duration_cast<std::chrono::milliseconds>(clock_->WallNow().time_since_epoch())
          .count();
  const auto phase = static_cast<int64_t>(std::hash<std::string>{}(inventory_.name) %
                                          static_cast<uint64_t>(every));
  int64_t wait = ((phase - wall) % every + every) % every;
  if (wait == 0) wait = every;
  return clock_->Now() + std::chrono::milliseconds(wait);
}

Status NodeAgent::Send(const std::vector<runner::JobStatus>& polled) {
  Status s = Report(polled);
  if (s.ok()) {
    failures_ = 0;
    return s;
  }
  ++failures_;
  retry_at_ = clock_->Now() + RetryDelay();
  last_error_ = s;
  return s;
}

Duration NodeAgent::RetryDelay() {
  const Duration base = options_.heartbeat_interval;
  const Duration cap = std::max(report_interval_, base);
  Duration d = base;
  for (int i = 1; i < failures_ && d < cap; ++i) d *= 2;
  d = std::min(d, cap);
  // Between half and all of it.
  std::uniform_int_distribution<int64_t> half(0, d.count() / 2);
  return std::max(base, d - Duration(half(jitter_)));
}

Status NodeAgent::Report(const std::vector<runner::JobStatus>& polled) {
  if (!registered_) {
    STOKER_ASSIGN_OR_RETURN(
        client::HttpResult r,
        client_.Post("/api/v1/nodes/register", protocol::NodeInventoryToJson(inventory_)));
    STOKER_RETURN_IF_ERROR(client::StatusFromHttp(r).WithContext("register"));
    registered_ = true;
    identity_sent_ = false;
    spdlog::info("node {} registered with {}", inventory_.name, options_.server_url);
  }
  protocol::Heartbeat hb;
  for (const runner::JobStatus& st : polled) {
    if (st.job_id.find_first_not_of("0123456789") != std::string::npos) continue;
    hb.jobs.push_back(ReportFor(st));
  }
  for (const auto& [id, failed] : launch_errors_) {
    const auto& [attempt, err] = failed;
    protocol::RunReport r;
    r.id = id;
    r.attempt = attempt;
    r.phase = protocol::RunPhase::kExited;
    r.exit_code = 127;
    r.error = err;
    r.logs_complete = true;
    hb.jobs.push_back(r);
  }
  bool identity = false;
  if (feed_.latest) {
    // The GPUs' identity with the first report after registering, and whenever a GPU is not
    // the one registered at its index (the server then refuses its samples, and says so).
    identity = !identity_sent_;
    for (const protocol::SampleTick& t : pending_) {
      for (const GpuSample& g : t.gpus) {
        auto r = std::find_if(inventory_.gpus.begin(), inventory_.gpus.end(),
                              [&](const protocol::GpuInfo& x) { return x.index == g.id.index; });
        if (r == inventory_.gpus.end() || r->uuid != g.id.uuid) identity = true;
      }
    }
    hb.ticks_json = protocol::CompactTicksJson(pending_, identity);
  } else if (samples_) {
    hb.samples_json = samples_().dump();
  }
  STOKER_ASSIGN_OR_RETURN(client::HttpResult res,
                          client_.PostBody("/api/v1/nodes/" + inventory_.name + "/heartbeat",
                                           protocol::HeartbeatBody(hb)));
  if (res.status == 404) {
    registered_ = false;  // the server forgot us (new database): register again next round
    return Unavailable("node not registered on the server; re-registering");
  }
  STOKER_RETURN_IF_ERROR(client::StatusFromHttp(res).WithContext("heartbeat"));
  STOKER_ASSIGN_OR_RETURN(protocol::HeartbeatReply reply, protocol::ParseHeartbeatReply(res.body));
  ++reports_;
  pending_.clear();
  if (identity) identity_sent_ = true;
  reported_phases_ = PhasesOf(polled);
  if (feed_.latest && reply.report_interval_ms > 0) {
    report_interval_ = std::chrono::milliseconds(reply.report_interval_ms);
  }
  next_report_ = feed_.latest ? NextSlot() : clock_->Now() + report_interval_;
  // What the server now holds of each job's logs (it appended what we sent).
  for (const auto& [id, off] : reply.log_offsets) sent_[id] = off;
  for (int64_t id : reply.forget) {
    const std::string job = std::to_string(id);
    launch_errors_.erase(id);
    sent_.erase(id);
    if (Status s = runner_.Forget(job); !s.ok() && s.code() != StatusCode::kInvalidArgument) {
      spdlog::debug("forget job {}: {}", id, s.ToString());
    }
  }
  for (int64_t id : reply.cancel) {
    std::optional<Duration> grace;
    if (auto g = reply.cancel_grace_ms.find(id); g != reply.cancel_grace_ms.end()) {
      grace = std::chrono::milliseconds(g->second);
    }
    Status s = runner_.Cancel(std::to_string(id), grace);
    if (!s.ok() && s.code() != StatusCode::kNotFound)
      spdlog::debug("cancel job {}: {}", id, s.ToString());
  }
  for (const protocol::LaunchOrder& o : reply.start) {
    runner::LaunchSpec spec;
    spec.job_id = std::to_string(o.id);
    spec.argv = o.command;
    spec.env = o.env;
    spec.workdir = o.workdir;
    spec.user = o.user;
    spec.attempt = o.attempt;
    spec.cuda_visible_devices = o.has_gpu ? o.cuda_visible_devices : "";
    spec.cpu_milli = o.cpu_milli;
    spec.memory_mib = o.memory_mib;
    for (uint32_t index : o.gpu_indices) {
      auto g = std::find_if(inventory_.gpus.begin(), inventory_.gpus.end(),
                            [&](const protocol::GpuInfo& x) { return x.index == index; });
      if (g != inventory_.gpus.end()) spec.gpu_minors.push_back(g->minor.value_or(g->index));
    }
    Status s = runner_.Launch(spec);
    if (s.ok()) {
      spdlog::info("job {} started: {}", o.id, o.command.empty() ? "" : o.command[0]);
    } else if (s.code() != StatusCode::kAlreadyExists) {
      spdlog::warn("job {} could not start: {}", o.id, s.ToString());
      launch_errors_[o.id] = {o.attempt, s.message()};
    }
  }
  return Status::Ok();
}

void NodeAgent::Run(const std::atomic<bool>* stop) {
  MonoTime next = clock_->Now();
  bool was_down = false;
  while (!stop->load()) {
    Status s = Tick();
    if (!s.ok()) {
      if (!was_down)
        spdlog::warn("node {}: {} (jobs keep running; retrying)", inventory_.name, s.ToString());
      was_down = true;
    } else if (was_down) {
      spdlog::info("node {}: server reachable again", inventory_.name);
      was_down = false;
    }
    next += options_.heartbeat_interval;
    const MonoTime now = clock_->Now();
    if (next < now) next = now;
    clock_->SleepUntil(next);
  }
}

}  // namespace stoker::node
