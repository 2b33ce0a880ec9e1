#pragma once
// The HTTP layer's Listener: an HTTP/1.1 (and HTTPS) server on Boost.Beast over Asio (epoll)
// that hands every request to a Handler and writes back its Response. It knows nothing of
// Stoker's API: the server's routes (server/api.h) and the agent's exporter
// (agent/agent_server.h) are handlers. (Named Listener, not Server, so that it is never taken
// for the controller's domain, server::Server.)
//
// What it guarantees for every connection (tests/server/http_server_test.cc checks each over
// real sockets):
//   - descriptors are close-on-exec from the moment they exist (socket(SOCK_CLOEXEC),
//     accept4(SOCK_CLOEXEC)), so no process this one starts inherits a listener or a client;
//   - request headers at most `max_header_bytes` (431), bodies at most `max_body_bytes` (413,
//     refused from Content-Length before the body is read);
//   - a request must arrive completely within `request_timeout` of its first byte, and an idle
//     keep-alive connection is closed after `idle_timeout` (slow-loris guard);
//   - beyond `max_connections` new connections are closed at once; malformed HTTP gets 400.

#include <chrono>
#include <map>
#include <memory>
#include <string>

#include "core/status.h"

namespace stoker::http {

struct Request {
  std::string method;  // GET, POST, PUT, DELETE
  std::string path;    // percent-decoded, without the query: "/api/v1/jobs/12"
  // Percent-decoded query parameters; the first occurrence of a name wins.
  std::map<std::string, std::string> query;
  std::string authorization;  // the Authorization header
  std::string body;
  // HTTPS with a client CA (ListenerOptions::tls_client_ca): the Common Name of the client
  // certificate the connection presented and the CA verified; empty without one.
  std::string client_cert_cn;
};

struct Response {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
};

// Called concurrently from the server's worker threads.
class Handler {
 public:
  virtual ~Handler() = default;
  virtual Response Handle(const Request& request) const = 0;
};

struct ListenerOptions {
  std::string host = "127.0.0.1";
  int port = 8470;       // 0: pick a free port (see Listener::port())
  std::string tls_cert;  // PEM files; both set -> HTTPS
  std::string tls_key;
  // PEM file of the CA(s) whose client certificates are accepted (HTTPS only). A client may
  // still connect without a certificate (and use a token); one that presents a certificate the
  // CA did not sign fails the handshake. The verified certificate's CN is in Request.
  std::string tls_client_ca;
  // Threads that run handlers (a submission waits there for its durable commit, so this bounds
  // how many commits can be grouped). Connections are not tied to threads.
  int threads = 32;
  int io_threads = 2;           // threads that read and write the sockets
  int max_connections = 20000;  // beyond this a new connection is closed at once
  size_t max_header_bytes = size_t{16} * 1024;
  size_t max_body_bytes = size_t{4} << 20;
  std::chrono::seconds request_timeout{30};
  std::chrono::seconds idle_timeout{75};
};

class Listener {
 public:
  // `handler` is not owned and must outlive the server.
  Listener(const Handler* handler, ListenerOptions options);
  ~Listener();
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  // Binds and starts serving on background threads. Unavailable when the address cannot be
  // bound, InvalidArgument for a bad address or TLS files (the message names the file).
  Status Start();
  void Stop();
  int port() const { return port_; }
  std::string url() const;

  struct Impl;

 private:
  const Handler* handler_;
  ListenerOptions options_;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

// "host:port" -> (host, port). InvalidArgument names the problem.
Result<std::pair<std::string, int>> ParseHostPort(const std::string& s);

// The JSON error body every Stoker HTTP service answers with:
// {"error": {"code": CODE, "message": MESSAGE}}.
std::string ErrorBody(const std::string& code, const std::string& message);

}  // namespace stoker::http
