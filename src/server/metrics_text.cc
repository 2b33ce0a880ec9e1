// GET /metrics of the server: its counters and gauges (Server::Metrics) as Prometheus text,
// written through core/prometheus_text.

#include "core/prometheus_text.h"
#include "server/api.h"

namespace stoker::server {

std::string ServerMetricsText(const ServerMetrics& m) {
  using prom::Type;
  prom::TextWriter w;
  auto by = [&w](const char* name, Type type, const char* help, const char* label,
                 const std::map<std::string, int64_t>& values) {
    w.Family(name, help, type);
    for (const auto& [k, v] : values) w.Sample(name, {{label, k}}, static_cast<double>(v));
  };
  by("stoker_server_jobs", Type::kGauge, "Jobs queued or holding resources, by state.", "state",
     m.jobs);
  by("stoker_server_jobs_ended_total", Type::kCounter,
     "Jobs that ended since this server process started, by final state.", "state", m.ended);
  w.Family("stoker_server_nodes", "Registered nodes by state.", Type::kGauge);
  w.Sample("stoker_server_nodes", {{"state", "ready"}}, static_cast<double>(m.nodes_ready));
  w.Sample("stoker_server_nodes", {{"state", "drained"}}, static_cast<double>(m.nodes_drained));
  w.Sample("stoker_server_nodes", {{"state", "lost"}}, static_cast<double>(m.nodes_lost));
  by("stoker_server_gpus", Type::kGauge,
     "Non-MIG GPUs of nodes not lost, by what jobs commit on them: free, partial (< 1 GPU), "
     "full, oversubscribed (preemptible work beyond one GPU).",
     "commitment", m.gpus);
  w.Gauge("stoker_server_gpu_oversubscription_ratio",
          "Configured cap on a GPU's commitments with preemptible work (1 = off).",
          m.gpu_oversubscription_milli / 1000.0);
  w.Counter("stoker_scheduler_passes_total", "Scheduling passes that had queued jobs.",
            static_cast<double>(m.passes));
  w.Counter("stoker_scheduler_placements_total", "Jobs placed on a node.",
            static_cast<double>(m.placed));
  w.Counter("stoker_scheduler_oversubscribed_placements_total",
            "Preemptible jobs placed on GPUs beyond their capacity.",
            static_cast<double>(m.oversubscribed));
  w.Counter("stoker_scheduler_preemptions_total",
            "Preemptible jobs stopped or sent back to the queue for guaranteed work.",
            static_cast<double>(m.preempted));
  if (m.fragmentation) {
    w.Gauge("stoker_scheduler_fragmented_gpus",
            "FGD's fragmentation measure (scheduler library): free GPUs the typical shapes of the "
            "current workload cannot use, sampled every minute.",
            m.fragmentation->fragmented_gpu_milli / 1000.0);
    w.Gauge("stoker_scheduler_free_gpus", "Free GPUs (milli-GPU / 1000) at that sample.",
            static_cast<double>(m.fragmentation->free_gpu_milli) / 1000.0);
  }
  by("stoker_server_heartbeat_samples_refused_total", Type::kCounter,
     "GPU samples of heartbeats refused: unknown_gpu (not a GPU the node registered), "
     "index_mismatch (registered under another index), clock (taken too far from the "
     "server's clock).",
     "reason", m.samples_refused);
  w.Counter("stoker_server_heartbeat_log_chunks_refused_total",
            "Log bytes a node sent for a job that is not its current run (another node's job, an "
            "earlier run, a job that does not exist), dropped.",
            static_cast<double>(m.log_chunks_refused));
  w.Gauge("stoker_scheduler_last_pass_seconds", "Wall time of the last scheduling pass.",
          m.last_pass_seconds);
  w.Family("stoker_scheduler_last_pass_phase_seconds",
           "Wall time of the last scheduling pass by phase: view (reading the cluster under the "
           "lock), compute (the decision, no lock held), apply_lock_wait, apply (under the lock), "
           "persist (the durable commit), notify (observers).",
           Type::kGauge);
  const PassPhaseSeconds& p = m.last_pass_phases;
  for (const auto& [phase, v] : {std::pair<const char*, double>{"view", p.view},
                                 {"compute", p.compute},
                                 {"apply_lock_wait", p.apply_lock_wait},
                                 {"apply", p.apply},
                                 {"persist", p.persist},
                                 {"notify", p.notify}}) {
    w.Sample("stoker_scheduler_last_pass_phase_seconds", {{"phase", phase}}, v);
  }
  return w.Take();
}

}  // namespace stoker::server
