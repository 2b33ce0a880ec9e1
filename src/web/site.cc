#include "web/site.h"

namespace stoker::web {

std::string_view ReportChartScript() {
  for (const Asset& a : EmbeddedAssets()) {
    if (a.path == "/report.js") return a.body;
  }
  return {};
}

Site::Site(const http::Handler* api, std::span<const Asset> assets) : api_(api), assets_(assets) {}

const Asset* Site::Find(std::string_view path) const {
  if (path == "/") path = "/index.html";
  for (const Asset& a : assets_) {
    if (a.path == path) return &a;
  }
  return nullptr;
}

http::Response Site::Handle(const http::Request& request) const {
  if (request.method == "GET" && !request.path.starts_with("/api/") && request.path != "/metrics") {
    if (const Asset* a = Find(request.path)) {
      return http::Response{200, std::string(a->body), std::string(a->content_type)};
    }
  }
  return api_->Handle(request);
}

}  // namespace stoker::web
