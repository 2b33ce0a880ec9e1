#include "core/duration.h"

#include <gtest/gtest.h>

namespace stoker {
namespace {
using namespace std::chrono_literals;

TEST(Duration, OneGrammarForEveryFlagFileAndParameter) {
  EXPECT_EQ(*ParseDuration("90s"), 90s);
  EXPECT_EQ(*ParseDuration("15m"), 15min);
  EXPECT_EQ(*ParseDuration("1h30m"), 90min);
  EXPECT_EQ(*ParseDuration("2d"), 48h);
  EXPECT_EQ(*ParseDuration("1w"), 168h);
  EXPECT_EQ(*ParseDuration("500ms"), 500ms);
  EXPECT_EQ(*ParseDuration("100us"), 100us);
  EXPECT_EQ(*ParseDuration("1.5s"), 1500ms);
  EXPECT_EQ(*ParseDuration("120"), 120s);
  EXPECT_EQ(*ParseDuration("0.25"), 250ms);
}

TEST(Duration, BadTextIsNamedWithWhatIsWrong) {
  for (const char* bad : {"", "s", "-1s", "-5m", "1x", "1 s", "5 parsecs", "nan", "inf", "1e300s",
                          "1ss", "1h30", "1..5s", "999999999999d"}) {
    const auto r = ParseDuration(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find(std::string("duration '") + bad + "'"), std::string::npos)
        << r.status().ToString();
  }
  EXPECT_NE(ParseDuration("-5m").status().message().find("negative"), std::string::npos);
  EXPECT_NE(ParseDuration("3y").status().message().find("unknown unit 'y'"), std::string::npos);
}

TEST(Duration, FormatsLargestUnitsFirst) {
  EXPECT_EQ(FormatDuration(90min), "1h30m");
  EXPECT_EQ(FormatDuration(45s), "45s");
  EXPECT_EQ(FormatDuration(0s), "0s");
  EXPECT_EQ(FormatDuration(-61s), "-1m1s");
}

}  // namespace
}  // namespace stoker
