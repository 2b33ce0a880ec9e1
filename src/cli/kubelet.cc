#include "cli/kubelet.h"

#include <iostream>

#include "cli/cli.h"
#include "cli/programs.h"

namespace stoker::cli {
namespace {

KubeletHooks g_hooks;

}  // namespace

void SetKubeletHooks(const KubeletHooks& hooks) { g_hooks = hooks; }
const KubeletHooks& Kubelet() { return g_hooks; }

int RunKubeletProgram(std::string_view command) {
#ifndef STOKER_KUBELET_PROGRAM
  std::cerr << "stoker " << command
            << ": this build has no gRPC (the portable binary); use the Debian build\n";
  return kExitUnavailable;
#else
  const Status s = ExecSibling(STOKER_KUBELET_PROGRAM,
                               "the program with the kubelet's gRPC APIs, installed beside stoker");
  std::cerr << "stoker " << command << ": " << s.message() << "\n";
  return ExitCodeFor(s);
#endif
}

}  // namespace stoker::cli
