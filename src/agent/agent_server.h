#pragma once
// The agent's HTTP face (cpp-httplib): GET /metrics (Prometheus text 0.0.4), GET /healthz
// (JSON, "ok" or "degraded"), GET /api/v1/snapshot (JSON of every GPU field with its state).
// Every request renders from the sampler's cache: a scrape never waits on NVML.

#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "agent/agent_config.h"
#include "core/status.h"
#include "telemetry/metrics_renderer.h"
#include "telemetry/sampler.h"

namespace httplib {
class Server;
}

namespace stoker::agent {

struct AgentServerOptions {
  ListenAddress listen{"127.0.0.1", kDefaultAgentPort};
  telemetry::RendererOptions renderer;
  std::string proc_root = "/proc";  // host metrics source
};

class AgentServer {
 public:
  // `sampler` is not owned and must outlive the server.
  AgentServer(const telemetry::Sampler* sampler, AgentServerOptions options);
  ~AgentServer();
  AgentServer(const AgentServer&) = delete;
  AgentServer& operator=(const AgentServer&) = delete;

  // Binds (port 0 picks an ephemeral port) and serves on a background thread. Unavailable when
  // the address cannot be bound.
  Status Start();
  // The bound port (after Start).
  int port() const { return port_; }
  void Stop();

  // The bodies the endpoints serve (also used by tests and benchmarks).
  std::string RenderMetrics();
  std::string RenderHealth(bool* healthy);
  std::string RenderSnapshot();

 private:
  void TakeSnapshot();  // REQUIRES: mu_ held

  const telemetry::Sampler* sampler_;
  AgentServerOptions options_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;

  std::mutex mu_;  // guards the reused buffers below
  telemetry::TelemetrySnapshot snapshot_;
  telemetry::MetricsRenderer renderer_;
  std::string body_;
};

}  // namespace stoker::agent
