#pragma once
// Parsing of the agent's command-line values (also the libFuzzer target's surface): listen
// addresses and durations. Bad input is an InvalidArgument naming the value, never a crash.

#include <cstdint>
#include <string>
#include <string_view>

#include "core/clock.h"
#include "core/duration.h"  // ParseDuration
#include "core/status.h"

namespace stoker::agent {

// 9471: distinct from dcgm-exporter (9400) and node_exporter (9100) so all three can run on
// one node, and unassigned in the Prometheus default-port registry neighbourhood we checked.
inline constexpr uint16_t kDefaultAgentPort = 9471;

struct ListenAddress {
  std::string host;   // "127.0.0.1", "0.0.0.0", "::1", "localhost"
  uint16_t port = 0;  // 0 = pick an ephemeral port
};

// "HOST:PORT", "[IPV6]:PORT", ":PORT" (all interfaces, 0.0.0.0) or "PORT" (127.0.0.1).
Result<ListenAddress> ParseListenAddress(std::string_view text);

}  // namespace stoker::agent
