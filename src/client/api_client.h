#pragma once
// The client library: a small blocking HTTP(S) client on Boost.Beast (header-only, with OpenSSL
// for HTTPS), used by the CLI, the node loop and the load generator for the Stoker API, and by
// the server's adapters for webhooks, agents' snapshots and the Kubernetes API. A short command
// such as `stoker submit` loads no HTTP library. Its sockets are close-on-exec from the moment
// they exist; HTTPS verifies the server's certificate and host name. The same source is built
// twice: stoker::client with OpenSSL, and stoker::client_plain without it (plain HTTP only), for
// the `stoker` program whose short commands must not map and relocate OpenSSL
// (docs/architecture.md, "Programs").

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/clock.h"
#include "core/status.h"

namespace stoker::client {

using json = nlohmann::json;

// "http://host:port/prefix", "https://[::1]:8443"; the port defaults to 80 or 443.
struct Url {
  bool tls = false;
  std::string host;
  uint16_t port = 0;
  std::string path;  // what follows host:port ("" when nothing does)
};
Result<Url> ParseUrl(std::string_view url);

struct HttpResult {
  int status = 0;
  json body;  // parsed JSON (null when the body was not JSON)
  std::string raw;
};

// The largest answer the API client reads (a listing of 10,000 jobs is a few MB).
inline constexpr uint64_t kMaxApiAnswerBytes = uint64_t{256} << 20;

// Blocking client of one server. Thread-compatible (one instance per thread).
class ApiClient {
 public:
  // `base_url`: "http://127.0.0.1:8470" or "https://..." (a path prefix is kept in front of
  // every request's path); `ca_file` verifies HTTPS servers (empty: the system's CAs).
  ApiClient(std::string base_url, std::string token, double timeout_s = 10,
            std::string ca_file = "");
  ~ApiClient();
  ApiClient(ApiClient&&) noexcept;
  ApiClient& operator=(ApiClient&&) noexcept;
  // Unavailable when the server cannot be reached or does not answer in time; InvalidArgument
  // for a bad URL or CA file.
  Result<HttpResult> Get(const std::string& path);
  Result<HttpResult> Post(const std::string& path, const json& body);
  // POST of a body that is already JSON text.
  Result<HttpResult> PostBody(const std::string& path, const std::string& body) {
    return Send("POST", path, body, "application/json");
  }
  Result<HttpResult> Put(const std::string& path, const json& body);
  Result<HttpResult> Delete(const std::string& path) {
    return Send("DELETE", path, "", "application/json");
  }
  // Any request; `content_type` is sent with a POST's or PUT's body. An answer over
  // `max_bytes` is Unavailable ("answer larger than N bytes").
  Result<HttpResult> Send(const std::string& method, const std::string& path,
                          const std::string& body, const std::string& content_type,
                          uint64_t max_bytes = kMaxApiAnswerBytes);
  void set_keep_alive(bool on) { keep_alive_ = on; }
  const std::string& base_url() const { return base_url_; }

 private:
  friend Result<HttpResult> HttpRequest(const std::string&, const std::string&, const std::string&,
                                        const std::string&, Duration, uint64_t);
  // Send without naming the server in a transport error.
  Result<HttpResult> Transfer(const std::string& method, const std::string& path,
                              const std::string& body, const std::string& content_type,
                              uint64_t max_bytes);
  std::string base_url_;
  std::string token_;
  double timeout_s_;
  std::string ca_file_;
  bool keep_alive_ = false;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One request to a URL on a new connection, without a token (webhooks, Alertmanager, agents'
// snapshots). Transport failures are Unavailable; HTTP error statuses are answers.
Result<HttpResult> HttpRequest(const std::string& method, const std::string& url,
                               const std::string& body, const std::string& content_type,
                               Duration timeout, uint64_t max_bytes = kMaxApiAnswerBytes);

// Whether this build speaks HTTPS: true in stoker::client; false in stoker::client_plain, where
// an https:// URL fails with FailedPrecondition before any connection is made.
bool HasTls();

// An API error from an HttpResult as a Status (code from the HTTP status, message from the body).
Status StatusFromHttp(const HttpResult& r);

}  // namespace stoker::client
