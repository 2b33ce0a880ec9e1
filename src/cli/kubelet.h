#pragma once
// The kubelet's gRPC APIs in the CLI: `stoker device-plugin` and `stoker agent
// --kubelet-pod-resources`. gRPC and protobuf are linked only into the program stoker-k8s,
// built and installed beside `stoker` (src/apps): linked into `stoker`, their static
// initialisers ran in every command, a `stoker submit` too (docs/performance.md, "CLI").
// stoker-full (programs.h) registers the same flags (help, checks) and, for those two commands,
// runs stoker-k8s on the same command line; stoker-k8s sets the hooks (cli/kubelet/grpc.cc)
// before Main.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace stoker::k8s {
class PodResourcesSource;
}  // namespace stoker::k8s

namespace stoker::cli {

struct DevicePluginFlags {
  std::string plugin_dir = "/var/lib/kubelet/device-plugins";
  std::string kubelet_socket = "kubelet.sock";
  std::string pod_resources;
  std::string node_name;
  std::string mps_pipe_dir = "/run/stoker/mps/pipe";
  std::string mps_shm_dir = "/run/stoker/mps/shm";
  std::string dev_root = "/dev";
  std::string refresh = "1s";
  std::string xid_hold = "5m";
  std::vector<std::string> mig_profiles;
  std::string simulate;
  std::string nvml_lib = "libnvidia-ml.so.1";
};

// What needs gRPC. Both null in stoker-full; set in stoker-k8s.
struct KubeletHooks {
  int (*run_device_plugin)(const DevicePluginFlags& flags) = nullptr;
  std::unique_ptr<k8s::PodResourcesSource> (*pod_resources)(const std::string& socket) = nullptr;
};
void SetKubeletHooks(const KubeletHooks& hooks);
const KubeletHooks& Kubelet();
// Sets stoker-k8s's hooks; defined in cli/kubelet/grpc.cc (the library stoker::cli_kubelet).
void UseKubeletGrpc();

// Replaces this process by stoker-k8s from the directory of this program's executable, on the
// same command line (ExecSibling, programs.h). Returns only when that fails, with the exit code,
// after saying why on stderr (`command` names the command in the message).
int RunKubeletProgram(std::string_view command);

}  // namespace stoker::cli
