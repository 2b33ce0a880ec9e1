#pragma once
// HTTP(S) transport for the API: a server (Boost.Beast, http_server.cc) that forwards every
// request to Api::Handle, and a small JSON client (cpp-httplib, http.cc) used by the CLI, the
// node loop and the load generator.

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "core/status.h"
#include "server/api.h"

namespace stoker::server {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8470;       // 0: pick a free port (see HttpServer::port())
  std::string tls_cert;  // PEM files; both set -> HTTPS
  std::string tls_key;
  // Threads that run request handlers (a submission waits there for its durable commit, so
  // this bounds how many commits can be grouped). Connections are not tied to threads.
  int threads = 32;
  int io_threads = 2;           // threads that read and write the sockets
  int max_connections = 20000;  // beyond this a new connection is closed at once
};

class HttpServer {
 public:
  HttpServer(Api* api, HttpOptions options);
  ~HttpServer();
  // Binds and starts serving on a background thread.
  Status Start();
  void Stop();
  int port() const { return port_; }
  std::string url() const;

  struct Impl;

 private:
  Api* api_;
  HttpOptions options_;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

// "host:port" -> (host, port). InvalidArgument names the problem.
Result<std::pair<std::string, int>> ParseHostPort(const std::string& s);

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

}  // namespace stoker::server
