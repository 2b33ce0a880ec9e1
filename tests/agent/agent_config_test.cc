#include "agent/agent_config.h"

#include <gtest/gtest.h>

namespace stoker::agent {
namespace {

using namespace std::chrono_literals;

TEST(ParseListenAddressTest, AcceptedForms) {
  auto a = ParseListenAddress("127.0.0.1:9471");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 9471);
  a = ParseListenAddress(":8080");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "0.0.0.0");
  a = ParseListenAddress("9000");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 9000);
  a = ParseListenAddress("[::1]:0");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "::1");
  EXPECT_EQ(a->port, 0);
  a = ParseListenAddress("node-1.example.org:1");
  ASSERT_TRUE(a.ok());
}

TEST(ParseListenAddressTest, RejectedFormsNameTheProblem) {
  for (const char* bad : {"", "host:", "host:65536", "host:-1", "host:12x", "::1:80", "[::1]80",
                          "[::1", "a b:80", "host:99999999999999999999"}) {
    auto a = ParseListenAddress(bad);
    EXPECT_FALSE(a.ok()) << bad;
    if (!a.ok()) {
      EXPECT_EQ(a.status().code(), StatusCode::kInvalidArgument);
      EXPECT_NE(a.status().message().find("listen address"), std::string::npos) << bad;
    }
  }
  // The port's error says why (core/integer.h).
  EXPECT_EQ(ParseListenAddress("host:65536").status().message(),
            "listen address 'host:65536': port: '65536' is out of range 0..65535");
  EXPECT_EQ(ParseListenAddress("host:-1").status().message(),
            "listen address 'host:-1': port: '-1' is negative");
  EXPECT_EQ(ParseListenAddress("host:12x").status().message(),
            "listen address 'host:12x': port: '12x' is not an integer");
}

TEST(ParseDurationTest, UnitsAndBareSeconds) {
  EXPECT_EQ(*ParseDuration("1s"), 1s);
  EXPECT_EQ(*ParseDuration("500ms"), 500ms);
  EXPECT_EQ(*ParseDuration("1.5s"), 1500ms);
  EXPECT_EQ(*ParseDuration("2m"), 120s);
  EXPECT_EQ(*ParseDuration("2"), 2s);
  EXPECT_EQ(*ParseDuration("0.25"), 250ms);
  EXPECT_EQ(*ParseDuration("100us"), 100us);
}

TEST(ParseDurationTest, RejectsGarbage) {
  for (const char* bad : {"", "s", "-1s", "1x", "1 s", "nan", "inf", "1e300s", "1ss"}) {
    EXPECT_FALSE(ParseDuration(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace stoker::agent
