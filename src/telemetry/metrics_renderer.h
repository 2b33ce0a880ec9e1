#pragma once
// Prometheus text exposition (format 0.0.4) of a TelemetrySnapshot. Conventions
// (reference/telemetry.md §7): prefix stoker_, base units (bytes, watts, joules, hertz,
// celsius, 0-1 ratios), counters end in _total, a field that is unsupported or failed is
// omitted (never written as 0) and counted in stoker_gpu_field_errors_total when it failed.
//
// Labels: every GPU series has gpu, uuid, pci_bus_id, model, hostname; MIG series add
// mig_profile, gpu_instance, compute_instance, mig_uuid. Job attribution labels (jobid, user)
// appear only on the per-process and per-job series and on stoker_gpu_job_info, to keep
// cardinality low. The label is "jobid", not "job": Prometheus attaches its own `job` (the scrape
// job) to every series and would rename ours to exported_job.
//
// With dcgm_compat, dcgm-exporter's DCGM_FI_* families are emitted as well, with its label names
// and units (%, MiB, MHz, W, mJ), so NVIDIA's DCGM Grafana dashboard works unchanged.

#include <string>
#include <string_view>
#include <vector>

#include "core/prometheus_text.h"
#include "telemetry/snapshot.h"

namespace stoker::telemetry {

inline constexpr std::string_view kPrometheusContentType = prom::kContentType;

struct RendererOptions {
  std::string hostname;
  std::string version;
  bool dcgm_compat = false;
};

class MetricsRenderer {
 public:
  explicit MetricsRenderer(RendererOptions options);

  // Replaces *out with the exposition. Reuses *out's capacity; not thread-safe (one renderer
  // per scraping thread, or a lock around it).
  void Render(const TelemetrySnapshot& snapshot, std::string* out);

 private:
  struct JobAgg {
    const JobRef* job;
    uint64_t memory_bytes;
    bool memory_known;
    uint32_t processes;
  };
  void RenderDcgm(const TelemetrySnapshot& snapshot);

  RendererOptions options_;
  std::string* out_ = nullptr;
  std::vector<std::string> base_;       // per GPU: gpu="0",uuid=...,hostname=...
  std::vector<std::string> dcgm_base_;  // per GPU, dcgm-exporter label names
  std::string scratch_;
  std::vector<JobAgg> jobs_;
};

}  // namespace stoker::telemetry
