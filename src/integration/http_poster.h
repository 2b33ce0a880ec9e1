#pragma once
// The HTTP edge of the efficiency engine: posts notifier bodies (Alertmanager, owner webhooks)
// with cpp-httplib. Kept out of stoker::efficiency so the engine stays a pure library.

#include <string>

#include "core/clock.h"
#include "efficiency/alerts.h"

namespace stoker::efficiency {

class HttplibPoster final : public HttpPoster {
 public:
  explicit HttplibPoster(Duration timeout = std::chrono::seconds(5)) : timeout_(timeout) {}
  // `url` = "http://host:port/path". Non-2xx answers and connection failures are kUnavailable.
  Status Post(const std::string& url, const std::string& body,
              const std::string& content_type) override;

 private:
  Duration timeout_;
};

// GET helper used by the CLI and tests (e.g. reading Alertmanager's /api/v2/alerts back).
Result<std::string> HttpGet(const std::string& url, Duration timeout = std::chrono::seconds(5));

}  // namespace stoker::efficiency
