#pragma once
// The HTTP edge of the efficiency engine: posts notifier bodies (Alertmanager, owner webhooks)
// through the client library (src/client). Kept out of stoker::efficiency so the engine stays a
// pure library.

#include <string>

#include "core/clock.h"
#include "efficiency/alerts.h"

namespace stoker::efficiency {

class WebhookPoster final : public HttpPoster {
 public:
  explicit WebhookPoster(Duration timeout = std::chrono::seconds(5)) : timeout_(timeout) {}
  // `url` = "http://host:port/path". Non-2xx answers and connection failures are kUnavailable.
  Status Post(const std::string& url, const std::string& body,
              const std::string& content_type) override;

 private:
  Duration timeout_;
};

// GET helper used by the CLI, the Slurm engine (agents' snapshots) and tests (e.g. reading
// Alertmanager's /api/v2/alerts back). Non-2xx answers, connection failures and bodies over
// `max_bytes` are kUnavailable.
Result<std::string> HttpGet(const std::string& url, Duration timeout = std::chrono::seconds(5),
                            size_t max_bytes = size_t{64} << 20);

}  // namespace stoker::efficiency
