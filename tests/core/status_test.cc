#include "core/status.h"

#include <gtest/gtest.h>

namespace stoker {
namespace {

Result<int> ParsePositive(int v) {
  if (v <= 0) return InvalidArgument("value must be positive, got " + std::to_string(v));
  return v;
}

Result<int> Doubled(int v) {
  STOKER_ASSIGN_OR_RETURN(int x, ParsePositive(v));
  return 2 * x;
}

Status Check(int v) {
  STOKER_RETURN_IF_ERROR(ParsePositive(v).status());
  return Status::Ok();
}

TEST(StatusTest, OkByDefault) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.ToString(), "OK");
}

TEST(StatusTest, ErrorCarriesCodeAndContext) {
  Status s = InvalidArgument("bad model").WithContext("nodes.csv:12");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.ToString(), "INVALID_ARGUMENT: nodes.csv:12: bad model");
}

TEST(ResultTest, PropagatesValuesAndErrors) {
  EXPECT_EQ(*Doubled(4), 8);
  Result<int> r = Doubled(-1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("-1"), std::string::npos);
  EXPECT_TRUE(Check(3).ok());
  EXPECT_FALSE(Check(0).ok());
}

Result<int> ForgetsTheValue() { return Status::Ok(); }

Result<int> PassesOn() {
  STOKER_ASSIGN_OR_RETURN(int x, ForgetsTheValue());
  return x + 1;
}

#ifdef NDEBUG
TEST(ResultTest, BuiltFromAnOkStatusIsAnInternalErrorNotASilentSuccess) {
  Result<int> r = ForgetsTheValue();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
  EXPECT_FALSE(PassesOn().ok()) << "the bug must reach the caller as an error";
}
#else
TEST(ResultDeathTest, BuiltFromAnOkStatusAssertsInDebugBuilds) {
  EXPECT_DEATH({ (void)PassesOn(); }, "Result constructed from OK status");
}
#endif

}  // namespace
}  // namespace stoker
