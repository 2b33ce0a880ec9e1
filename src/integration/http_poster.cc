#include "integration/http_poster.h"

#include "client/api_client.h"

namespace stoker::efficiency {

Status WebhookPoster::Post(const std::string& url, const std::string& body,
                           const std::string& content_type) {
  Result<client::HttpResult> res = client::HttpRequest("POST", url, body, content_type, timeout_);
  if (!res.ok()) return Unavailable("POST " + url + ": " + res.status().message());
  if (res->status < 200 || res->status >= 300) {
    return Unavailable("POST " + url + ": HTTP " + std::to_string(res->status) + ": " + res->raw);
  }
  return Status::Ok();
}

Result<std::string> HttpGet(const std::string& url, Duration timeout, size_t max_bytes) {
  Result<client::HttpResult> res = client::HttpRequest("GET", url, "", "", timeout, max_bytes);
  if (!res.ok()) return Unavailable("GET " + url + ": " + res.status().message());
  if (res->status < 200 || res->status >= 300) {
    return Unavailable("GET " + url + ": HTTP " + std::to_string(res->status));
  }
  return std::move(res->raw);
}

}  // namespace stoker::efficiency
