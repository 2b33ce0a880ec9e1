#include "telemetry/metrics_renderer.h"

#include "core/prometheus_text.h"
#include "telemetry/xid.h"

namespace stoker::telemetry {
namespace {
using protocol::FieldView;
using protocol::GpuScalarFields;
using protocol::ScalarFieldDef;
using protocol::ViewOf;

using prom::AppendLabel;
using prom::Type;

// The families of this exposition: HELP and TYPE before the first sample (core/prometheus_text).
class Family {
 public:
  Family(std::string& out, std::string_view name, std::string_view help, Type type)
      : f_(&out, name, help, type) {}
  void Add(std::string_view labels, std::string_view extra, double value) {
    f_.Add(labels, extra, value);
  }
  void AddUint(std::string_view labels, std::string_view extra, uint64_t value) {
    f_.Add(labels, extra, value);
  }

 private:
  prom::LazyFamily f_;
};

bool Fresh(const GpuState& g) { return g.have_sample && g.last_error.empty(); }

struct ClockReason {
  uint64_t bit;
  std::string_view name;
};
constexpr ClockReason kClockReasons[] = {
    {clock_event::kGpuIdle, "gpu_idle"},
    {clock_event::kApplicationsClocksSetting, "applications_clocks_setting"},
    {clock_event::kSwPowerCap, "sw_power_cap"},
    {clock_event::kHwSlowdown, "hw_slowdown"},
    {clock_event::kSyncBoost, "sync_boost"},
    {clock_event::kSwThermalSlowdown, "sw_thermal_slowdown"},
    {clock_event::kHwThermalSlowdown, "hw_thermal_slowdown"},
    {clock_event::kHwPowerBrakeSlowdown, "hw_power_brake_slowdown"},
    {clock_event::kDisplayClockSetting, "display_clock_setting"},
};

constexpr double kMiB = 1024.0 * 1024.0;

void MigLabels(std::string& out, const std::string& base, const MigInstance& m) {
  out = base;
  AppendLabel(&out, "mig_profile", m.profile);
  AppendLabel(&out, "gpu_instance", m.gpu_instance_id);
  AppendLabel(&out, "compute_instance", m.compute_instance_id);
  AppendLabel(&out, "mig_uuid", m.uuid);
}

std::string_view JobLabel(const JobRef& job) { return job.known() ? job.id : std::string_view(); }

// namespace and pod of a Kubernetes job named "namespace/pod" (nothing for other jobs, or for a
// pod known only by its UID).
void AppendPodLabels(std::string* out, const JobRef& job) {
  if (job.kind != JobRef::Kind::kKubernetes) return;
  const size_t slash = job.id.find('/');
  if (slash == std::string::npos) return;
  AppendLabel(out, "namespace", std::string_view(job.id).substr(0, slash));
  AppendLabel(out, "pod", std::string_view(job.id).substr(slash + 1));
}

// pid, jobid and user labels of one process's series (and step, for a Slurm step).
void ProcessLabels(std::string& out, const GpuProcess& p) {
  out.clear();
  AppendLabel(&out, "pid", static_cast<uint64_t>(p.pid));
  AppendLabel(&out, "jobid", JobLabel(p.job));
  AppendLabel(&out, "user", p.job.user);
  if (!p.job.step.empty()) AppendLabel(&out, "step", p.job.step);  // Slurm's job step
}

}  // namespace

MetricsRenderer::MetricsRenderer(RendererOptions options) : options_(std::move(options)) {}

void MetricsRenderer::Render(const TelemetrySnapshot& snap, std::string* out) {
  out->clear();
  out_ = out;
  std::string& o = *out;
  const size_t n = snap.gpus.size();

  base_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const GpuIdentity& id = snap.gpus[i].sample.id;
    std::string& b = base_[i];
    b.clear();
    AppendLabel(&b, "gpu", i);
    AppendLabel(&b, "uuid", id.uuid);
    AppendLabel(&b, "pci_bus_id", id.pci_bus_id);
    AppendLabel(&b, "model", id.name);
    AppendLabel(&b, "hostname", options_.hostname);
  }

  // --- agent ---
  {
    scratch_.clear();
    AppendLabel(&scratch_, "version", options_.version);
    AppendLabel(&scratch_, "hostname", options_.hostname);
    AppendLabel(&scratch_, "simulated", snap.simulated ? "true" : "false");
    AppendLabel(&scratch_, "source", snap.source_description);
    Family(o, "stoker_agent_info",
           "Stoker agent build and data source (simulated=\"true\" when "
           "readings come from the fake NVML).",
           Type::kGauge)
        .Add(scratch_, "", 1);
    Family(o, "stoker_agent_nvml_available",
           "1 when NVML was loaded; 0 when only host metrics "
           "are served.",
           Type::kGauge)
        .Add("", "", snap.nvml_available ? 1 : 0);
    Family(o, "stoker_agent_gpus", "GPUs visible to the agent.", Type::kGauge).AddUint("", "", n);
    Family(o, "stoker_agent_event_errors_total", "Failed waits for GPU events (XIDs).",
           Type::kCounter)
        .AddUint("", "", snap.event_errors_total);
  }

  // --- health ---
  {
    Family up(o, "stoker_gpu_up", "1 when the latest sample succeeded and the GPU is healthy.",
              Type::kGauge);
    for (size_t i = 0; i < n; ++i) {
      const GpuState& g = snap.gpus[i];
      up.Add(base_[i], "", Fresh(g) && g.sample.health == GpuHealth::kOk ? 1 : 0);
    }
    Family health(o, "stoker_gpu_health",
                  "GPU health state: 1 for the current state, 0 for the "
                  "others (ok, lost = fell off the bus, unreachable = reads fail).",
                  Type::kGauge);
    for (size_t i = 0; i < n; ++i) {
      const GpuState& g = snap.gpus[i];
      if (!g.have_sample && g.last_error.empty()) continue;  // not sampled yet
      const GpuHealth h = Fresh(g) ? g.sample.health : GpuHealth::kUnreachable;
      for (GpuHealth s : {GpuHealth::kOk, GpuHealth::kLost, GpuHealth::kUnreachable}) {
        scratch_.clear();
        AppendLabel(&scratch_, "state", GpuHealthName(s));
        health.Add(base_[i], scratch_, h == s ? 1 : 0);
      }
    }
  }

  // --- scalar fields ---
  const auto fields = GpuScalarFields();
  for (const ScalarFieldDef& f : fields) {
    if (f.metric.empty()) continue;
    Family fam(o, f.metric, f.help, f.counter ? Type::kCounter : Type::kGauge);
    for (size_t i = 0; i < n; ++i) {
      if (!Fresh(snap.gpus[i])) continue;
      const FieldView v = f.get(snap.gpus[i].sample);
      if (v.state != FieldState::kValue) continue;
      fam.Add(base_[i], "", v.AsDouble() * f.scale);
    }
  }
  {
    Family fam(o, "stoker_gpu_clock_event_active",
               "1 while the clock event (throttle) reason is active.", Type::kGauge);
    for (size_t i = 0; i < n; ++i) {
      if (!Fresh(snap.gpus[i])) continue;
      const Field<uint64_t>& r = snap.gpus[i].sample.clock_event_reasons;
      if (!r.has_value()) continue;
      for (const ClockReason& c : kClockReasons) {
        scratch_.clear();
        AppendLabel(&scratch_, "reason", c.name);
        fam.Add(base_[i], scratch_, (r.value() & c.bit) != 0 ? 1 : 0);
      }
    }
  }
  {
    Family fam(o, "stoker_gpu_field_errors_total",
               "Samples in which reading the field failed (the field is then omitted).",
               Type::kCounter);
    for (size_t i = 0; i < n; ++i) {
      for (size_t f = 0; f < fields.size(); ++f) {
        const uint64_t c = snap.gpus[i].field_errors_total[f];
        if (c == 0) continue;
        scratch_.clear();
        AppendLabel(&scratch_, "field", fields[f].key);
        fam.AddUint(base_[i], scratch_, c);
      }
    }
  }

  // --- XIDs ---
  {
    Family fam(o, "stoker_gpu_xid_errors_total",
               "XID events by code; grade red = node action, amber = degradation, blue = "
               "application fault.",
               Type::kCounter);
    for (size_t i = 0; i < n; ++i) {
      for (const auto& [xid, count] : snap.gpus[i].xid_counts) {
        scratch_.clear();
        AppendLabel(&scratch_, "xid", static_cast<uint64_t>(xid));
        AppendLabel(&scratch_, "grade", XidGradeName(GradeXid(xid)));
        fam.AddUint(base_[i], scratch_, count);
      }
    }
    Family last(o, "stoker_gpu_last_xid",
                "Most recent XID within the hold time (default 5 min); 0 when none.", Type::kGauge);
    for (size_t i = 0; i < n; ++i) last.AddUint(base_[i], "", snap.gpus[i].last_xid);
  }

  // --- MIG ---
  {
    struct MigFamily {
      std::string_view name, help;
      FieldView (*get)(const MigInstance&);
    };
    static constexpr MigFamily kMig[] = {
        {"stoker_mig_memory_total_bytes", "Memory of the MIG instance.",
         [](const MigInstance& m) { return ViewOf(m.memory_total_bytes); }},
        {"stoker_mig_memory_used_bytes", "Memory used in the MIG instance.",
         [](const MigInstance& m) { return ViewOf(m.memory_used_bytes); }},
        {"stoker_mig_sm_active_ratio", "GPM: SM activity of the MIG instance.",
         [](const MigInstance& m) { return ViewOf(m.gpm.sm_active); }},
        {"stoker_mig_sm_occupancy_ratio", "GPM: SM occupancy of the MIG instance.",
         [](const MigInstance& m) { return ViewOf(m.gpm.sm_occupancy); }},
        {"stoker_mig_tensor_active_ratio", "GPM: tensor pipe activity of the MIG instance.",
         [](const MigInstance& m) { return ViewOf(m.gpm.tensor_active); }},
        {"stoker_mig_dram_active_ratio", "GPM: DRAM bandwidth use of the MIG instance.",
         [](const MigInstance& m) { return ViewOf(m.gpm.dram_bw_util); }},
    };
    Family slices(o, "stoker_mig_slices", "GPU slices (1-7) of the MIG instance.", Type::kGauge);
    for (size_t i = 0; i < n; ++i) {
      if (!Fresh(snap.gpus[i])) continue;
      for (const MigInstance& m : snap.gpus[i].sample.mig_instances) {
        MigLabels(scratch_, base_[i], m);
        slices.AddUint(scratch_, "", m.slices);
      }
    }
    for (const MigFamily& mf : kMig) {
      Family fam(o, mf.name, mf.help, Type::kGauge);
      for (size_t i = 0; i < n; ++i) {
        if (!Fresh(snap.gpus[i])) continue;
        for (const MigInstance& m : snap.gpus[i].sample.mig_instances) {
          const FieldView v = mf.get(m);
          if (v.state != FieldState::kValue) continue;
          MigLabels(scratch_, base_[i], m);
          fam.Add(scratch_, "", v.AsDouble());
        }
      }
    }
  }

  // --- processes and jobs ---
  {
    Family count(o, "stoker_gpu_processes", "Compute processes on the GPU.", Type::kGauge);
    for (size_t i = 0; i < n; ++i) {
      if (Fresh(snap.gpus[i])) count.AddUint(base_[i], "", snap.gpus[i].sample.processes.size());
    }
    Family mem(o, "stoker_gpu_process_memory_used_bytes",
               "GPU memory used by one process (pid, jobid, user labels).", Type::kGauge);
    for (size_t i = 0; i < n; ++i) {
      if (!Fresh(snap.gpus[i])) continue;
      for (const GpuProcess& p : snap.gpus[i].sample.processes) {
        if (!p.used_memory_bytes.has_value()) continue;
        ProcessLabels(scratch_, p);
        mem.AddUint(base_[i], scratch_, p.used_memory_bytes.value());
      }
    }
    // Per-process utilization (nvmlDeviceGetProcessUtilization): NVML reports it only on some
    // GPUs and never on MIG-enabled ones; processes without a reading get no series.
    // One pass per family: a family's samples must be contiguous in the exposition.
    struct ProcUtil {
      std::string_view name, help;
      Field<uint32_t> GpuProcess::*pct;
    };
    const ProcUtil kProcUtil[] = {
        {"stoker_gpu_process_sm_utilization_ratio",
         "Share of the last sample period in which the process ran kernels on the GPU "
         "(per-process utilization, where NVML supports it).",
         &GpuProcess::sm_util_pct},
        {"stoker_gpu_process_memory_utilization_ratio",
         "Share of the last sample period in which the process read or wrote GPU memory "
         "(per-process utilization, where NVML supports it).",
         &GpuProcess::mem_util_pct},
    };
    for (const ProcUtil& pu : kProcUtil) {
      Family fam(o, pu.name, pu.help, Type::kGauge);
      for (size_t i = 0; i < n; ++i) {
        if (!Fresh(snap.gpus[i])) continue;
        for (const GpuProcess& p : snap.gpus[i].sample.processes) {
          const Field<uint32_t>& pct = p.*pu.pct;
          if (!pct.has_value()) continue;
          ProcessLabels(scratch_, p);
          fam.Add(base_[i], scratch_, pct.value() / 100.0);
        }
      }
    }
    Family job_mem(o, "stoker_gpu_job_memory_used_bytes",
                   "GPU memory used by all processes of a job on this GPU.", Type::kGauge);
    Family job_procs(o, "stoker_gpu_job_processes", "Processes of a job on this GPU.",
                     Type::kGauge);
    Family info(o, "stoker_gpu_job_info",
                "Job running on the GPU (kind = stoker, slurm or kubernetes; for kubernetes the "
                "jobid is namespace/pod, with namespace, pod and container labels, or the pod UID "
                "where the kubelet was not asked). Join with * on(uuid) group_left.",
                Type::kGauge);
    for (size_t i = 0; i < n; ++i) {
      if (!Fresh(snap.gpus[i])) continue;
      jobs_.clear();
      for (const GpuProcess& p : snap.gpus[i].sample.processes) {
        if (!p.job.known()) continue;
        JobAgg* agg = nullptr;
        for (JobAgg& a : jobs_) {
          if (a.job->kind == p.job.kind && a.job->id == p.job.id) agg = &a;
        }
        if (agg == nullptr) agg = &jobs_.emplace_back(JobAgg{&p.job, 0, true, 0});
        ++agg->processes;
        if (p.used_memory_bytes.has_value()) {
          agg->memory_bytes += p.used_memory_bytes.value();
        } else {
          agg->memory_known = false;
        }
      }
      for (const JobAgg& a : jobs_) {
        scratch_.clear();
        AppendLabel(&scratch_, "jobid", a.job->id);
        AppendLabel(&scratch_, "user", a.job->user);
        if (a.memory_known) job_mem.AddUint(base_[i], scratch_, a.memory_bytes);
        job_procs.AddUint(base_[i], scratch_, a.processes);
        AppendLabel(&scratch_, "kind", JobKindName(a.job->kind));
        AppendLabel(&scratch_, "container", a.job->container);
        AppendPodLabels(&scratch_, *a.job);
        info.Add(base_[i], scratch_, 1);
      }
    }
    // Who holds each GPU by allocation (Kubernetes pods, from the kubelet): a share's size is
    // its pod's part of the GPU, whether or not its processes run yet.
    Family claims(o, "stoker_gpu_claim_milli",
                  "GPU held by allocation (Kubernetes: the kubelet's PodResources), in milli-GPU "
                  "(1000 = the whole GPU; a MIG instance: 0 with mig_uuid).",
                  Type::kGauge);
    for (size_t i = 0; i < n; ++i) {
      if (!Fresh(snap.gpus[i])) continue;
      for (const GpuClaim& c : snap.gpus[i].sample.claims) {
        scratch_.clear();
        AppendLabel(&scratch_, "jobid", c.job.id);
        AppendLabel(&scratch_, "kind", JobKindName(c.job.kind));
        AppendLabel(&scratch_, "container", c.job.container);
        AppendPodLabels(&scratch_, c.job);
        AppendLabel(&scratch_, "mig_uuid", c.mig_uuid);
        claims.AddUint(base_[i], scratch_, static_cast<uint64_t>(c.gpu_milli));
      }
    }
  }

  // --- agent self-metrics ---
  {
    Family agent(o, "stoker_agent_sample_duration_seconds",
                 "Agent's own work per sample, excluding the NVML read.", Type::kGauge);
    Family source(o, "stoker_agent_source_duration_seconds",
                  "Time spent inside the NVML read of the latest sample.", Type::kGauge);
    Family samples(o, "stoker_agent_samples_total", "Successful samples.", Type::kCounter);
    Family errors(o, "stoker_agent_sample_errors_total", "Samples that could not be taken.",
                  Type::kCounter);
    Family skipped(o, "stoker_agent_skipped_ticks_total",
                   "Sample ticks skipped because the previous read overran the interval.",
                   Type::kCounter);
    for (size_t i = 0; i < n; ++i) {
      const GpuState& g = snap.gpus[i];
      agent.Add(base_[i], "", ToSeconds(g.last_agent_duration));
      source.Add(base_[i], "", ToSeconds(g.last_source_duration));
      samples.AddUint(base_[i], "", g.samples_total);
      errors.AddUint(base_[i], "", g.sample_errors_total);
      skipped.AddUint(base_[i], "", g.skipped_ticks_total);
    }
  }

  // --- host (served with or without NVML) ---
  {
    scratch_.clear();
    AppendLabel(&scratch_, "hostname", options_.hostname);
    const HostStats& h = snap.host;
    auto host = [&](std::string_view name, std::string_view help, const auto& field, double scale) {
      if (field.has_value()) {
        Family(o, name, help, Type::kGauge)
            .Add(scratch_, "", static_cast<double>(field.value()) * scale);
      }
    };
    host("stoker_host_load1", "1-minute load average.", h.load1, 1.0);
    host("stoker_host_load5", "5-minute load average.", h.load5, 1.0);
    host("stoker_host_load15", "15-minute load average.", h.load15, 1.0);
    host("stoker_host_memory_total_bytes", "Host memory.", h.memory_total_bytes, 1.0);
    host("stoker_host_memory_available_bytes", "Host memory available.", h.memory_available_bytes,
         1.0);
  }

  if (options_.dcgm_compat) RenderDcgm(snap);
  out_ = nullptr;
}

void MetricsRenderer::RenderDcgm(const TelemetrySnapshot& snap) {
  std::string& o = *out_;
  const size_t n = snap.gpus.size();
  dcgm_base_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const GpuIdentity& id = snap.gpus[i].sample.id;
    std::string& b = dcgm_base_[i];
    b.clear();
    AppendLabel(&b, "gpu", i);
    AppendLabel(&b, "UUID", id.uuid);
    AppendLabel(&b, "pci_bus_id", id.pci_bus_id);
    AppendLabel(&b, "device",
                "nvidia" + std::to_string(id.minor.value_or(static_cast<uint32_t>(i))));
    AppendLabel(&b, "modelName", id.name);
    // dcgm-exporter renamed Hostname to hostname in 2026 (PR #655); dashboards of both eras
    // exist, so both are emitted.
    AppendLabel(&b, "Hostname", options_.hostname);
    AppendLabel(&b, "hostname", options_.hostname);
  }

  struct Dcgm {
    std::string_view name, help;
    Type type;
    double scale;
    FieldView (*get)(const GpuSample&);
    FieldView (*mig)(const MigInstance&) = nullptr;  // per-MIG-instance series, when any
  };
  static constexpr Dcgm kDcgm[] = {
      {"DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", Type::kGauge, 1,
       [](const GpuSample& s) { return ViewOf(s.sm_clock_mhz); }},
      {"DCGM_FI_DEV_MEM_CLOCK", "Memory clock frequency (in MHz).", Type::kGauge, 1,
       [](const GpuSample& s) { return ViewOf(s.mem_clock_mhz); }},
      {"DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", Type::kGauge, 1,
       [](const GpuSample& s) { return ViewOf(s.temperature_c); }},
      {"DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", Type::kGauge, 0.001,
       [](const GpuSample& s) { return ViewOf(s.power_mw); }},
      {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "Total energy consumption since boot (in mJ).",
       Type::kCounter, 1, [](const GpuSample& s) { return ViewOf(s.energy_mj); }},
      {"DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", Type::kGauge, 1,
       [](const GpuSample& s) { return ViewOf(s.util_gpu_pct); }},
      {"DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).", Type::kGauge, 1,
       [](const GpuSample& s) { return ViewOf(s.util_mem_pct); }},
      {"DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", Type::kGauge, 1 / kMiB,
       [](const GpuSample& s) { return ViewOf(s.memory_free_bytes); }},
      {"DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", Type::kGauge, 1 / kMiB,
       [](const GpuSample& s) { return ViewOf(s.memory_used_bytes); },
       [](const MigInstance& m) { return ViewOf(m.memory_used_bytes); }},
      {"DCGM_FI_DEV_FB_RESERVED", "Framebuffer memory reserved (in MiB).", Type::kGauge, 1 / kMiB,
       [](const GpuSample& s) { return ViewOf(s.memory_reserved_bytes); }},
      {"DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "Number of remapped rows for correctable errors",
       Type::kCounter, 1, [](const GpuSample& s) { return ViewOf(s.remapped_rows_correctable); }},
      {"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
       "Number of remapped rows for uncorrectable errors", Type::kCounter, 1,
       [](const GpuSample& s) { return ViewOf(s.remapped_rows_uncorrectable); }},
      {"DCGM_FI_DEV_ROW_REMAP_FAILURE", "Whether remapping of rows has failed", Type::kGauge, 1,
       [](const GpuSample& s) { return ViewOf(s.remapping_failed); }},
      {"DCGM_FI_PROF_PCIE_TX_BYTES",
       "The rate of data transmitted over the PCIe bus in bytes "
       "per second.",
       Type::kGauge, 1024, [](const GpuSample& s) { return ViewOf(s.pcie_tx_kbps); }},
      {"DCGM_FI_PROF_PCIE_RX_BYTES",
       "The rate of data received over the PCIe bus in bytes per "
       "second.",
       Type::kGauge, 1024, [](const GpuSample& s) { return ViewOf(s.pcie_rx_kbps); }},
      // Graphics-engine activity approximated by NVML's kernel-running fraction on whole GPUs.
      {"DCGM_FI_PROF_GR_ENGINE_ACTIVE", "Ratio of time the graphics engine is active.",
       Type::kGauge, 0.01, [](const GpuSample& s) { return ViewOf(s.util_gpu_pct); }},
  };
  for (const Dcgm& d : kDcgm) {
    Family fam(o, d.name, d.help, d.type);
    for (size_t i = 0; i < n; ++i) {
      if (!Fresh(snap.gpus[i])) continue;
      const FieldView v = d.get(snap.gpus[i].sample);
      if (v.state == FieldState::kValue) fam.Add(dcgm_base_[i], "", v.AsDouble() * d.scale);
      if (d.mig == nullptr) continue;
      for (const MigInstance& m : snap.gpus[i].sample.mig_instances) {
        const FieldView mv = d.mig(m);
        if (mv.state != FieldState::kValue) continue;
        scratch_.clear();
        AppendLabel(&scratch_, "GPU_I_PROFILE", m.profile);
        AppendLabel(&scratch_, "GPU_I_ID", m.gpu_instance_id);
        fam.Add(dcgm_base_[i], scratch_, mv.AsDouble() * d.scale);
      }
    }
  }
  {
    Family fam(o, "DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered.",
               Type::kGauge);
    for (size_t i = 0; i < n; ++i) fam.AddUint(dcgm_base_[i], "", snap.gpus[i].last_xid);
  }
  // Profiling ratios: whole GPU, then each MIG instance with GPU_I_PROFILE / GPU_I_ID.
  struct Prof {
    std::string_view name, help;
    const Field<double> GpmMetrics::*member;
  };
  static constexpr Prof kProf[] = {
      {"DCGM_FI_PROF_SM_ACTIVE", "The ratio of cycles an SM has at least 1 warp assigned.",
       &GpmMetrics::sm_active},
      {"DCGM_FI_PROF_SM_OCCUPANCY", "The ratio of number of warps resident on an SM.",
       &GpmMetrics::sm_occupancy},
      {"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "Ratio of cycles the tensor (HMMA) pipe is active.",
       &GpmMetrics::tensor_active},
      {"DCGM_FI_PROF_DRAM_ACTIVE",
       "Ratio of cycles the device memory interface is active "
       "sending or receiving data.",
       &GpmMetrics::dram_bw_util},
  };
  for (const Prof& p : kProf) {
    Family fam(o, p.name, p.help, Type::kGauge);
    for (size_t i = 0; i < n; ++i) {
      if (!Fresh(snap.gpus[i])) continue;
      const GpuSample& s = snap.gpus[i].sample;
      const Field<double>& whole = s.gpm.*(p.member);
      if (whole.has_value()) fam.Add(dcgm_base_[i], "", whole.value());
      for (const MigInstance& m : s.mig_instances) {
        const Field<double>& f = m.gpm.*(p.member);
        if (!f.has_value()) continue;
        scratch_.clear();
        AppendLabel(&scratch_, "GPU_I_PROFILE", m.profile);
        AppendLabel(&scratch_, "GPU_I_ID", m.gpu_instance_id);
        fam.Add(dcgm_base_[i], scratch_, f.value());
      }
    }
  }
}

}  // namespace stoker::telemetry
