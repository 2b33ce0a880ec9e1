#pragma once
// Idle reclaim for pods: the decision and its evidence are the efficiency engine's idle
// reclaimer's (efficiency/idle_reclaim.h), exactly as for Stoker jobs; the pods are the ones the
// agents' samples show holding GPUs (their claims), their activity the activity of those GPUs;
// the action is an eviction through the Kubernetes API, behind PodEvictor.
//
// The eviction is the API's Eviction subresource, which respects PodDisruptionBudgets and the
// pod's termination grace period:
//
//   POST /api/v1/namespaces/<namespace>/pods/<pod>/eviction
//   Content-Type: application/json
//   Authorization: Bearer <the server's service-account token>
//   {"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"<pod>","namespace":"<namespace>"}}
//
//   200/201: evicted; 429: a PodDisruptionBudget forbids it now (tried again at the next
//   evaluation); 404: the pod is gone; anything else: an error with the API's message.
//
// A pod's "requeue" and "cancel" are both an eviction: a pod that a controller owns (Deployment,
// Job, ...) is recreated, and the scheduler places it again; a bare pod is gone. On a shared GPU
// the activity is the GPU's, so a pod sharing with a busy pod is never found idle (reclaim errs
// towards keeping pods). Not yet run against a live cluster (docs/kubernetes.md).

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/gpu.h"
#include "core/status.h"
#include "efficiency/config.h"
#include "efficiency/idle_reclaim.h"
#include "efficiency/jobs.h"

namespace stoker::k8s {

// The request, exactly.
std::string EvictionPath(const std::string& namespace_name, const std::string& pod);
std::string EvictionBody(const std::string& namespace_name, const std::string& pod);

class PodEvictor {
 public:
  virtual ~PodEvictor() = default;
  // OK when evicted; Unavailable when a disruption budget refuses it now; NotFound when the pod
  // is gone; PermissionDenied for 401/403; Internal otherwise (the API's message kept).
  virtual Status Evict(const std::string& namespace_name, const std::string& pod) = 0;
};

// Where the Kubernetes API is and who the server is to it.
struct KubeApiConfig {
  std::string server;   // https://10.96.0.1:443
  std::string token;    // a bearer token (the service account's)
  std::string ca_file;  // verifies the API server
  Duration timeout = std::chrono::seconds(10);
  // When set, the token is read from this file at each eviction (the kubelet rotates projected
  // service-account tokens); `token` is then only the fallback when the file cannot be read.
  std::string token_file;
};
// In a pod: KUBERNETES_SERVICE_HOST/PORT and the service account's token and CA in `sa_dir`.
Result<KubeApiConfig> InClusterConfig(
    const std::string& sa_dir = "/var/run/secrets/kubernetes.io/serviceaccount");
// The status code of an Eviction answer, as PodEvictor::Evict reports it.
Status EvictionStatus(int http_status, const std::string& body);
std::unique_ptr<PodEvictor> NewKubeApiEvictor(KubeApiConfig config);

// The reclaimer over pods. Not thread-safe (the owner locks).
class PodReclaim {
 public:
  // `evictor` (not owned) may be null: then nothing is evicted (the records say dry run).
  PodReclaim(efficiency::IdleReclaimPolicy policy, efficiency::ActivityMetric metric,
             PodEvictor* evictor);
  ~PodReclaim();
  // A node's samples: its GPUs' activity, and the pods that hold them (claims).
  void Observe(const std::string& node, const std::vector<GpuSample>& gpus);
  // Decides (and acts) at `now`; returns the records of this call.
  std::vector<efficiency::ReclaimRecord> Evaluate(WallTime now);
  const std::vector<efficiency::ReclaimRecord>& log() const;
  size_t pods() const;

 private:
  class Actions;
  efficiency::ActivityMetric metric_;
  efficiency::StaticJobDirectory pods_;
  std::map<std::string, WallTime> last_seen_;  // pod -> newest sample that showed its claim
  std::unique_ptr<Actions> actions_;
  std::unique_ptr<efficiency::IdleReclaimer> reclaimer_;
};

}  // namespace stoker::k8s
