#include "agent/agent_server.h"

#include <httplib.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <atomic>

#include "telemetry/snapshot_json.h"

namespace stoker::agent {

AgentServer::AgentServer(const telemetry::Sampler* sampler, AgentServerOptions options)
    : sampler_(sampler), options_(std::move(options)), renderer_(options_.renderer) {}

AgentServer::~AgentServer() { Stop(); }

void AgentServer::TakeSnapshot() {
  sampler_->Snapshot(&snapshot_);
  snapshot_.host = telemetry::ReadHostStats(options_.proc_root);
}

std::string AgentServer::RenderMetrics() {
  std::lock_guard lock(mu_);
  TakeSnapshot();
  renderer_.Render(snapshot_, &body_);
  return body_;
}

std::string AgentServer::RenderHealth(bool* healthy) {
  std::lock_guard lock(mu_);
  TakeSnapshot();
  const nlohmann::json j = telemetry::HealthToJson(snapshot_);
  if (healthy != nullptr) *healthy = j["status"] == "ok";
  return j.dump(2) + "\n";
}

std::string AgentServer::RenderSnapshot() {
  std::lock_guard lock(mu_);
  TakeSnapshot();
  return telemetry::SnapshotToJson(snapshot_, options_.renderer.hostname).dump(2) + "\n";
}

Status AgentServer::Start() {
  if (server_ != nullptr) return FailedPrecondition("agent server already started");
  server_ = std::make_unique<httplib::Server>();
  // httplib's default also sets SO_REUSEPORT, which lets a second agent bind the same port and
  // silently split the scrapes between the two; keep only SO_REUSEADDR (fast restarts).
  server_->set_socket_options([](int sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  server_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(RenderMetrics(), std::string(telemetry::kPrometheusContentType));
  });
  server_->Get("/healthz", [this](const httplib::Request&, httplib::Response& res) {
    bool healthy = false;
    res.set_content(RenderHealth(&healthy), "application/json");
    // 200 even when degraded: the agent itself is serving; the body says what is wrong.
    res.status = 200;
  });
  server_->Get("/api/v1/snapshot", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(RenderSnapshot(), "application/json");
  });
  server_->Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("Stoker agent\n/metrics  Prometheus metrics\n/healthz  health (JSON)\n"
                    "/api/v1/snapshot  all GPU fields (JSON)\n",
                    "text/plain; charset=utf-8");
  });
  server_->set_exception_handler(
      [](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown error";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        spdlog::error("agent: {} {} failed: {}", req.method, req.path, what);
        res.status = 500;
        res.set_content("internal error\n", "text/plain");
      });
  const std::string& host = options_.listen.host;
  if (options_.listen.port == 0) {
    port_ = server_->bind_to_any_port(host);
    if (port_ <= 0) {
      server_.reset();
      return Unavailable("cannot bind an ephemeral port on " + host);
    }
  } else {
    if (!server_->bind_to_port(host, options_.listen.port)) {
      server_.reset();
      return Unavailable("cannot listen on " + host + ":" + std::to_string(options_.listen.port) +
                         " (in use, or not an address of this host)");
    }
    port_ = options_.listen.port;
  }
  // The socket is bound and listening: connections made before listen_after_bind() starts
  // accepting wait in the backlog.
  auto loop_ended = std::make_shared<std::atomic<bool>>(false);
  thread_ = std::thread([this, loop_ended] {
    if (!server_->listen_after_bind()) spdlog::error("agent: HTTP accept loop failed");
    *loop_ended = true;
  });
  // httplib's stop() is a no-op until the accept loop runs; wait for it so that a Stop() right
  // after Start() cannot leave the loop running forever.
  while (!server_->is_running() && !*loop_ended) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return Status::Ok();
}

void AgentServer::Stop() {
  if (server_ == nullptr) return;
  server_->stop();
  if (thread_.joinable()) thread_.join();
  server_.reset();
}

}  // namespace stoker::agent
