#include "core/enum_table.h"

#include <gtest/gtest.h>

#include "core/field.h"
#include "core/gpu.h"
#include "core/xid.h"
#include "support/enum_tables.h"

namespace stoker {
namespace {

enum class Colour { kRed, kGreen, kBlue, kUnlisted };
constexpr EnumTable<Colour, 3> kColours{
    "colour", {{{Colour::kRed, "red"}, {Colour::kGreen, "green"}, {Colour::kBlue, "blue"}}}};
constexpr EnumTable<Colour, 3> kColoursAnyCase{
    "colour",
    {{{Colour::kRed, "red"}, {Colour::kGreen, "green"}, {Colour::kBlue, "blue"}}},
    EnumCase::kInsensitive};

TEST(EnumTable, NamesParseAndErrorsListTheChoices) {
  static_assert(kColours.Name(Colour::kGreen) == "green");
  EXPECT_STREQ(kColours.CName(Colour::kBlue), "blue");
  EXPECT_EQ(kColours.Name(Colour::kUnlisted), "?");
  EXPECT_EQ(*kColours.Parse("red"), Colour::kRed);
  EXPECT_FALSE(kColours.Find("RED").has_value());
  EXPECT_EQ(*kColoursAnyCase.Parse("RED"), Colour::kRed);
  const auto bad = kColours.Parse("purple");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "unknown colour 'purple' (red, green, blue)");
  EXPECT_FALSE(kColours.Parse("").ok());
  EXPECT_FALSE(kColours.Parse("re").ok());
  EXPECT_FALSE(kColours.Parse("redd").ok());
}

// Every value of each core enum has one distinct name and parses back to itself.
TEST(EnumTable, CoreTablesRoundTrip) {
  using stoker::testing::ExpectRoundTrip;
  ExpectRoundTrip(kFieldStateNames);
  ExpectRoundTrip(kGpuHealthNames);
  ExpectRoundTrip(kJobKindNames);
  ExpectRoundTrip(kXidGradeNames);
  EXPECT_EQ(kFieldStateNames.Name(FieldState::kError), "error");
  EXPECT_EQ(kGpuHealthNames.Name(GpuHealth::kUnreachable), "unreachable");
  EXPECT_EQ(kJobKindNames.Name(JobRef::Kind::kKubernetes), "kubernetes");
  EXPECT_EQ(kXidGradeNames.Name(XidGrade::kAmber), "amber");
  EXPECT_TRUE(NamesAreDistinct(kColours));
  constexpr EnumTable<Colour, 2> dup{"colour", {{{Colour::kRed, "red"}, {Colour::kBlue, "red"}}}};
  EXPECT_FALSE(NamesAreDistinct(dup));
}

}  // namespace
}  // namespace stoker
