#include "client/api_client.h"

#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#ifndef STOKER_CLIENT_NO_TLS
#include <boost/asio/ssl.hpp>
#include <boost/beast/ssl.hpp>
#endif
#include <cerrno>
#include <optional>

#include "core/integer.h"

namespace stoker::client {
namespace {

namespace beast = boost::beast;
namespace bhttp = beast::http;
namespace net = boost::asio;
#ifndef STOKER_CLIENT_NO_TLS
namespace ssl = net::ssl;
#endif
using tcp = net::ip::tcp;

// An answer's header block larger than this is refused (Beast's default is 8 KiB).
constexpr uint32_t kMaxHeaderBytes = 64 * 1024;

std::string BadUrl(std::string_view url, std::string_view why) {
  return "bad URL '" + std::string(url) + "': " + std::string(why);
}

// "host:port" as the Host header and an origin write it ("[::1]:8443" for IPv6).
std::string Authority(const Url& u) {
  const std::string host = u.host.find(':') == std::string::npos ? u.host : "[" + u.host + "]";
  return host + ":" + std::to_string(u.port);
}

}  // namespace

Result<Url> ParseUrl(std::string_view url) {
  Url u;
  std::string_view rest;
  if (url.starts_with("http://")) {
    rest = url.substr(7);
  } else if (url.starts_with("https://")) {
    u.tls = true;
    rest = url.substr(8);
  } else {
    return InvalidArgument(BadUrl(url, "expected http:// or https://"));
  }
  const size_t slash = rest.find('/');
  const std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos) u.path = std::string(rest.substr(slash));
  std::string_view port;
  if (authority.starts_with('[')) {  // [IPv6]:port
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return InvalidArgument(BadUrl(url, "unclosed '['"));
    u.host = std::string(authority.substr(1, close - 1));
    const std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return InvalidArgument(BadUrl(url, "expected ':' after ']'"));
      port = after.substr(1);
    }
  } else {
    const size_t colon = authority.rfind(':');
    u.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
  }
  if (u.host.empty()) return InvalidArgument(BadUrl(url, "no host"));
  for (char c : u.host) {
    if (c <= ' ' || c == '@' || c == '/' || c == '?' || c == '#' || c == 0x7f) {
      return InvalidArgument(BadUrl(url, "bad character in the host"));
    }
  }
  u.port = u.tls ? 443 : 80;
  if (!port.empty() || authority.ends_with(':')) {
    auto p = ParseInt(port, 1, 65535);
    if (!p.ok()) return InvalidArgument(BadUrl(url, "the port must be 1..65535"));
    u.port = static_cast<uint16_t>(*p);
  }
  return u;
}

// One connection (plain or TLS) and the I/O context that drives it. Every operation is started
// asynchronously under the stream's deadline and run to completion, so a silent server costs at
// most the timeout.
struct ApiClient::Impl {
  net::io_context ioc;
  std::optional<beast::tcp_stream> plain;
#ifndef STOKER_CLIENT_NO_TLS
  std::optional<ssl::context> tls_context;
  std::optional<beast::ssl_stream<beast::tcp_stream>> tls;
#endif
  beast::flat_buffer buffer;
  bool open = false;

#ifndef STOKER_CLIENT_NO_TLS
  beast::tcp_stream& Tcp() { return tls ? beast::get_lowest_layer(*tls) : *plain; }
#else
  beast::tcp_stream& Tcp() { return *plain; }
#endif

  void Close() {
    beast::error_code ec;
#ifndef STOKER_CLIENT_NO_TLS
    if (tls) beast::get_lowest_layer(*tls).socket().close(ec);
    tls.reset();
#endif
    if (plain) plain->socket().close(ec);
    plain.reset();
    buffer.clear();
    open = false;
  }

  void Run() {
    ioc.restart();
    ioc.run();
  }

  // InvalidArgument for a bad CA file; Unavailable when the server cannot be reached.
  Status Connect(const Url& u, const std::string& ca_file, std::chrono::milliseconds timeout) {
    Close();
    beast::error_code ec;
#ifdef STOKER_CLIENT_NO_TLS
    (void)ca_file;  // verifies HTTPS servers only
    if (u.tls)
      return FailedPrecondition("this program has no TLS: cannot reach " + u.host + " over https");
#else
    if (u.tls && !tls_context) {
      tls_context.emplace(ssl::context::tls_client);
      tls_context->set_verify_mode(ssl::verify_peer);
      if (ca_file.empty()) {
        tls_context->set_default_verify_paths(ec);
      } else {
        tls_context->load_verify_file(ca_file, ec);
      }
      if (ec) {
        tls_context.reset();
        return InvalidArgument("CA file " + (ca_file.empty() ? "(system)" : ca_file) + ": " +
                               ec.message());
      }
    }
#endif
    tcp::resolver resolver(ioc);
    const auto endpoints = resolver.resolve(u.host, std::to_string(u.port), ec);
    if (ec) return Unavailable("cannot resolve " + u.host + ": " + ec.message());
#ifndef STOKER_CLIENT_NO_TLS
    if (u.tls) {
      tls.emplace(ioc, *tls_context);
    } else {
      plain.emplace(ioc);
    }
#else
    plain.emplace(ioc);
#endif
    beast::error_code last = net::error::host_not_found;
    for (const auto& entry : endpoints) {
      // Close-on-exec from the start: no process this one starts (a node's job shims, the
      // server's children) may inherit a connection, even one forked while it is being opened.
      const tcp::endpoint ep = entry.endpoint();
      const int fd = ::socket(ep.protocol().family(), SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_TCP);
      if (fd < 0) {
        last = beast::error_code(errno, net::error::get_system_category());
        continue;
      }
      Tcp().socket().close(ec);
      Tcp().socket().assign(ep.protocol(), fd, ec);
      if (ec) {
        ::close(fd);
        last = ec;
        continue;
      }
      Tcp().expires_after(timeout);
      Tcp().async_connect(ep, [&](beast::error_code e) { last = e; });
      Run();
      if (!last) break;
    }
    if (last) {
      Close();
      return Unavailable(last == beast::error::timeout ? "connection timed out"
                                                       : "connection failed: " + last.message());
    }
    Tcp().socket().set_option(tcp::no_delay(true), ec);
#ifndef STOKER_CLIENT_NO_TLS
    if (tls) {
      if (!SSL_set_tlsext_host_name(tls->native_handle(), u.host.c_str())) {
        Close();
        return Unavailable("TLS: cannot set the server name " + u.host);
      }
      tls->set_verify_callback(ssl::host_name_verification(u.host));
      Tcp().expires_after(timeout);
      tls->async_handshake(ssl::stream_base::client, [&](beast::error_code e) { last = e; });
      Run();
      if (last) {
        Close();
        return Unavailable("TLS handshake: " + last.message());
      }
    }
#endif
    open = true;
    return Status::Ok();
  }

  // One request on the open connection.
  Result<HttpResult> Exchange(bhttp::request<bhttp::string_body>& req,
                              std::chrono::milliseconds timeout, uint64_t max_bytes) {
    beast::error_code ec;
    Tcp().expires_after(timeout);
    auto on_write = [&](beast::error_code e, size_t) { ec = e; };
#ifndef STOKER_CLIENT_NO_TLS
    if (tls) {
      bhttp::async_write(*tls, req, on_write);
    } else {
      bhttp::async_write(*plain, req, on_write);
    }
#else
    bhttp::async_write(*plain, req, on_write);
#endif
    Run();
    if (ec) return Unavailable(ec == beast::error::timeout ? "timed out" : ec.message());
    bhttp::response_parser<bhttp::string_body> parser;
    parser.header_limit(kMaxHeaderBytes);
    parser.body_limit(max_bytes);
    Tcp().expires_after(timeout);
    auto on_read = [&](beast::error_code e, size_t) { ec = e; };
#ifndef STOKER_CLIENT_NO_TLS
    if (tls) {
      bhttp::async_read(*tls, buffer, parser, on_read);
    } else {
      bhttp::async_read(*plain, buffer, parser, on_read);
    }
#else
    bhttp::async_read(*plain, buffer, parser, on_read);
#endif
    Run();
    if (ec == bhttp::error::body_limit) {
      return Unavailable("answer larger than " + std::to_string(max_bytes) + " bytes");
    }
    if (ec) return Unavailable(ec == beast::error::timeout ? "timed out" : ec.message());
    auto res = parser.release();
    HttpResult r;
    r.status = static_cast<int>(res.result_int());
    r.raw = std::move(res.body());
    r.body = json::parse(r.raw, nullptr, false);
    if (r.body.is_discarded()) r.body = nullptr;
    if (!res.keep_alive()) Close();
    return r;
  }
};

ApiClient::ApiClient(std::string base_url, std::string token, double timeout_s, std::string ca_file)
    : base_url_(std::move(base_url)),
      token_(std::move(token)),
      timeout_s_(timeout_s),
      ca_file_(std::move(ca_file)),
      impl_(std::make_unique<Impl>()) {}

ApiClient::~ApiClient() = default;
ApiClient::ApiClient(ApiClient&&) noexcept = default;
ApiClient& ApiClient::operator=(ApiClient&&) noexcept = default;

Result<HttpResult> ApiClient::Send(const std::string& method, const std::string& path,
                                   const std::string& body, const std::string& content_type,
                                   uint64_t max_bytes) {
  Result<HttpResult> r = Transfer(method, path, body, content_type, max_bytes);
  if (!r.ok() && r.status().code() == StatusCode::kUnavailable) {
    return Unavailable("cannot reach the server at " + base_url_ + ": " + r.status().message());
  }
  return r;
}

Result<HttpResult> ApiClient::Transfer(const std::string& method, const std::string& path,
                                       const std::string& body, const std::string& content_type,
                                       uint64_t max_bytes) {
  Result<Url> url = ParseUrl(base_url_);
  if (!url.ok()) return InvalidArgument("server: " + url.status().message());
  const bhttp::verb verb = bhttp::string_to_verb(method);
  if (verb == bhttp::verb::unknown) return InvalidArgument("unknown HTTP method '" + method + "'");
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s_ * 1000));
  bhttp::request<bhttp::string_body> req;
  req.method(verb);
  std::string prefix = url->path;  // "http://h:1/" and "http://h:1" name the same server
  if (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  req.target(prefix + path);
  req.version(11);
  req.set(bhttp::field::host, Authority(*url));
  req.set(bhttp::field::user_agent, "stoker");
  if (!token_.empty()) req.set(bhttp::field::authorization, "Bearer " + token_);
  if (verb == bhttp::verb::post || verb == bhttp::verb::put) {
    req.set(bhttp::field::content_type, content_type);
    req.body() = body;
  }
  req.keep_alive(keep_alive_);
  req.prepare_payload();
  // A kept-alive connection the server has closed meanwhile fails at once: one retry on a new
  // connection (the request never reached the server, or it answered nothing).
  for (int attempt = 0; attempt < 2; ++attempt) {
    const bool reused = impl_->open;
    if (!impl_->open) {
      STOKER_RETURN_IF_ERROR(impl_->Connect(*url, ca_file_, timeout));
    }
    Result<HttpResult> r = impl_->Exchange(req, timeout, max_bytes);
    if (r.ok()) {
      if (!keep_alive_) impl_->Close();
      return r;
    }
    impl_->Close();
    if (!reused || r.status().message().starts_with("answer larger")) return r.status();
  }
  return Unavailable("the connection closed twice");
}

Result<HttpResult> ApiClient::Get(const std::string& path) {
  return Send("GET", path, "", "application/json");
}
Result<HttpResult> ApiClient::Post(const std::string& path, const json& body) {
  return Send("POST", path, body.dump(), "application/json");
}
Result<HttpResult> ApiClient::Put(const std::string& path, const json& body) {
  return Send("PUT", path, body.dump(), "application/json");
}

Result<HttpResult> HttpRequest(const std::string& method, const std::string& url,
                               const std::string& body, const std::string& content_type,
                               Duration timeout, uint64_t max_bytes) {
  STOKER_ASSIGN_OR_RETURN(Url u, ParseUrl(url));
  ApiClient c((u.tls ? "https://" : "http://") + Authority(u), "",
              std::chrono::duration<double>(timeout).count());
  return c.Transfer(method, u.path.empty() ? "/" : u.path, body, content_type, max_bytes);
}

bool HasTls() {
#ifdef STOKER_CLIENT_NO_TLS
  return false;
#else
  return true;
#endif
}

Status StatusFromHttp(const HttpResult& r) {
  if (r.status >= 200 && r.status < 300) return Status::Ok();
  std::string msg = "HTTP " + std::to_string(r.status);
  if (r.body.is_object() && r.body.contains("error") && r.body["error"].is_object()) {
    msg = r.body["error"].value("message", msg);
  }
  switch (r.status) {
    case 400:
      return InvalidArgument(msg);
    case 401:
      return Unauthenticated(msg);
    case 403:
      return PermissionDenied(msg);
    case 404:
      return NotFound(msg);
    case 409:
      return FailedPrecondition(msg);
    case 413:
      return ResourceExhausted(msg);
    case 503:
      return Unavailable(msg);
    default:
      return Internal(msg);
  }
}

}  // namespace stoker::client
