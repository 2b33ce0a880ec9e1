#pragma once
// Stoker's GPU resources in Kubernetes: the extended-resource names pods request, the pod
// annotation that states GPU memory, what a pod asks for (read from its containers' resources),
// and the device IDs the device plugin advertises. One place for these names: the scheduler
// extender, the device plugin and the agent's pod attribution all use this header, and
// docs/kubernetes.md documents it.
//
//   stoker.io/gpu            whole GPUs, exclusive (N devices; device ID = the GPU's UUID)
//   stoker.io/gpu-milli      a share of ONE GPU in milli-GPU (1..1000): 1,000 devices per GPU,
//                            "<GPU UUID>::<k>"; the container gets MPS limits for its share
//   stoker.io/mig-<profile>  MIG instances of that profile (stoker.io/mig-1g.10gb: 2);
//                            device ID = the MIG instance's UUID
//   annotation stoker.io/gpu-memory   GPU memory each GPU (or share) needs ("20Gi"); default:
//                            the whole GPU's memory for whole GPUs, the share's part of it for
//                            shares (the MPS pinned-memory limit)

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace stoker::k8s {

inline constexpr std::string_view kGpuResource = "stoker.io/gpu";
inline constexpr std::string_view kGpuMilliResource = "stoker.io/gpu-milli";
inline constexpr std::string_view kMigResourcePrefix = "stoker.io/mig-";
inline constexpr std::string_view kGpuMemoryAnnotation = "stoker.io/gpu-memory";
inline constexpr int32_t kMilliPerGpu = 1000;
// Set by the device plugin in a share's container: one of its share device IDs, so the agent can
// tell which share a process on a shared GPU belongs to (the kubelet's PodResources names the
// container that holds the ID).
inline constexpr std::string_view kShareDeviceEnv = "STOKER_K8S_SHARE_DEVICE";
// The most whole GPUs or MIG instances one container may ask for (bounds every request).
inline constexpr int32_t kMaxDevicesPerContainer = 64;

// The resource name of a MIG profile: "1g.10gb" -> "stoker.io/mig-1g.10gb".
std::string MigResourceName(std::string_view profile);

// One container's request of Stoker's resources: exactly one kind, or none.
struct ContainerGpuRequest {
  std::string container;
  int32_t whole_gpus = 0;   // stoker.io/gpu
  int32_t gpu_milli = 0;    // stoker.io/gpu-milli: a share of one GPU
  std::string mig_profile;  // stoker.io/mig-<profile>
  int32_t mig_count = 0;
  bool empty() const { return whole_gpus == 0 && gpu_milli == 0 && mig_count == 0; }
};

// The container's resources as the API carries them: quantity text by resource name.
struct ContainerResources {
  std::string name;
  std::map<std::string, std::string> requests;
  std::map<std::string, std::string> limits;
};

// What a pod asks of Stoker's GPU resources.
struct PodGpuRequest {
  std::string namespace_name;
  std::string name;
  std::string uid;
  std::vector<ContainerGpuRequest> containers;       // app containers with a request
  std::vector<ContainerGpuRequest> init_containers;  // each runs alone, before the app
  uint64_t gpu_memory_bytes = 0;                     // the annotation; 0 = the default
  bool any() const { return !containers.empty() || !init_containers.empty(); }
  std::string FullName() const { return namespace_name + "/" + name; }
};

// Reads the request from the containers' resources (limits, else requests: the two must agree
// for extended resources) and the annotations. InvalidArgument names the container, resource
// and what is wrong: a fraction, two kinds in one container, a share over one GPU, a count over
// kMaxDevicesPerContainer, a bad memory annotation.
Result<PodGpuRequest> ReadPodGpuRequest(std::string namespace_name, std::string name,
                                        std::string uid,
                                        const std::vector<ContainerResources>& containers,
                                        const std::vector<ContainerResources>& init_containers,
                                        const std::map<std::string, std::string>& annotations);

// A device ID the device plugin advertises, decoded.
struct DeviceId {
  enum class Kind { kWholeGpu, kShare, kMig };
  Kind kind = Kind::kWholeGpu;
  std::string uuid;  // the GPU's UUID (whole, share) or the MIG instance's UUID
  int32_t share_index = -1;
};
std::string ShareDeviceId(std::string_view gpu_uuid, int32_t k);
// "GPU-..." whole, "GPU-...::123" share, "MIG-..." MIG; nullopt for anything else.
std::optional<DeviceId> ParseDeviceId(std::string_view id);

}  // namespace stoker::k8s
