#include "core/integer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

namespace stoker {
namespace {

constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

std::string Message(const Result<int64_t>& r) { return r.ok() ? "ok" : r.status().message(); }
std::string Message(const Result<uint64_t>& r) { return r.ok() ? "ok" : r.status().message(); }

TEST(Integer, DecimalDigitsWithAnOptionalMinus) {
  EXPECT_EQ(*ParseInt("0"), 0);
  EXPECT_EQ(*ParseInt("42"), 42);
  EXPECT_EQ(*ParseInt("-42"), -42);
  EXPECT_EQ(*ParseInt("-0"), 0);
  EXPECT_EQ(*ParseInt("007"), 7);
  EXPECT_EQ(*ParseInt("9223372036854775807"), kMax);
  EXPECT_EQ(*ParseInt("-9223372036854775808"), kMin);
  EXPECT_EQ(*ParseUint("18446744073709551615"), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(*ParseInt("65535", 0, 65535), 65535);
  EXPECT_EQ(*ParseInt("1", 1), 1);
}

TEST(Integer, EmptyTextIsSaidToBeEmpty) {
  EXPECT_EQ(Message(ParseInt("")), "'' is empty");
  EXPECT_EQ(Message(ParseUint("")), "'' is empty");
}

TEST(Integer, SignsOtherThanALeadingMinusAreRefused) {
  EXPECT_EQ(Message(ParseInt("+1")), "'+1' is not an integer");
  EXPECT_EQ(Message(ParseInt("-")), "'-' is not an integer");
  EXPECT_EQ(Message(ParseInt("--1")), "'--1' is not an integer");
  EXPECT_EQ(Message(ParseInt("1-")), "'1-' is not an integer");
  // A minus where the range has no negatives: negative, not "not an integer".
  EXPECT_EQ(Message(ParseInt("-4", 0, 10)), "'-4' is negative");
  EXPECT_EQ(Message(ParseUint("-1")), "'-1' is negative");
  EXPECT_EQ(Message(ParseUint("-0")), "'-0' is negative");
}

TEST(Integer, TrailingOrLeadingJunkIsRefused) {
  for (const char* bad : {"12x", " 12", "12 ", "1.5", "1e3", "0x10", "12\n", "1_000"}) {
    EXPECT_EQ(Message(ParseInt(bad)), "'" + std::string(bad) + "' is not an integer") << bad;
    EXPECT_FALSE(ParseUint(bad).ok()) << bad;
  }
  // An embedded NUL is junk too, not the end of the text.
  EXPECT_FALSE(ParseInt(std::string_view("12\0"
                                         "3",
                                         4))
                   .ok());
}

TEST(Integer, OverflowIsOutOfRangeNotGarbage) {
  EXPECT_EQ(Message(ParseInt("9223372036854775808")),
            "'9223372036854775808' is out of range -9223372036854775808..9223372036854775807");
  EXPECT_EQ(Message(ParseInt("-9223372036854775809")),
            "'-9223372036854775809' is out of range -9223372036854775808..9223372036854775807");
  EXPECT_EQ(Message(ParseUint("18446744073709551616")),
            "'18446744073709551616' is out of range 0..18446744073709551615");
  EXPECT_EQ(Message(ParseInt("99999999999999999999999", 0, 65535)),
            "'99999999999999999999999' is out of range 0..65535");
}

TEST(Integer, BoundsAreInclusiveAndNamed) {
  EXPECT_EQ(Message(ParseInt("65536", 0, 65535)), "'65536' is out of range 0..65535");
  EXPECT_EQ(Message(ParseInt("0", 1)), "'0' is out of range 1..9223372036854775807");
  EXPECT_EQ(Message(ParseInt("-11", -10, 10)), "'-11' is out of range -10..10");
  EXPECT_EQ(Message(ParseUint("11", 10)), "'11' is out of range 0..10");
  EXPECT_EQ(*ParseInt("-10", -10, 10), -10);
  EXPECT_EQ(*ParseUint("10", 10), 10u);
}

TEST(Integer, LongTextIsShortenedInTheError) {
  const std::string junk(1000, 'x');
  const std::string m = Message(ParseInt(junk));
  EXPECT_EQ(m, "'" + std::string(64, 'x') + "...' is not an integer");
}

}  // namespace
}  // namespace stoker
