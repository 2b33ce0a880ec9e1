// stoker-k8s: the `stoker` CLI with the kubelet's gRPC APIs (cli/kubelet.h). `stoker` runs it,
// from its own directory, for `stoker device-plugin` and `stoker agent --kubelet-pod-resources`.
#include "cli/cli.h"
#include "cli/kubelet.h"

int main(int argc, char** argv) {
  stoker::cli::UseKubeletGrpc();
  return stoker::cli::Main(argc, argv);
}
