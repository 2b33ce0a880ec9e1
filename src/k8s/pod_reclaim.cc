#include "k8s/pod_reclaim.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "client/api_client.h"
#include "efficiency/activity.h"

namespace stoker::k8s {
namespace {
using nlohmann::json;

// "namespace/pod" -> (namespace, pod).
std::pair<std::string, std::string> SplitPod(const std::string& id) {
  const size_t slash = id.find('/');
  if (slash == std::string::npos) return {"", id};
  return {id.substr(0, slash), id.substr(slash + 1)};
}

// A DNS-1123 name as Kubernetes names namespaces and pods: 1..253 of lowercase letters, digits,
// '-' and '.'. The names come from agents' heartbeat claims and go into the request path under
// the server's cluster-wide token, so '/', '..', '?' and the like must never reach it.
bool IsDns1123Name(const std::string& s) {
  if (s.empty() || s.size() > 253) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
  });
}

// A token file's contents without the trailing newline; nullopt when it cannot be read.
std::optional<std::string> ReadToken(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  std::string t = ss.str();
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r')) t.pop_back();
  return t;
}

class KubeApiEvictor final : public PodEvictor {
 public:
  explicit KubeApiEvictor(KubeApiConfig c) : config_(std::move(c)) {}

  Status Evict(const std::string& ns, const std::string& pod) override {
    if (!IsDns1123Name(ns)) return InvalidArgument("not a Kubernetes namespace name: '" + ns + "'");
    if (!IsDns1123Name(pod)) return InvalidArgument("not a Kubernetes pod name: '" + pod + "'");
    std::string token = config_.token;
    if (!config_.token_file.empty()) {
      // Read again each time: evictions are rare, and the kubelet rotates the token.
      if (std::optional<std::string> t = ReadToken(config_.token_file)) {
        token = std::move(*t);
      } else {
        spdlog::warn("cannot read {}; using the token read before", config_.token_file);
      }
    }
    client::ApiClient api(config_.server, token,
                          std::chrono::duration<double>(config_.timeout).count(), config_.ca_file);
    Result<client::HttpResult> res =
        api.Send("POST", EvictionPath(ns, pod), EvictionBody(ns, pod), "application/json");
    if (!res.ok()) {
      return Unavailable("Kubernetes API " + config_.server + ": " + res.status().message());
    }
    return EvictionStatus(res->status, res->raw);
  }

 private:
  KubeApiConfig config_;
};

}  // namespace

std::string EvictionPath(const std::string& ns, const std::string& pod) {
  return "/api/v1/namespaces/" + ns + "/pods/" + pod + "/eviction";
}

std::string EvictionBody(const std::string& ns, const std::string& pod) {
  nlohmann::ordered_json b;
  b["apiVersion"] = "policy/v1";
  b["kind"] = "Eviction";
  b["metadata"] = {{"name", pod}, {"namespace", ns}};
  return b.dump();
}

Status EvictionStatus(int http_status, const std::string& body) {
  std::string message;
  const json j = json::parse(body, nullptr, false);
  if (j.is_object() && j.contains("message") && j["message"].is_string()) {
    message = j["message"].get<std::string>();
  } else {
    message = body.substr(0, 200);
  }
  switch (http_status) {
    case 200:
    case 201:
      return Status::Ok();
    case 429:
      return Unavailable("eviction refused for now (a PodDisruptionBudget): " + message);
    case 404:
      return NotFound("pod not found: " + message);
    case 401:
    case 403:
      return PermissionDenied("the Kubernetes API refused the eviction (HTTP " +
                              std::to_string(http_status) + "): " + message);
    default:
      return Internal("eviction failed (HTTP " + std::to_string(http_status) + "): " + message);
  }
}

Result<KubeApiConfig> InClusterConfig(const std::string& sa_dir) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (host == nullptr || *host == '\0') {
    return FailedPrecondition("not in a pod: KUBERNETES_SERVICE_HOST is not set");
  }
  KubeApiConfig c;
  const std::string h = host;
  c.server = "https://" + (h.find(':') != std::string::npos ? "[" + h + "]" : h) + ":" +
             (port != nullptr && *port != '\0' ? port : "443");
  c.token_file = sa_dir + "/token";
  std::optional<std::string> token = ReadToken(c.token_file);
  if (!token) return FailedPrecondition("cannot read " + c.token_file);
  c.token = std::move(*token);
  c.ca_file = sa_dir + "/ca.crt";
  return c;
}

std::unique_ptr<PodEvictor> NewKubeApiEvictor(KubeApiConfig config) {
  return std::make_unique<KubeApiEvictor>(std::move(config));
}

// The reclaimer's actions on pods: a warning is logged (the record is the evidence); requeue and
// cancel are evictions.
class PodReclaim::Actions final : public efficiency::ReclaimActions {
 public:
  explicit Actions(PodEvictor* evictor) : evictor_(evictor) {}
  Status Warn(const efficiency::JobInfo& job, const std::string& message) override {
    spdlog::warn("k8s reclaim: pod {}: {}", job.id, message);
    return Status::Ok();
  }
  Status Requeue(const efficiency::JobInfo& job, const std::string& reason) override {
    return Evict(job, reason);
  }
  Status Cancel(const efficiency::JobInfo& job, const std::string& reason) override {
    return Evict(job, reason);
  }

 private:
  Status Evict(const efficiency::JobInfo& job, const std::string& reason) {
    if (evictor_ == nullptr) return FailedPrecondition("no Kubernetes API to evict through");
    const auto [ns, pod] = SplitPod(job.id);
    if (ns.empty()) return InvalidArgument("pod " + job.id + " has no namespace");
    Status st = evictor_->Evict(ns, pod);
    spdlog::info("k8s reclaim: evict {} ({}): {}", job.id, reason,
                 st.ok() ? "done" : st.ToString());
    return st;
  }
  PodEvictor* evictor_;
};

PodReclaim::PodReclaim(efficiency::IdleReclaimPolicy policy, efficiency::ActivityMetric metric,
                       PodEvictor* evictor)
    : metric_(metric), actions_(std::make_unique<Actions>(evictor)) {
  if (evictor == nullptr) policy.dry_run = true;
  reclaimer_ = std::make_unique<efficiency::IdleReclaimer>(std::move(policy), pods_, *actions_);
}

PodReclaim::~PodReclaim() = default;

void PodReclaim::Observe(const std::string& /*node*/, const std::vector<GpuSample>& gpus) {
  for (const GpuSample& s : gpus) {
    std::set<std::string> holders;
    for (const GpuClaim& c : s.claims) {
      if (c.job.kind == JobRef::Kind::kKubernetes && c.job.id.find('/') != std::string::npos) {
        holders.insert(c.job.id);
      }
    }
    if (holders.empty()) continue;
    const std::optional<int64_t> activity = efficiency::ActivityMilli(s, metric_);
    const std::string gpu = efficiency::GpuKey(s);
    for (const std::string& pod : holders) {
      std::optional<efficiency::JobInfo> j = pods_.Find(pod);
      efficiency::JobInfo info = j ? *j : efficiency::JobInfo{};
      if (!j) {
        info.id = pod;
        info.user = SplitPod(pod).first;  // the namespace: who to talk to about the pod
        info.team = info.user;
        info.job_class = "kubernetes";
        info.start = s.timestamp;
      }
      if (std::find(info.gpus.begin(), info.gpus.end(), gpu) == info.gpus.end()) {
        info.gpus.push_back(gpu);
      }
      pods_.Upsert(info);
      last_seen_[pod] = std::max(last_seen_[pod], s.timestamp);
      if (activity) reclaimer_->Observe(pod, gpu, s.timestamp, *activity);
    }
  }
}

std::vector<efficiency::ReclaimRecord> PodReclaim::Evaluate(WallTime now) {
  // Pods no longer seen on any GPU have ended (or moved): they leave the directory.
  for (auto it = last_seen_.begin(); it != last_seen_.end();) {
    if (now - it->second > std::chrono::minutes(10)) {
      pods_.Remove(it->first);
      reclaimer_->Forget(it->first);
      it = last_seen_.erase(it);
    } else {
      ++it;
    }
  }
  return reclaimer_->Evaluate(now);
}

const std::vector<efficiency::ReclaimRecord>& PodReclaim::log() const { return reclaimer_->log(); }

size_t PodReclaim::pods() const { return last_seen_.size(); }

}  // namespace stoker::k8s
