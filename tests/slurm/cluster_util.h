#pragma once
// What the tests against the real cluster (the slurm_cluster ctest fixture) share: where its
// configuration is, a shell command run with SLURM_CONF set, and waiting for a condition.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "slurm/client.h"

namespace stoker::slurm::testing {

inline const std::string kConf = STOKER_SLURM_CONF;
inline const std::string kDir = kConf.substr(0, kConf.rfind('/'));

// Runs `cmd` with /bin/sh against the fixture's cluster; expects exit 0 and returns stdout
// without its trailing newlines.
inline std::string Sh(const std::string& cmd) {
  auto r = RunCommand({"/bin/sh", "-c", cmd}, {{"SLURM_CONF", kConf}}, std::chrono::seconds(60),
                      1 << 20);
  EXPECT_TRUE(r.ok()) << cmd << ": " << r.status().ToString();
  if (!r.ok()) return "";
  EXPECT_EQ(r->exit_code, 0) << cmd << ": " << r->err;
  std::string out = r->out;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

template <typename F>
bool WaitFor(F f, std::chrono::seconds limit = std::chrono::seconds(30)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (f()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return f();
}

}  // namespace stoker::slurm::testing
