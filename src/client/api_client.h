#pragma once
// The client library: a small blocking JSON client of the Stoker API (cpp-httplib) used by the
// CLI, the node loop and the load generator. Its sockets are close-on-exec.

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"

namespace stoker::client {

using json = nlohmann::json;

struct HttpResult {
  int status = 0;
  json body;  // parsed JSON (null when the body was not JSON)
  std::string raw;
};

// Blocking JSON client. Thread-compatible (one instance per thread).
class ApiClient {
 public:
  // `base_url`: "http://127.0.0.1:8470" or "https://..."; `ca_file` for HTTPS (empty: system).
  ApiClient(std::string base_url, std::string token, double timeout_s = 10,
            std::string ca_file = "");
  ~ApiClient();
  ApiClient(ApiClient&&) noexcept;
  ApiClient& operator=(ApiClient&&) noexcept;
  // Unavailable when the server cannot be reached.
  Result<HttpResult> Get(const std::string& path);
  Result<HttpResult> Post(const std::string& path, const json& body);
  // POST of a body that is already JSON text.
  Result<HttpResult> PostBody(const std::string& path, const std::string& body) {
    return Do("POST", path, body);
  }
  Result<HttpResult> Put(const std::string& path, const json& body);
  Result<HttpResult> Delete(const std::string& path) { return Do("DELETE", path, ""); }
  void set_keep_alive(bool on) { keep_alive_ = on; }
  const std::string& base_url() const { return base_url_; }

 private:
  Result<HttpResult> Do(const std::string& method, const std::string& path,
                        const std::string& body);
  std::string base_url_;
  std::string token_;
  double timeout_s_;
  std::string ca_file_;
  bool keep_alive_ = false;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// An API error from an HttpResult as a Status (code from the HTTP status, message from the body).
Status StatusFromHttp(const HttpResult& r);

}  // namespace stoker::client
