#include "agent/agent_server.h"

#include "telemetry/snapshot_json.h"

namespace stoker::agent {

AgentServer::AgentServer(const telemetry::Sampler* sampler, AgentServerOptions options)
    : sampler_(sampler), options_(std::move(options)), renderer_(options_.renderer) {}

AgentServer::~AgentServer() { Stop(); }

void AgentServer::TakeSnapshot() const {
  sampler_->Snapshot(&snapshot_);
  snapshot_.host = telemetry::ReadHostStats(options_.proc_root);
}

std::string AgentServer::RenderMetrics() const {
  std::lock_guard lock(mu_);
  TakeSnapshot();
  renderer_.Render(snapshot_, &body_);
  return body_;
}

std::string AgentServer::RenderHealth(bool* healthy) const {
  std::lock_guard lock(mu_);
  TakeSnapshot();
  const nlohmann::json j = telemetry::HealthToJson(snapshot_);
  if (healthy != nullptr) *healthy = j["status"] == "ok";
  return j.dump(2) + "\n";
}

std::string AgentServer::RenderSnapshot() const {
  std::lock_guard lock(mu_);
  TakeSnapshot();
  return telemetry::SnapshotToJson(snapshot_, options_.renderer.hostname).dump(2) + "\n";
}

http::Response AgentServer::Handle(const http::Request& req) const {
  const bool known = req.path == "/metrics" || req.path == "/healthz" ||
                     req.path == "/api/v1/snapshot" || req.path == "/";
  if (!known) return {404, http::ErrorBody("not_found", "no such endpoint: " + req.path)};
  if (req.method != "GET") {
    return {405, http::ErrorBody("method_not_allowed", "only GET is served here")};
  }
  if (req.path == "/metrics") {
    return {200, RenderMetrics(), std::string(telemetry::kPrometheusContentType)};
  }
  if (req.path == "/healthz") {
    // 200 even when degraded: the agent itself is serving; the body says what is wrong.
    bool healthy = false;
    return {200, RenderHealth(&healthy), "application/json"};
  }
  if (req.path == "/api/v1/snapshot") return {200, RenderSnapshot(), "application/json"};
  return {200,
          "Stoker agent\n/metrics  Prometheus metrics\n/healthz  health (JSON)\n"
          "/api/v1/snapshot  all GPU fields (JSON)\n",
          "text/plain; charset=utf-8"};
}

Status AgentServer::Start() {
  if (server_ != nullptr) return FailedPrecondition("agent server already started");
  http::ListenerOptions o;
  o.host = options_.listen.host;
  o.port = options_.listen.port;
  // Renders read the sampler's cache and never block on NVML: a small pool serves scrapes.
  o.threads = 2;
  o.io_threads = 1;
  o.max_connections = 256;
  o.max_body_bytes = size_t{64} * 1024;  // nothing here takes a body
  auto server = std::make_unique<http::Listener>(this, o);
  STOKER_RETURN_IF_ERROR(server->Start());
  port_ = server->port();
  server_ = std::move(server);
  return Status::Ok();
}

void AgentServer::Stop() {
  if (server_ == nullptr) return;
  server_->Stop();
  server_.reset();
}

}  // namespace stoker::agent
