#pragma once
// The agent's HTTP face (served by the HTTP layer, http/listener.h): GET /metrics (Prometheus text
// 0.0.4), GET /healthz (JSON, "ok" or "degraded"), GET /api/v1/snapshot (JSON of every GPU field
// with its state). Every request renders from the sampler's cache: a scrape never waits on NVML.

#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "agent/agent_config.h"
#include "core/status.h"
#include "http/listener.h"
#include "telemetry/metrics_renderer.h"
#include "telemetry/sampler.h"

namespace stoker::agent {

struct AgentServerOptions {
  ListenAddress listen{"127.0.0.1", kDefaultAgentPort};
  telemetry::RendererOptions renderer;
  std::string proc_root = "/proc";  // host metrics source
};

class AgentServer final : public http::Handler {
 public:
  // `sampler` is not owned and must outlive the server.
  AgentServer(const telemetry::Sampler* sampler, AgentServerOptions options);
  ~AgentServer() override;
  AgentServer(const AgentServer&) = delete;
  AgentServer& operator=(const AgentServer&) = delete;

  // Binds (port 0 picks an ephemeral port) and serves on a background thread. Unavailable when
  // the address cannot be bound.
  Status Start();
  // The bound port (after Start).
  int port() const { return port_; }
  void Stop();

  // The bodies the endpoints serve (also used by tests and benchmarks).
  std::string RenderMetrics() const;
  std::string RenderHealth(bool* healthy) const;
  std::string RenderSnapshot() const;

  // The routes, as the HTTP layer calls them.
  http::Response Handle(const http::Request& request) const override;

 private:
  void TakeSnapshot() const;  // REQUIRES: mu_ held

  const telemetry::Sampler* sampler_;
  AgentServerOptions options_;
  std::unique_ptr<http::Listener> server_;
  int port_ = 0;

  mutable std::mutex mu_;  // guards the reused buffers below
  mutable telemetry::TelemetrySnapshot snapshot_;
  mutable telemetry::MetricsRenderer renderer_;
  mutable std::string body_;
};

}  // namespace stoker::agent
