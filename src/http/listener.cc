// The HTTP(S) server on Boost.Beast over Asio (epoll).
//
// Why not cpp-httplib's server: it ties every keep-alive
// connection to one pool thread for the connection's life, and Debian's build polls each idle
// connection every 10 ms with a 1 ms sleep, so 1,000 agents on keep-alive connections cost
// ~90,000 wake-ups per second before any request is served (measured: 164 % CPU serving 223
// heartbeats/s; docs/performance.md). Here connections are asynchronous state machines on a few
// I/O threads, and only request handling, which may wait for a durable SQLite commit, runs on
// a worker pool.
#include "http/listener.h"

#include <fcntl.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <utility>  // Boost 1.74's asio uses std::exchange without including it

#include "core/integer.h"

namespace stoker::http {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Percent-decoding of a URL component; '+' is a space only in query strings. Malformed escapes
// are kept literally (the router then reports an unknown path or a bad parameter).
std::string UrlDecode(std::string_view s, bool plus_is_space) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '%' && i + 2 < s.size()) {
      const int hi = HexDigit(s[i + 1]), lo = HexDigit(s[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out.push_back(static_cast<char>(hi * 16 + lo));
        i += 2;
        continue;
      }
    }
    out.push_back(plus_is_space && c == '+' ? ' ' : c);
  }
  return out;
}

// The Common Name of the peer's certificate when the handshake verified one (no certificate, or
// a server without a client CA: empty).
std::string VerifiedClientCn(SSL* ssl) {
  X509* cert = SSL_get1_peer_certificate(ssl);
  if (cert == nullptr) return {};
  std::string cn;
  if (SSL_get_verify_result(ssl) == X509_V_OK) {
    char buf[256] = {0};
    const int n =
        X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, buf, sizeof buf);
    // A CN with a NUL inside (a name made to read as another) is no name at all.
    if (n > 0 && static_cast<size_t>(n) < sizeof buf &&
        std::strlen(buf) == static_cast<size_t>(n)) {
      cn.assign(buf, static_cast<size_t>(n));
    }
  }
  X509_free(cert);
  return cn;
}

void SplitTarget(std::string_view target, Request* a) {
  const size_t q = target.find('?');
  a->path = UrlDecode(target.substr(0, q), false);
  if (q == std::string_view::npos) return;
  std::string_view rest = target.substr(q + 1);
  while (!rest.empty()) {
    const size_t amp = rest.find('&');
    const std::string_view kv = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view{} : rest.substr(amp + 1);
    if (kv.empty()) continue;
    const size_t eq = kv.find('=');
    std::string key = UrlDecode(kv.substr(0, eq), true);
    std::string value = eq == std::string_view::npos ? "" : UrlDecode(kv.substr(eq + 1), true);
    a->query.emplace(std::move(key), std::move(value));  // first occurrence wins
  }
}

}  // namespace

std::string ErrorBody(const std::string& code, const std::string& message) {
  return nlohmann::json{{"error", {{"code", code}, {"message", message}}}}.dump();
}

Result<std::pair<std::string, int>> ParseHostPort(const std::string& s) {
  const size_t colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return InvalidArgument("listen: expected HOST:PORT, got '" + s + "'");
  }
  auto port = ParseInt(std::string_view(s).substr(colon + 1), 0, 65535);
  if (!port.ok()) {
    return InvalidArgument("listen: bad port in '" + s + "': " + port.status().message());
  }
  return std::make_pair(s.substr(0, colon), static_cast<int>(*port));
}

struct Listener::Impl {
  // Declared first so that they outlive the sessions the io_context destroys.
  const Handler* handler = nullptr;
  ListenerOptions options;
  std::atomic<int64_t> open_connections{0};
  asio::io_context ioc{static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))};
  std::optional<asio::ssl::context> tls;
  tcp::acceptor acceptor{ioc};
  std::unique_ptr<asio::thread_pool> workers;
  std::vector<std::thread> io_threads;

  // Waits until the listener is readable, then accepts every pending connection with
  // accept4(SOCK_CLOEXEC): Asio's own accept() would leave each connection inheritable by any
  // process forked before it could be marked (the agent of `stoker up` forks job shims).
  void Accept();
  void AcceptLater();
  void Serve(int fd);
};

namespace {

// One connection: read a request, hand it to a worker, write the answer, repeat while the
// client keeps the connection alive. One operation is outstanding at a time, and every step
// runs on the connection's strand.
template <class Stream>
class Session : public std::enable_shared_from_this<Session<Stream>> {
 public:
  Session(Listener::Impl* server, Stream stream) : server_(server), stream_(std::move(stream)) {
    server_->open_connections.fetch_add(1);
  }
  ~Session() { server_->open_connections.fetch_sub(1); }

  void Start() {
    if constexpr (std::is_same_v<Stream, beast::ssl_stream<beast::tcp_stream>>) {
      beast::get_lowest_layer(stream_).expires_after(server_->options.request_timeout);
      stream_.async_handshake(asio::ssl::stream_base::server,
                              [self = this->shared_from_this()](beast::error_code ec) {
                                if (ec) return;
                                self->client_cn_ = VerifiedClientCn(self->stream_.native_handle());
                                self->ReadHeader();
                              });
    } else {
      ReadHeader();
    }
  }

 private:
  // Idle between requests until the first byte of the next one, then a bounded time for the
  // request itself: a client that trickles its header is cut at request_timeout, not later.
  void ReadHeader() {
    if (buffer_.size() > 0) return ReadRestOfHeader();
    beast::get_lowest_layer(stream_).expires_after(server_->options.idle_timeout);
    stream_.async_read_some(buffer_.prepare(kFirstRead), [self = this->shared_from_this()](
                                                             beast::error_code ec, size_t n) {
      if (ec) return self->Close();  // idle timeout, peer closed or reset: nothing to answer
      self->buffer_.commit(n);
      self->ReadRestOfHeader();
    });
  }

  void ReadRestOfHeader() {
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(server_->options.max_header_bytes));
    parser_->body_limit(server_->options.max_body_bytes);
    beast::get_lowest_layer(stream_).expires_after(server_->options.request_timeout);
    http::async_read_header(
        stream_, buffer_, *parser_,
        [self = this->shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
  }

  void OnHeader(beast::error_code ec) {
    if (ec) return OnReadError(ec);
    const auto& req = parser_->get();
    if (auto cl = parser_->content_length(); cl && *cl > server_->options.max_body_bytes) {
      return Fail(413, "too_large",
                  "request body of " + std::to_string(*cl) + " bytes exceeds the limit of " +
                      std::to_string(server_->options.max_body_bytes));
    }
    // curl and others wait for this before sending a larger body.
    if (beast::iequals(req[http::field::expect], "100-continue")) {
      auto cont = std::make_shared<http::response<http::empty_body>>(http::status::continue_,
                                                                     req.version());
      http::async_write(stream_, *cont,
                        [self = this->shared_from_this(), cont](beast::error_code wec, size_t) {
                          if (!wec) self->ReadBody();
                        });
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    // The request_timeout that started with the first byte of the header keeps running.
    http::async_read(stream_, buffer_, *parser_,
                     [self = this->shared_from_this()](beast::error_code ec, size_t) {
                       if (ec) return self->OnReadError(ec);
                       self->Dispatch();
                     });
  }

  void OnReadError(beast::error_code ec) {
    if (ec == http::error::body_limit) {
      return Fail(413, "too_large",
                  "request body exceeds the limit of " +
                      std::to_string(server_->options.max_body_bytes) + " bytes");
    }
    if (ec == http::error::header_limit) {
      return Fail(
          431, "too_large",
          "request headers exceed " + std::to_string(server_->options.max_header_bytes) + " bytes");
    }
    if (ec.category() == http::make_error_code(http::error::bad_target).category() &&
        ec != http::error::end_of_stream && ec != http::error::partial_message) {
      return Fail(400, "invalid_argument", "malformed HTTP request: " + ec.message());
    }
    Close();  // peer closed, timeout or reset: nothing to answer
  }

  // A handler may block (the API on a durable commit), so it runs on the worker pool; the
  // answer is written back on this connection's strand.
  void Dispatch() {
    http::request<http::string_body> req = parser_->release();
    Request a;
    a.method = std::string(req.method_string());
    SplitTarget(std::string_view(req.target().data(), req.target().size()), &a);
    a.authorization = std::string(req[http::field::authorization]);
    a.body = std::move(req.body());
    a.client_cert_cn = client_cn_;
    keep_alive_ = req.keep_alive();
    version_ = req.version();
    asio::post(*server_->workers, [self = this->shared_from_this(), a = std::move(a)] {
      Response r;
      try {
        r = self->server_->handler->Handle(a);
      } catch (const std::exception& e) {
        // A bug must cost one request, not a worker thread of the pool (and the connection).
        spdlog::error("http: {} {}: {}", a.method, a.path, e.what());
        r.status = 500;
        r.body = ErrorBody("internal", "internal error");
      }
      asio::post(self->stream_.get_executor(),
                 [self, r = std::move(r)]() mutable { self->Write(std::move(r)); });
    });
  }

  void Write(Response r) {
    response_ = {};
    response_.version(version_);
    response_.result(static_cast<unsigned>(r.status));
    response_.set(http::field::content_type, r.content_type);
    response_.body() = std::move(r.body);
    response_.keep_alive(keep_alive_);
    response_.prepare_payload();
    beast::get_lowest_layer(stream_).expires_after(server_->options.request_timeout);
    http::async_write(stream_, response_,
                      [self = this->shared_from_this()](beast::error_code ec, size_t) {
                        if (ec || !self->keep_alive_) return self->Close();
                        self->ReadHeader();
                      });
  }

  // Answers a request that cannot be read to the end, then closes: the rest of the stream is
  // not a request boundary we could trust.
  void Fail(int status, const std::string& code, const std::string& message) {
    keep_alive_ = false;
    version_ = parser_ && parser_->is_header_done() ? parser_->get().version() : 11;
    Response r;
    r.status = status;
    r.body = ErrorBody(code, message);
    Write(std::move(r));
  }

  void Close() {
    beast::error_code ec;
    if constexpr (std::is_same_v<Stream, beast::ssl_stream<beast::tcp_stream>>) {
      beast::get_lowest_layer(stream_).socket().shutdown(tcp::socket::shutdown_both, ec);
    } else {
      stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    }
  }

  // The first read of a request: small, so an idle connection holds little memory.
  static constexpr size_t kFirstRead = 1024;

  Listener::Impl* server_;
  Stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::string_body> response_;
  bool keep_alive_ = true;
  unsigned version_ = 11;
  std::string client_cn_;  // the verified client certificate's CN (HTTPS with a client CA)
};

}  // namespace

void Listener::Impl::Accept() {
  acceptor.async_wait(tcp::acceptor::wait_read, [this](beast::error_code ec) {
    if (ec == asio::error::operation_aborted) return;  // stopping
    if (ec) return AcceptLater();
    for (;;) {
      const int fd =
          ::accept4(acceptor.native_handle(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd >= 0) {
        Serve(fd);
        continue;
      }
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      // Out of descriptors (EMFILE) or similar: retrying at once would spin and flood the log
      // while the condition lasts; wait a little, then accept again.
      spdlog::warn("http: accept: {} ({} connections open); retrying in 100 ms",
                   std::strerror(errno), open_connections.load());
      return AcceptLater();
    }
    Accept();
  });
}

void Listener::Impl::AcceptLater() {
  auto timer = std::make_shared<asio::steady_timer>(ioc, std::chrono::milliseconds(100));
  timer->async_wait([this, timer](beast::error_code wec) {
    if (wec != asio::error::operation_aborted) Accept();
  });
}

void Listener::Impl::Serve(int fd) {
  if (open_connections.load() >= options.max_connections) {
    // Beyond the limit the kernel's backlog would fill anyway; closing at once tells the
    // client to retry instead of leaving it waiting.
    ::close(fd);
    return;
  }
  tcp::socket socket(asio::make_strand(ioc));
  beast::error_code ec;
  socket.assign(acceptor.local_endpoint().protocol(), fd, ec);
  if (ec) {
    ::close(fd);
    return;
  }
  socket.set_option(tcp::no_delay(true), ec);
  beast::tcp_stream stream(std::move(socket));
  if (tls) {
    std::make_shared<Session<beast::ssl_stream<beast::tcp_stream>>>(
        this, beast::ssl_stream<beast::tcp_stream>(std::move(stream), *tls))
        ->Start();
  } else {
    std::make_shared<Session<beast::tcp_stream>>(this, std::move(stream))->Start();
  }
}

Listener::Listener(const Handler* handler, ListenerOptions options)
    : handler_(handler), options_(std::move(options)), impl_(std::make_unique<Impl>()) {
  impl_->handler = handler_;
  impl_->options = options_;
}

Listener::~Listener() { Stop(); }

std::string Listener::url() const {
  return std::string(options_.tls_cert.empty() ? "http" : "https") + "://" + options_.host + ":" +
         std::to_string(port_);
}

Status Listener::Start() {
  Impl& s = *impl_;
  if (!options_.tls_cert.empty() || !options_.tls_key.empty()) {
    if (options_.tls_cert.empty() || options_.tls_key.empty()) {
      return InvalidArgument("tls: both a certificate and a key file are needed");
    }
    s.tls.emplace(asio::ssl::context::tls_server);
    s.tls->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                       asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                       asio::ssl::context::no_tlsv1_1);
    beast::error_code ec;
    s.tls->use_certificate_chain_file(options_.tls_cert, ec);
    if (ec)
      return InvalidArgument("tls: cannot load certificate " + options_.tls_cert + ": " +
                             ec.message());
    s.tls->use_private_key_file(options_.tls_key, asio::ssl::context::pem, ec);
    if (ec)
      return InvalidArgument("tls: cannot load key " + options_.tls_key + ": " + ec.message());
    if (!options_.tls_client_ca.empty()) {
      s.tls->load_verify_file(options_.tls_client_ca, ec);
      if (ec) {
        return InvalidArgument("tls: cannot load client CA " + options_.tls_client_ca + ": " +
                               ec.message());
      }
      // Ask for a certificate; a client without one still connects (it may use a token).
      s.tls->set_verify_mode(asio::ssl::verify_peer, ec);
      if (ec) return InvalidArgument("tls: client verification: " + ec.message());
    }
  } else if (!options_.tls_client_ca.empty()) {
    return InvalidArgument("tls: a client CA needs HTTPS (a certificate and a key)");
  }
  beast::error_code ec;
  const auto address =
      asio::ip::make_address(options_.host == "localhost" ? "127.0.0.1" : options_.host, ec);
  if (ec) return InvalidArgument("listen: '" + options_.host + "' is not an IP address");
  const tcp::endpoint endpoint(address, static_cast<uint16_t>(options_.port));
  // The listener is close-on-exec from its creation (Asio's open() would leave it inheritable).
  const int fd = ::socket(endpoint.protocol().family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
                          IPPROTO_TCP);
  if (fd < 0) {
    return Unavailable(std::string("cannot create a socket: ") + std::strerror(errno));
  }
  s.acceptor.assign(endpoint.protocol(), fd, ec);
  if (ec) ::close(fd);
  if (!ec) s.acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) s.acceptor.bind(endpoint, ec);
  if (!ec) s.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return Unavailable("cannot listen on " + options_.host + ":" + std::to_string(options_.port) +
                       ": " + ec.message());
  }
  port_ = s.acceptor.local_endpoint().port();
  s.workers =
      std::make_unique<asio::thread_pool>(static_cast<size_t>(std::max(1, options_.threads)));
  s.Accept();
  const int io_threads = std::max(1, options_.io_threads);
  for (int i = 0; i < io_threads; ++i) s.io_threads.emplace_back([&s] { s.ioc.run(); });
  return Status::Ok();
}

void Listener::Stop() {
  if (!impl_ || impl_->io_threads.empty()) return;
  impl_->ioc.stop();
  for (auto& t : impl_->io_threads) t.join();
  impl_->io_threads.clear();
  // Handlers in flight finish; their answers go nowhere because the I/O loop is stopped.
  impl_->workers->join();
}

}  // namespace stoker::http
