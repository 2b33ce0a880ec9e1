#include "client/api_client.h"

#include <fcntl.h>
#include <httplib.h>
#include <spdlog/spdlog.h>

#include <charconv>

namespace stoker::client {

struct ApiClient::Impl {
  std::unique_ptr<httplib::Client> client;
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

Result<HttpResult> ApiClient::Do(const std::string& method, const std::string& path,
                                 const std::string& body) {
  if (!impl_->client) {
    impl_->client = std::make_unique<httplib::Client>(base_url_);
    if (!impl_->client->is_valid()) {
      impl_->client.reset();
      return InvalidArgument("server: bad URL '" + base_url_ + "'");
    }
    const auto sec = static_cast<time_t>(timeout_s_);
    const auto usec = static_cast<time_t>((timeout_s_ - static_cast<double>(sec)) * 1e6);
    impl_->client->set_connection_timeout(sec, usec);
    impl_->client->set_read_timeout(sec, usec);
    impl_->client->set_write_timeout(sec, usec);
    impl_->client->set_keep_alive(keep_alive_);
    // No process this one starts (the node's job shims) may inherit a connection to the API.
    impl_->client->set_socket_options([](socket_t sock) { ::fcntl(sock, F_SETFD, FD_CLOEXEC); });
    if (!ca_file_.empty()) impl_->client->set_ca_cert_path(ca_file_.c_str());
  }
  httplib::Headers headers;
  if (!token_.empty()) headers.emplace("Authorization", "Bearer " + token_);
  httplib::Result res = method == "GET" ? impl_->client->Get(path.c_str(), headers)
                        : method == "POST"
                            ? impl_->client->Post(path.c_str(), headers, body, "application/json")
                            : impl_->client->Put(path.c_str(), headers, body, "application/json");
  if (!res) {
    const std::string err = httplib::to_string(res.error());
    impl_->client.reset();  // reconnect next time
    return Unavailable("cannot reach the server at " + base_url_ + ": " + err);
  }
  HttpResult r;
  r.status = res->status;
  r.raw = res->body;
  r.body = json::parse(res->body, nullptr, false);
  if (r.body.is_discarded()) r.body = nullptr;
  return r;
}

Result<HttpResult> ApiClient::Get(const std::string& path) { return Do("GET", path, ""); }
Result<HttpResult> ApiClient::Post(const std::string& path, const json& body) {
  return Do("POST", path, body.dump());
}
Result<HttpResult> ApiClient::Put(const std::string& path, const json& body) {
  return Do("PUT", path, body.dump());
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
