// The embedded site: GET / is the page, every file the page names is in the binary with its
// content type, and every other request (the API, other methods) goes to the API handler.
#include "web/site.h"

#include <gtest/gtest.h>

#include <regex>

#include "efficiency/report.h"

namespace stoker::web {
namespace {

struct EchoApi : http::Handler {
  http::Response Handle(const http::Request& r) const override {
    return {404, "api:" + r.method + " " + r.path};
  }
};

http::Request Get(std::string path, std::string method = "GET") {
  http::Request r;
  r.method = std::move(method);
  r.path = std::move(path);
  return r;
}

TEST(Site, ServesTheEmbeddedPageAndEveryFileItNames) {
  EchoApi api;
  Site site(&api, EmbeddedAssets());
  const http::Response index = site.Handle(Get("/"));
  ASSERT_EQ(index.status, 200);
  EXPECT_EQ(index.content_type, "text/html; charset=utf-8");
  EXPECT_NE(index.body.find("id=\"app\""), std::string::npos);
  // The bundle's script and style, as index.html names them, are served with their types.
  const std::regex ref(R"re((?:src|href)="(/assets/[^"]+)")re");
  int files = 0;
  for (std::sregex_iterator it(index.body.begin(), index.body.end(), ref), end; it != end; ++it) {
    const std::string path = (*it)[1];
    const http::Response f = site.Handle(Get(path));
    EXPECT_EQ(f.status, 200) << path;
    EXPECT_FALSE(f.body.empty()) << path;
    if (path.ends_with(".js")) {
      EXPECT_EQ(f.content_type, "text/javascript; charset=utf-8");
    }
    if (path.ends_with(".css")) {
      EXPECT_EQ(f.content_type, "text/css; charset=utf-8");
    }
    ++files;
  }
  EXPECT_GE(files, 1) << index.body;
}

TEST(Site, EverythingElseGoesToTheApi) {
  EchoApi api;
  const Asset files[] = {{"/index.html", "text/html; charset=utf-8", "<div id=\"app\"></div>"}};
  Site site(&api, files);
  EXPECT_EQ(site.Handle(Get("/api/v1/jobs")).body, "api:GET /api/v1/jobs");
  EXPECT_EQ(site.Handle(Get("/metrics")).body, "api:GET /metrics");
  EXPECT_EQ(site.Handle(Get("/", "POST")).body, "api:POST /");
  EXPECT_EQ(site.Handle(Get("/assets/missing.js")).body, "api:GET /assets/missing.js");
  EXPECT_EQ(site.Handle(Get("/index.html")).status, 200);
  // An API path that happens to match a file name is still the API's.
  const Asset shadow[] = {{"/api/v1/jobs", "text/plain; charset=utf-8", "x"}};
  Site shadowed(&api, shadow);
  EXPECT_EQ(shadowed.Handle(Get("/api/v1/jobs")).body, "api:GET /api/v1/jobs");
}

TEST(ReportChartScript, IsEmbeddedAndTheHtmlReportInlinesItWithItsDataEscaped) {
  const std::string_view script = ReportChartScript();
  ASSERT_GT(script.size(), 10000u);  // the charting library is in it
  EXPECT_NE(script.find("stoker-report-data"), std::string_view::npos);
  EXPECT_EQ(script.find("</script"), std::string_view::npos);
  // A name that would end the data's <script> element if it were written as it is.
  efficiency::Report r;
  r.users.push_back({.name = "eve</script><script>alert(1)</script>", .jobs = 1});
  const std::string html = efficiency::RenderHtml(r, script);
  EXPECT_EQ(html.find("alert(1)</script>"), std::string::npos);
  EXPECT_NE(html.find("eve\\u003c/script>"), std::string::npos);
  EXPECT_NE(html.find("<div id='chart-owners'>"), std::string::npos);
  EXPECT_NE(html.find(script.substr(0, 200)), std::string::npos);
  // Without the script the page says the charts are missing, and holds no data element.
  const std::string bare = efficiency::RenderHtml(r);
  EXPECT_NE(bare.find("chart not drawn"), std::string::npos);
  EXPECT_EQ(bare.find("stoker-report-data"), std::string::npos);
}

}  // namespace
}  // namespace stoker::web
