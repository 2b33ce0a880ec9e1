#include "core/field.h"

#include <gtest/gtest.h>

namespace stoker {
namespace {

TEST(FieldTest, DistinguishesZeroFromUnknown) {
  Field<uint32_t> unset;
  Field<uint32_t> zero = Field<uint32_t>::Of(0);
  Field<uint32_t> unsupported = Field<uint32_t>::Unsupported();
  Field<uint32_t> error = Field<uint32_t>::Error(15);
  EXPECT_FALSE(unset.has_value());
  EXPECT_TRUE(zero.has_value());
  EXPECT_EQ(zero.value(), 0u);
  EXPECT_EQ(unsupported.state(), FieldState::kUnsupported);
  EXPECT_EQ(error.state(), FieldState::kError);
  EXPECT_EQ(error.error_code(), 15);
  EXPECT_NE(zero, unsupported);
  EXPECT_EQ(error.value_or(7), 7u);
  EXPECT_FALSE(error.optional().has_value());
  EXPECT_STREQ(FieldStateName(unsupported.state()), "unsupported");
}

}  // namespace
}  // namespace stoker
