#include "agent/agent_config.h"

#include <cmath>

#include "core/integer.h"

namespace stoker::agent {
namespace {

bool ValidHost(std::string_view h) {
  if (h.empty() || h.size() > 253) return false;
  for (char c : h) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '-' || c == ':' || c == '_' || c == '%';
    if (!ok) return false;
  }
  return true;
}

Result<uint16_t> ParsePort(std::string_view text, std::string_view whole) {
  auto port = ParseInt(text, 0, 65535);
  if (!port.ok()) {
    return InvalidArgument("listen address '" + std::string(whole) +
                           "': port: " + port.status().message());
  }
  return static_cast<uint16_t>(*port);
}

}  // namespace

Result<ListenAddress> ParseListenAddress(std::string_view text) {
  ListenAddress addr;
  std::string_view host;
  std::string_view port;
  if (text.starts_with('[')) {
    const size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return InvalidArgument("listen address '" + std::string(text) + "': expected [IPV6]:PORT");
    }
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else if (const size_t colon = text.rfind(':'); colon != std::string_view::npos) {
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) {
      return InvalidArgument("listen address '" + std::string(text) +
                             "': write IPv6 addresses as [ADDR]:PORT");
    }
    if (host.empty()) host = "0.0.0.0";
  } else {
    host = "127.0.0.1";
    port = text;
  }
  if (!ValidHost(host)) {
    return InvalidArgument("listen address '" + std::string(text) + "': bad host '" +
                           std::string(host) + "'");
  }
  STOKER_ASSIGN_OR_RETURN(addr.port, ParsePort(port, text));
  addr.host = std::string(host);
  return addr;
}

}  // namespace stoker::agent
