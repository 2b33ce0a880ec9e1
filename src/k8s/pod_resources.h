#pragma once
// Which container the kubelet gave which of Stoker's devices, from the kubelet's PodResources API
// (v1 List over /var/lib/kubelet/pod-resources/kubelet.sock), and what that means per GPU:
// the claims the agent adds to its samples (core/gpu.h GpuClaim) and the device plugin's view of
// what is taken.
//
// Device IDs are Stoker's (resources.h): a GPU UUID for stoker.io/gpu, "<GPU UUID>::<k>" for
// stoker.io/gpu-milli (a container's share is the number of its IDs), a MIG UUID for
// stoker.io/mig-<profile>.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/gpu.h"
#include "core/status.h"

namespace stoker::k8s {

// One container's devices of one resource, as List answers.
struct ContainerDevices {
  std::string namespace_name;
  std::string pod;
  std::string container;
  std::string resource;
  std::vector<std::string> device_ids;
};

// Where the allocations come from: the kubelet in production, a list in tests.
class PodResourcesSource {
 public:
  virtual ~PodResourcesSource() = default;
  // Every container's devices (of every resource); Unavailable when the kubelet cannot be asked.
  virtual Result<std::vector<ContainerDevices>> List() = 0;
};

// The kubelet's PodResources List over its unix socket (gRPC), with a deadline per call. At most
// kMaxPodResourcesBytes of answer are read.
inline constexpr int kMaxPodResourcesBytes = 16 << 20;
std::unique_ptr<PodResourcesSource> NewKubeletPodResources(
    std::string socket_path, Duration timeout = std::chrono::seconds(5));

// Who holds Stoker's devices on this node, by GPU.
struct Holdings {
  struct Holder {
    JobRef job;  // kind kubernetes, id "<namespace>/<pod>", container
  };
  std::map<std::string, Holder> whole;  // GPU UUID -> the container holding it whole
  // GPU UUID -> container -> share IDs it holds (its share is their count)
  std::map<std::string, std::map<std::string, std::vector<std::string>>> shares;
  std::map<std::string, Holder> share_holder;  // share device ID -> container ("ns/pod/c")
  std::map<std::string, Holder> mig;           // MIG UUID -> container
  std::map<std::string, Holder> containers;    // "ns/pod/container" -> holder

  bool SharedOut(const std::string& gpu_uuid) const;
  bool HeldWhole(const std::string& gpu_uuid) const { return whole.count(gpu_uuid) != 0; }
};

// Stoker's devices in `list` (other resources are ignored), grouped by GPU.
Holdings HoldingsFrom(const std::vector<ContainerDevices>& list);

// The claims on one GPU: a whole-GPU holder, each container's share, each MIG instance of the
// GPU (`mig_uuids`: the GPU's instances) that a container holds.
std::vector<GpuClaim> ClaimsOn(const Holdings& h, const std::string& gpu_uuid,
                               const std::vector<std::string>& mig_uuids);

}  // namespace stoker::k8s
