#include "core/prometheus_text.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>

#include "support/enum_tables.h"

namespace stoker::prom {
namespace {

TEST(PrometheusText, EscapesLabelValuesAndHelpAsTheFormatSays) {
  EXPECT_EQ(EscapeLabelValue(R"(a\b"c)"
                             "\n"
                             "d"),
            R"(a\\b\"c\nd)");
  EXPECT_EQ(EscapeHelp("x\\y\"z\nw"), "x\\\\y\"z\\nw");  // quotes stay in HELP
  TextWriter w;
  w.Counter("jobs_total", "Jobs\nseen", 3, {{"queue", "a\"b"}});
  EXPECT_TRUE(w.status().ok()) << w.status().ToString();
  EXPECT_EQ(w.text(),
            "# HELP jobs_total Jobs\\nseen\n# TYPE jobs_total counter\n"
            "jobs_total{queue=\"a\\\"b\"} 3\n");
}

TEST(PrometheusText, FormatsValuesLikeGo) {
  EXPECT_EQ(FormatValue(42), "42");
  EXPECT_EQ(FormatValue(-7), "-7");
  EXPECT_EQ(FormatValue(0.25), "0.25");
  EXPECT_EQ(FormatValue(1e-5), "1e-05");
  EXPECT_EQ(FormatValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatValue(std::nan("")), "NaN");
}

TEST(PrometheusText, HistogramBucketsAreCumulativeEndingInInf) {
  Histogram h({0.1, 0.5, 1});
  h.Observe(0.05);
  h.Observe(0.1);  // upper bounds are inclusive
  h.Observe(0.7);
  h.Observe(3, 2);
  TextWriter w;
  w.HistogramFamily("lat_seconds", "Latency", h, {{"model", "m"}});
  ASSERT_TRUE(w.status().ok()) << w.status().ToString();
  EXPECT_EQ(w.text(),
            "# HELP lat_seconds Latency\n# TYPE lat_seconds histogram\n"
            "lat_seconds_bucket{model=\"m\",le=\"0.1\"} 2\n"
            "lat_seconds_bucket{model=\"m\",le=\"0.5\"} 2\n"
            "lat_seconds_bucket{model=\"m\",le=\"1\"} 3\n"
            "lat_seconds_bucket{model=\"m\",le=\"+Inf\"} 5\n"
            "lat_seconds_sum{model=\"m\"} 6.85\n"
            "lat_seconds_count{model=\"m\"} 5\n");
}

TEST(PrometheusText, RefusesBadNamesRepeatsAndStraySamples) {
  EXPECT_TRUE(ValidMetricName("a:b_c9"));
  EXPECT_FALSE(ValidMetricName("9a"));
  EXPECT_FALSE(ValidMetricName("a-b"));
  EXPECT_TRUE(ValidLabelName("_x1"));
  EXPECT_FALSE(ValidLabelName("__x"));
  EXPECT_FALSE(ValidLabelName("a:b"));
  {
    TextWriter w;
    w.Gauge("bad-name", "x", 1);
    EXPECT_FALSE(w.status().ok());
    EXPECT_EQ(w.text(), "");
  }
  {
    TextWriter w;
    w.Gauge("g", "x", 1);
    w.Gauge("g", "x", 2);
    EXPECT_NE(w.status().message().find("written twice"), std::string::npos);
  }
  {
    TextWriter w;
    w.Family("g", "x", Type::kGauge);
    w.Sample("h", {}, 1);
    EXPECT_NE(w.status().message().find("outside its family"), std::string::npos);
  }
  {
    TextWriter w;
    w.Gauge("g", "x", 1, {{"le", "1"}});
    EXPECT_FALSE(w.status().ok());
  }
}

// The primitives the hot-path renderers append with write what TextWriter writes.
TEST(PrometheusText, PrimitivesWriteWhatTheWriterWrites) {
  std::string labels;
  AppendLabel(&labels, "gpu", uint64_t{3});
  AppendLabel(&labels, "model", "H100 \"SXM\"\n");
  EXPECT_EQ(labels, "gpu=\"3\",model=\"H100 \\\"SXM\\\"\\n\"");
  std::string out;
  LazyFamily empty(&out, "never_written", "No samples", Type::kGauge);
  EXPECT_EQ(out, "");  // a family without samples leaves nothing behind
  LazyFamily f(&out, "temp_celsius", "Temperature", Type::kGauge);
  f.Add(labels, "", 41.5);
  f.Add(labels, "kind=\"max\"", uint64_t{90});
  TextWriter w;
  w.Family("temp_celsius", "Temperature", Type::kGauge);
  w.Sample("temp_celsius", {{"gpu", "3"}, {"model", "H100 \"SXM\"\n"}}, 41.5);
  w.Sample("temp_celsius", {{"gpu", "3"}, {"model", "H100 \"SXM\"\n"}, {"kind", "max"}}, 90);
  EXPECT_EQ(out, w.text());
  // Whole numbers up to 2^53 print as integers, beyond as the shortest round-trip form.
  EXPECT_EQ(FormatValue(9007199254740991.0), "9007199254740991");
  EXPECT_EQ(FormatValue(9007199254740992.0), "9007199254740992");
  std::string big;
  AppendValue(&big, uint64_t{18446744073709551615u});
  EXPECT_EQ(big, "18446744073709551615");
}

// promtool is the reference parser and linter; CI installs it (Debian package `prometheus`).
TEST(PrometheusText, PromtoolAcceptsTheOutput) {
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "promtool not installed (scripts/install-deps.sh installs it)";
  }
  TextWriter w;
  w.Counter("stoker_things_total", "Things \\ counted\nover time", 12, {{"kind", "a\"\\\nb"}});
  w.Family("stoker_depth", "Depth by level", Type::kGauge);
  w.Sample("stoker_depth", {{"level", "1"}}, 3);
  w.Sample("stoker_depth", {{"level", "2"}}, std::nan(""));
  Histogram h(Histogram::ExponentialBounds(0.001, 2, 8));
  for (int i = 0; i < 100; ++i) h.Observe(0.0005 * i);
  w.HistogramFamily("stoker_wait_seconds", "Wait", h);
  ASSERT_TRUE(w.status().ok());
  const auto file = std::filesystem::temp_directory_path() / "stoker_prom_text_test.prom";
  std::ofstream(file) << w.text();
  const std::string cmd =
      "promtool check metrics < " + file.string() + " > " + file.string() + ".log 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream log(file.string() + ".log");
  std::string out((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_EQ(rc, 0) << out << "\n" << w.text();
}

TEST(PrometheusText, TypeNamesAreTheFormatsWords) {
  stoker::testing::ExpectRoundTrip(kTypeNames);
  EXPECT_STREQ(TypeName(Type::kCounter), "counter");
  EXPECT_STREQ(TypeName(Type::kUntyped), "untyped");
}

}  // namespace
}  // namespace stoker::prom
