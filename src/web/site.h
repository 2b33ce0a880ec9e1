#pragma once
// The web dashboard's files, served beside the API by the same HTTP server: GET / answers the
// page, GET /assets/<file> its scripts and styles, everything else goes to the API handler.
// The files are public (the page holds no data); every data call the page makes goes through
// the API with the user's token, so the API's roles and scopes apply to every view.
//
// The files are the front end's build output (web/, bundled by npm at build time) embedded in
// the binary as generated C++ data (web_assets.cc, made by scripts/embed-assets.py).

#include <span>
#include <string_view>

#include "http/listener.h"

namespace stoker::web {

struct Asset {
  std::string_view path;  // "/index.html", "/assets/index-1a2b3c.js"
  std::string_view content_type;
  std::string_view body;
};

// The embedded build output (generated).
std::span<const Asset> EmbeddedAssets();

// The HTML report's chart script (web/src/report.ts, built as one file): what
// efficiency::RenderHtml inlines so a report draws its charts with the dashboard's library.
std::string_view ReportChartScript();

class Site final : public http::Handler {
 public:
  // `api` (not owned) answers every request that is not a file of the site.
  Site(const http::Handler* api, std::span<const Asset> assets);
  http::Response Handle(const http::Request& request) const override;
  // The file for a path ("/" is "/index.html"), or nullptr.
  const Asset* Find(std::string_view path) const;

 private:
  const http::Handler* api_;
  std::span<const Asset> assets_;
};

}  // namespace stoker::web
