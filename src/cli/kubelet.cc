#include "cli/kubelet.h"

#include <limits.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>

#include "cli/cli.h"

namespace stoker::cli {
namespace {

KubeletHooks g_hooks;
int g_argc = 0;
char** g_argv = nullptr;

}  // namespace

void SetKubeletHooks(const KubeletHooks& hooks) { g_hooks = hooks; }
const KubeletHooks& Kubelet() { return g_hooks; }

void SetCommandLine(int argc, char** argv) {
  g_argc = argc;
  g_argv = argv;
}

int RunKubeletProgram(std::string_view command) {
#ifndef STOKER_KUBELET_PROGRAM
  std::cerr << "stoker " << command
            << ": this build has no gRPC (the portable binary); use the Debian build\n";
  return kExitUnavailable;
#else
  char self[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0 || g_argv == nullptr) {
    std::cerr << "stoker " << command << ": cannot find this program's own path to run "
              << STOKER_KUBELET_PROGRAM << " beside it\n";
    return kExitFailure;
  }
  std::string path(self, static_cast<size_t>(n));
  path.erase(path.rfind('/') + 1);
  path += STOKER_KUBELET_PROGRAM;
  std::vector<char*> args(g_argv, g_argv + g_argc);
  args.push_back(nullptr);
  args[0] = path.data();
  execv(path.c_str(), args.data());
  const int err = errno;
  std::cerr << "stoker " << command << ": cannot run " << path
            << " (the program with the kubelet's gRPC APIs, installed beside stoker): "
            << std::strerror(err) << "\n";
  return err == ENOENT ? kExitUnavailable : kExitFailure;
#endif
}

}  // namespace stoker::cli
