// The HTTP(S) front end over real sockets: keep-alive, limits, malformed requests, query
// decoding, `Expect: 100-continue` and TLS. Routing and validation are Api's (api_test.cc).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <thread>

#include "client/api_client.h"
#include "support/descriptors.h"
#include "test_util.h"

namespace stoker::server {
namespace {
using testing::Fixture;

// A blocking loopback connection that speaks raw bytes.
class RawConn {
 public:
  explicit RawConn(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    timeval tv{10, 0};  // a hung server fails the test instead of hanging it
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  }
  ~RawConn() { ::close(fd_); }
  bool connected() const { return connected_; }
  int fd() const { return fd_; }
  void Send(const std::string& bytes) {
    ASSERT_EQ(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
  }
  // Reads one response (headers + Content-Length body); "" when the peer closed first.
  std::string ReadResponse() {
    while (true) {
      const size_t end = buf_.find("\r\n\r\n");
      if (end != std::string::npos) {
        size_t len = 0;
        const std::string head = buf_.substr(0, end);
        if (auto p = head.find("Content-Length: "); p != std::string::npos) {
          len = std::strtoul(head.c_str() + p + 16, nullptr, 10);
        }
        if (buf_.size() >= end + 4 + len) {
          std::string out = buf_.substr(0, end + 4 + len);
          buf_.erase(0, end + 4 + len);
          return out;
        }
      }
      char tmp[4096];
      const ssize_t n = ::recv(fd_, tmp, sizeof(tmp), 0);
      if (n <= 0) return "";
      buf_.append(tmp, static_cast<size_t>(n));
    }
  }
  // True when the server closed the connection (recv returns 0).
  bool PeerClosed() {
    char c;
    return ::recv(fd_, &c, 1, 0) == 0;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
  std::string buf_;
};

class HttpServerTest : public ::testing::Test {
 protected:
  HttpServerTest() : f_("http") {}
  void Start(http::ListenerOptions o = {}) {
    o.host = "127.0.0.1";
    o.port = 0;
    http_ = std::make_unique<http::Listener>(f_.api.get(), o);
    ASSERT_TRUE(http_->Start().ok());
  }
  std::string Get(const std::string& target, const std::string& token) {
    return "GET " + target + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + token + "\r\n\r\n";
  }

  Fixture f_;
  std::unique_ptr<http::Listener> http_;
};

TEST_F(HttpServerTest, KeepAliveServesSeveralRequestsOnOneConnection) {
  Start();
  RawConn c(http_->port());
  ASSERT_TRUE(c.connected());
  for (int i = 0; i < 3; ++i) {
    c.Send(Get("/api/v1/health", ""));
    const std::string r = c.ReadResponse();
    EXPECT_EQ(r.rfind("HTTP/1.1 200", 0), 0u) << r;
    EXPECT_NE(r.find("application/json"), std::string::npos);
  }
}

TEST_F(HttpServerTest, QueryParametersArePercentDecoded) {
  Start();
  const std::string spec = R"({"command":["sleep","1"]})";
  ApiRequest submit{"POST", "/api/v1/jobs", {}, "Bearer " + f_.alice_token, spec};
  ASSERT_EQ(f_.api->Handle(submit).status, 201);
  RawConn c(http_->port());
  // "state=queued" written with escapes; an unknown state would be a 400 naming it.
  c.Send(Get("/api/v1/jobs?st%61te=que%75ed&limit=5", f_.alice_token));
  std::string r = c.ReadResponse();
  ASSERT_EQ(r.rfind("HTTP/1.1 200", 0), 0u) << r;
  EXPECT_NE(r.find("\"queued\""), std::string::npos) << r;
  c.Send(Get("/api/v1/jobs?state=no%20such", f_.alice_token));
  r = c.ReadResponse();
  EXPECT_EQ(r.rfind("HTTP/1.1 400", 0), 0u) << r;
  EXPECT_NE(r.find("no such"), std::string::npos) << r;
}

TEST_F(HttpServerTest, OversizedBodyIs413AndTheConnectionCloses) {
  Start();
  RawConn c(http_->port());
  c.Send(
      "POST /api/v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Authorization: Bearer " +
      f_.alice_token + "\r\nContent-Length: " + std::to_string(kMaxRequestBody + 1) + "\r\n\r\n{");
  const std::string r = c.ReadResponse();
  EXPECT_EQ(r.rfind("HTTP/1.1 413", 0), 0u) << r;
  EXPECT_NE(r.find("exceeds the limit"), std::string::npos) << r;
  EXPECT_TRUE(c.PeerClosed());
}

TEST_F(HttpServerTest, MalformedRequestIs400) {
  Start();
  RawConn c(http_->port());
  c.Send("THIS IS NOT HTTP\r\n\r\n");
  const std::string r = c.ReadResponse();
  EXPECT_EQ(r.rfind("HTTP/1.1 400", 0), 0u) << r;
  EXPECT_NE(r.find("malformed HTTP request"), std::string::npos) << r;
  EXPECT_TRUE(c.PeerClosed());
}

TEST_F(HttpServerTest, HugeHeadersAre431) {
  Start();
  RawConn c(http_->port());
  c.Send("GET /api/v1/health HTTP/1.1\r\nHost: x\r\nX-Filler: " + std::string(20000, 'a') +
         "\r\n\r\n");
  const std::string r = c.ReadResponse();
  EXPECT_EQ(r.rfind("HTTP/1.1 431", 0), 0u) << r;
}

TEST_F(HttpServerTest, ExpectContinueGetsAnInterimResponse) {
  Start();
  RawConn c(http_->port());
  const std::string body = R"({"command":["true"]})";
  c.Send(
      "POST /api/v1/jobs HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nAuthorization: "
      "Bearer " +
      f_.alice_token + "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n");
  const std::string interim = c.ReadResponse();
  ASSERT_EQ(interim.rfind("HTTP/1.1 100", 0), 0u) << interim;
  c.Send(body);
  const std::string r = c.ReadResponse();
  EXPECT_EQ(r.rfind("HTTP/1.1 201", 0), 0u) << r;
}

TEST_F(HttpServerTest, ConnectionsBeyondTheLimitAreClosedAtOnce) {
  http::ListenerOptions o;
  o.max_connections = 1;
  Start(o);
  RawConn first(http_->port());
  first.Send(Get("/api/v1/health", ""));
  ASSERT_EQ(first.ReadResponse().rfind("HTTP/1.1 200", 0), 0u);
  RawConn second(http_->port());
  EXPECT_TRUE(second.PeerClosed());
}

TEST_F(HttpServerTest, ServesHttpsWithTheConfiguredCertificate) {
  const std::string dir = f_.dir + "/tls";
  std::filesystem::create_directories(dir);
  const std::string cmd =
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 "
      "-addext subjectAltName=IP:127.0.0.1 -keyout " +
      dir + "/key.pem -out " + dir + "/cert.pem >/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "openssl is needed (scripts/install-deps.sh)";
  http::ListenerOptions o;
  o.tls_cert = dir + "/cert.pem";
  o.tls_key = dir + "/key.pem";
  Start(o);
  EXPECT_EQ(http_->url().rfind("https://", 0), 0u);
  client::ApiClient client(http_->url(), f_.alice_token, 10, dir + "/cert.pem");
  auto r = client.Get("/api/v1/jobs");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200);
  // Plain HTTP to the TLS port gets no answer.
  RawConn c(http_->port());
  c.Send(Get("/api/v1/health", ""));
  EXPECT_EQ(c.ReadResponse(), "");
}

// The store's files, the listener, accepted connections (idle keep-alive ones included) and the
// client's sockets: nothing the server opens may reach a process it starts.
TEST(HttpServerDescriptors, EveryDescriptorIsCloseOnExec) {
  const std::set<int> before = stoker::testing::OpenDescriptors();
  {
    Fixture f("cloexec");
    http::Listener server(f.api.get(), http::ListenerOptions{.host = "127.0.0.1", .port = 0});
    ASSERT_TRUE(server.Start().ok());
    client::ApiClient client(server.url(), f.alice_token);
    client.set_keep_alive(true);
    ASSERT_TRUE(client.Get("/api/v1/jobs").ok());
    RawConn idle(server.port());  // accepted, then left idle
    idle.Send("GET /api/v1/health HTTP/1.1\r\nHost: x\r\n\r\n");
    ASSERT_EQ(idle.ReadResponse().rfind("HTTP/1.1 200", 0), 0u);
    ASSERT_TRUE(f.server->Submit(f.admin, JobSpec{.command = {"true"}}).ok());
    EXPECT_EQ(stoker::testing::InheritableSince(before), std::vector<std::string>{});
  }
}

// A client that trickles its request header is cut at the request timeout, not kept for the
// (longer) idle timeout.
TEST_F(HttpServerTest, ASlowHeaderIsCutAtTheRequestTimeout) {
  http::ListenerOptions o;
  o.request_timeout = std::chrono::seconds(1);
  o.idle_timeout = std::chrono::seconds(60);
  Start(o);
  RawConn c(http_->port());
  c.Send("GET /api/v1/health HTTP/1.1\r\n");
  bool closed = false;
  for (int i = 0; i < 100 && !closed; ++i) {  // one header byte every 100 ms, for up to 10 s
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    closed = ::send(c.fd(), "X", 1, MSG_NOSIGNAL) < 0;
  }
  EXPECT_TRUE(closed) << "the connection was still open after 10 s";
}

TEST_F(HttpServerTest, BadTlsFilesAreReportedAtStart) {
  http::ListenerOptions o;
  o.host = "127.0.0.1";
  o.port = 0;
  o.tls_cert = f_.dir + "/missing-cert.pem";
  o.tls_key = f_.dir + "/missing-key.pem";
  http::Listener s(f_.api.get(), o);
  const Status st = s.Start();
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("missing-cert.pem"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace stoker::server
