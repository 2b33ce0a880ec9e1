#include "core/size.h"

#include <gtest/gtest.h>

#include <string>

namespace stoker {
namespace {

TEST(Size, BareNumbersAreMibAndUnitsAreBinary) {
  EXPECT_EQ(*ParseSizeMib("4096"), 4096);
  EXPECT_EQ(*ParseSizeMib("512M"), 512);
  EXPECT_EQ(*ParseSizeMib("512Mi"), 512);
  EXPECT_EQ(*ParseSizeMib("16G"), 16384);
  EXPECT_EQ(*ParseSizeMib("16gib"), 16384);
  EXPECT_EQ(*ParseSizeMib("1.5Gi"), 1536);
  EXPECT_EQ(*ParseSizeMib("2T"), 2 * 1024 * 1024);
  EXPECT_EQ(*ParseSizeMib("0"), 0);
  EXPECT_EQ(*ParseSizeMib("1048576T"), kMaxSizeMib);
}

TEST(Size, BadTextIsNamedWithWhatIsWrong) {
  for (const char* bad : {"", "G", "-1G", "16X", "1 G", "nan", "inf", "1e3", "1..5G", "1.5.G",
                          "99999999999999999999", "1048577T", "0x10"}) {
    const auto r = ParseSizeMib(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find(std::string("size '") + bad + "'"), std::string::npos)
        << r.status().ToString();
  }
  EXPECT_NE(ParseSizeMib("-1G").status().message().find("negative"), std::string::npos);
  EXPECT_NE(ParseSizeMib("16X").status().message().find("unknown unit 'X'"), std::string::npos);
  EXPECT_NE(ParseSizeMib("2000000T").status().message().find("too large"), std::string::npos);
}

}  // namespace
}  // namespace stoker
