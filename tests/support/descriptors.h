#pragma once
// What a process holds open, for tests of descriptor hygiene: every descriptor Stoker opens
// must be close-on-exec, so that no process it starts (a job's shim) inherits it.

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

namespace stoker::testing {

inline std::set<int> OpenDescriptors() {
  std::set<int> fds;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    fds.insert(std::atoi(e.path().filename().c_str()));
  }
  return fds;
}

// The descriptors opened since `before` that a child would inherit across exec, each as
// "N -> target".
inline std::vector<std::string> InheritableSince(const std::set<int>& before) {
  std::vector<std::string> out;
  for (int fd : OpenDescriptors()) {
    if (fd <= 2 || before.count(fd)) continue;
    const int flags = ::fcntl(fd, F_GETFD);
    if (flags < 0 || (flags & FD_CLOEXEC)) continue;  // gone meanwhile (the listing's own fd)
    std::error_code ec;
    const auto target =
        std::filesystem::read_symlink("/proc/self/fd/" + std::to_string(fd), ec).string();
    out.push_back(std::to_string(fd) + " -> " + target);
  }
  return out;
}

}  // namespace stoker::testing
