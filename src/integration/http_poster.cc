#include "integration/http_poster.h"

#include <fcntl.h>
#include <httplib.h>

namespace stoker::efficiency {
namespace {

struct UrlParts {
  std::string origin;  // scheme://host:port
  std::string path;
};

Result<UrlParts> Split(const std::string& url) {
  const auto scheme = url.find("://");
  if (scheme == std::string::npos) return InvalidArgument("bad URL '" + url + "': no scheme");
  const auto slash = url.find('/', scheme + 3);
  UrlParts p;
  p.origin = url.substr(0, slash);
  p.path = slash == std::string::npos ? "/" : url.substr(slash);
  return p;
}

void SetTimeouts(httplib::Client& c, Duration timeout) {
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(timeout).count();
  c.set_connection_timeout(us / 1'000'000, us % 1'000'000);
  c.set_read_timeout(us / 1'000'000, us % 1'000'000);
  c.set_write_timeout(us / 1'000'000, us % 1'000'000);
  // No process the server starts may inherit a connection.
  c.set_socket_options([](socket_t sock) { ::fcntl(sock, F_SETFD, FD_CLOEXEC); });
}

}  // namespace

Status HttplibPoster::Post(const std::string& url, const std::string& body,
                           const std::string& content_type) {
  STOKER_ASSIGN_OR_RETURN(UrlParts p, Split(url));
  try {
    httplib::Client c(p.origin);
    SetTimeouts(c, timeout_);
    auto res = c.Post(p.path.c_str(), body, content_type.c_str());
    if (!res) return Unavailable("POST " + url + ": " + httplib::to_string(res.error()));
    if (res->status < 200 || res->status >= 300) {
      return Unavailable("POST " + url + ": HTTP " + std::to_string(res->status) + ": " +
                         res->body);
    }
  } catch (const std::exception& e) {  // httplib throws on malformed hosts
    return Unavailable("POST " + url + ": " + e.what());
  }
  return Status::Ok();
}

Result<std::string> HttpGet(const std::string& url, Duration timeout, size_t max_bytes) {
  STOKER_ASSIGN_OR_RETURN(UrlParts p, Split(url));
  try {
    httplib::Client c(p.origin);
    SetTimeouts(c, timeout);
    std::string body;
    bool too_large = false;
    auto res = c.Get(p.path.c_str(), [&](const char* data, size_t n) {
      if (body.size() + n > max_bytes) {
        too_large = true;
        return false;
      }
      body.append(data, n);
      return true;
    });
    if (too_large) {
      return Unavailable("GET " + url + ": answer larger than " + std::to_string(max_bytes) +
                         " bytes");
    }
    if (!res) return Unavailable("GET " + url + ": " + httplib::to_string(res.error()));
    if (res->status < 200 || res->status >= 300) {
      return Unavailable("GET " + url + ": HTTP " + std::to_string(res->status));
    }
    return body;
  } catch (const std::exception& e) {
    return Unavailable("GET " + url + ": " + e.what());
  }
}

}  // namespace stoker::efficiency
