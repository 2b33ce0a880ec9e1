#pragma once
// Pod attribution in the agent: the kubelet's PodResources says which container holds which of
// Stoker's devices; this resolver (telemetry::ClaimResolver) turns that into the sample's claims
// and names the pod and container of the GPU's processes, correct on shared GPUs:
//
//   whole GPU   every pod process on it is its holder's (only that container has its device)
//   share       a process says its share by STOKER_K8S_SHARE_DEVICE (set by the device plugin's
//               Allocate) in its environment; without it, the GPU's only share holder if there
//               is one, else the process stays known by its pod UID only (never a wrong pod)
//   MIG         the process's GPU instance is a MIG instance, whose holder it is
//
// A process that is not in a pod's cgroup is never given to a pod, even on a pod's GPU: its
// memory is what the extender counts as held by processes no pod owns.
//
// The kubelet is asked at most once per `refresh` (List answers every pod of the node); what a
// process's environment says is cached per pid for `ttl`.

#include <mutex>
#include <string>
#include <unordered_map>

#include "core/clock.h"
#include "k8s/pod_resources.h"
#include "telemetry/attribution.h"

namespace stoker::k8s {

class PodAttribution final : public telemetry::ClaimResolver {
 public:
  // `source` and `clock` are not owned.
  PodAttribution(PodResourcesSource* source, const Clock* clock,
                 Duration refresh = std::chrono::seconds(2),
                 Duration ttl = std::chrono::seconds(30));
  void Resolve(GpuSample* sample, const telemetry::ProcessInfo& info) const override;
  // The holdings now (refreshed when older than `refresh`).
  Holdings Current() const;

 private:
  std::string ShareDeviceOf(uint32_t pid, const telemetry::ProcessInfo& info) const;

  PodResourcesSource* source_;
  const Clock* clock_;
  Duration refresh_, ttl_;
  mutable std::mutex mu_;
  mutable Holdings held_;       // guarded by mu_
  mutable MonoTime fetched_{};  // guarded by mu_
  mutable bool have_ = false;   // guarded by mu_
  struct Env {
    std::string share_device;
    MonoTime at;
  };
  mutable std::unordered_map<uint32_t, Env> env_;  // guarded by mu_
};

}  // namespace stoker::k8s
