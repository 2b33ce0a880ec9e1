#pragma once
// Stoker's GPU device plugin (kubelet device-plugin API v1beta1, `stoker device-plugin`).
//
// Resources, each served on its own socket in the kubelet's device-plugin directory and
// registered on the kubelet's socket there:
//   stoker.io/gpu            one device per GPU (its UUID)                    stoker-gpu.sock
//   stoker.io/gpu-milli      1,000 devices per GPU ("<UUID>::<k>") stoker-gpu-milli.sock
//   stoker.io/mig-<profile>  one device per MIG instance (its UUID) stoker-mig-<profile>.sock
//
// Health comes from the agent's NVML view (GpuSource): a GPU that is lost, unreachable, whose
// row remapping failed or is pending, or that raised a red XID in the last `xid_hold`, is
// Unhealthy; when it answers again it is Healthy again, and ListAndWatch says so (the kubelet
// then offers it again). A GPU held whole by a pod withdraws its share devices, and a GPU with
// shares handed out withdraws its whole device (reported Unhealthy: the only way the API has to
// take a device back), so the kubelet never gives one GPU both ways.
//
// GetPreferredAllocation packs by Stoker's placement policy over this node's GPUs (free share
// = the smaller of the unallocated share devices and the measured free memory). Allocate gives
// the container its GPU (NVIDIA_VISIBLE_DEVICES and the device nodes) and, for a share, the
// limits NVIDIA MPS enforces: CUDA_MPS_ACTIVE_THREAD_PERCENTAGE (the share in % of the SMs,
// rounded up) and CUDA_MPS_PINNED_DEVICE_MEM_LIMIT (the share of the GPU's memory), with the MPS
// pipe and shared-memory directories of the node's nvidia-cuda-mps-control mounted in.

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/gpu.h"
#include "core/gpu_source.h"
#include "core/status.h"
#include "k8s/pod_resources.h"

namespace stoker::k8s {

inline constexpr std::string_view kDevicePluginApiVersion = "v1beta1";
inline constexpr std::string_view kHealthy = "Healthy";
inline constexpr std::string_view kUnhealthy = "Unhealthy";

struct DeviceState {
  std::string id;
  bool healthy = true;
  friend bool operator==(const DeviceState&, const DeviceState&) = default;
};

// One resource the plugin serves, its socket file name and its devices now.
struct ResourceDevices {
  std::string resource;  // stoker.io/gpu
  std::string endpoint;  // stoker-gpu.sock
  std::vector<DeviceState> devices;
};

// Why a GPU is not healthy ("" when it is): health, row remapping, a recent red XID.
std::string GpuUnhealthy(const GpuSample& s, bool recent_red_xid);

// The device lists of every resource for these GPUs (`unhealthy[i]`: why GPU i is not healthy,
// "" if it is) and what pods hold. MIG resources: one per profile present on a MIG-enabled GPU;
// `mig_profiles` adds profiles that must be served even when no instance has them now.
std::vector<ResourceDevices> DeviceLists(const std::vector<GpuSample>& gpus,
                                         const std::vector<std::string>& unhealthy,
                                         const Holdings& held,
                                         const std::set<std::string>& mig_profiles = {});

// GetPreferredAllocation for one container: `size` devices out of `available`, all of
// `must_include` among them. Shares: all on one GPU, chosen by Stoker's policy; whole GPUs:
// the policy's GPUs; MIG: in order. InvalidArgument when it cannot be done (too few devices, a
// share that no single GPU can hold).
Result<std::vector<std::string>> PreferredDevices(std::string_view resource,
                                                  const std::vector<GpuSample>& gpus,
                                                  const std::vector<std::string>& available,
                                                  const std::vector<std::string>& must_include,
                                                  int32_t size);

// What Allocate answers for one container.
struct Mount {
  std::string container_path, host_path;
  bool read_only = false;
  friend bool operator==(const Mount&, const Mount&) = default;
};
struct DeviceNode {
  std::string container_path, host_path, permissions;
  friend bool operator==(const DeviceNode&, const DeviceNode&) = default;
};
struct ContainerAllocation {
  std::map<std::string, std::string> envs;
  std::vector<Mount> mounts;
  std::vector<DeviceNode> devices;
};

struct AllocateConfig {
  std::string mps_pipe_dir = "/run/stoker/mps/pipe";  // host = container path
  std::string mps_shm_dir = "/run/stoker/mps/shm";    // host path, mounted at /dev/shm
  std::string dev_root = "/dev";  // where device nodes are looked for (only those that exist)
};

ContainerAllocation AllocateWhole(const std::vector<const GpuSample*>& gpus,
                                  const AllocateConfig& cfg);
// A share of `milli` (the number of share devices) of `gpu`, device ID `first_id` among them.
ContainerAllocation AllocateShare(const GpuSample& gpu, int32_t milli, const std::string& first_id,
                                  const AllocateConfig& cfg);
ContainerAllocation AllocateMig(const GpuSample& gpu, const std::vector<std::string>& mig_uuids,
                                const AllocateConfig& cfg);
// Allocate for one container's device IDs of `resource`. InvalidArgument for unknown devices,
// a share spread over GPUs, or devices of another resource.
Result<ContainerAllocation> AllocateContainer(std::string_view resource,
                                              const std::vector<std::string>& device_ids,
                                              const std::vector<GpuSample>& gpus,
                                              const AllocateConfig& cfg);

struct DevicePluginOptions {
  std::string plugin_dir = "/var/lib/kubelet/device-plugins";
  std::string kubelet_socket = "kubelet.sock";  // in plugin_dir
  Duration refresh = std::chrono::seconds(1);   // NVML health, pod allocations
  Duration watch = std::chrono::seconds(1);     // kubelet restarts, deleted sockets
  Duration xid_hold = std::chrono::minutes(5);  // a red XID keeps a GPU unhealthy this long
  Duration rpc_timeout = std::chrono::seconds(5);
  AllocateConfig allocate;
  std::set<std::string> mig_profiles;  // MIG resources served even with no instance now
};

// The plugin: samples the GPUs (and asks the kubelet what it has allocated), serves every
// resource's socket, registers them with the kubelet, and registers again when the kubelet
// restarts (its socket is recreated) or a socket of ours is deleted.
class DevicePlugin {
 public:
  // `source` and `clock` are not owned; `pods` may be null (no availability rules).
  DevicePlugin(GpuSource* source, Clock* clock, PodResourcesSource* pods,
               DevicePluginOptions options);
  ~DevicePlugin();
  DevicePlugin(const DevicePlugin&) = delete;
  DevicePlugin& operator=(const DevicePlugin&) = delete;

  // Samples once, starts serving, registers; then refresh and watch threads run until Stop().
  // Unavailable when the kubelet's socket does not answer (the watch keeps trying).
  Status Start();
  void Stop();

  // One refresh (the thread's step): samples every GPU, reads the allocations, recomputes the
  // device lists and wakes ListAndWatch streams whose list changed.
  void Refresh();
  // One watch step: re-serves and re-registers when the kubelet's socket was recreated or one of
  // ours is gone. Returns true when it registered.
  bool Watch();

  std::vector<std::string> Resources() const;
  int64_t registrations() const { return registrations_.load(); }

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
  std::atomic<int64_t> registrations_{0};
};

}  // namespace stoker::k8s
