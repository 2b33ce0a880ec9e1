#include "scheduler/resources.h"

#include <gtest/gtest.h>

namespace stoker::scheduler {
namespace {

TEST(GpuModelTableTest, InternsAndParsesMasks) {
  GpuModelTable t;
  auto g2 = t.Intern("G2");
  auto t4 = t.Intern("T4");
  ASSERT_TRUE(g2.ok() && t4.ok());
  EXPECT_EQ(*t.Intern("G2"), *g2);
  EXPECT_EQ(t.size(), 2);
  auto mask = t.ParseMask("T4|G2");
  ASSERT_TRUE(mask.ok());
  EXPECT_EQ(*mask, GpuModelTable::Bit(*g2) | GpuModelTable::Bit(*t4));
  EXPECT_EQ(*t.ParseMask(""), 0u);
  auto bad = t.ParseMask("T4|X9");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("X9"), std::string::npos);
  EXPECT_FALSE(t.Intern("").ok());
}

TEST(GpuModelTableTest, LimitsModelCount) {
  GpuModelTable t;
  for (int i = 0; i < kMaxGpuModels; ++i) ASSERT_TRUE(t.Intern("M" + std::to_string(i)).ok());
  EXPECT_EQ(t.Intern("one-more").status().code(), StatusCode::kResourceExhausted);
}

TEST(RequestTest, ValidatesShapes) {
  EXPECT_TRUE(ValidateRequest(Request::CpuOnly(1000, 10)).ok());
  EXPECT_TRUE(ValidateRequest(Request::WholeGpus(8, 1000, 10)).ok());
  EXPECT_TRUE(ValidateRequest(Request::GpuShare(500, 1000, 10)).ok());
  EXPECT_TRUE(ValidateRequest(Request::Mig(MigProfile::k3g, 1000, 10)).ok());
  Request bad = Request::GpuShare(500, 1000, 10);
  bad.num_gpu = 2;  // a fraction is of ONE GPU
  EXPECT_FALSE(ValidateRequest(bad).ok());
  Request neg = Request::CpuOnly(-1, 0);
  EXPECT_NE(ValidateRequest(neg).message().find("cpu_milli"), std::string::npos);
  Request over = Request::GpuShare(1001, 0, 0);
  EXPECT_FALSE(ValidateRequest(over).ok());
  EXPECT_EQ(Request::GpuShare(250, 0, 0).TotalGpuMilli(), 250);
  EXPECT_EQ(Request::WholeGpus(4, 0, 0).TotalGpuMilli(), 4000);
  EXPECT_EQ(Request::Mig(MigProfile::k7g, 0, 0).TotalGpuMilli(), 1000);
}

TEST(MigTest, ParsesProfiles) {
  EXPECT_EQ(*ParseMigProfile("1g.10gb"), MigProfile::k1g);
  EXPECT_EQ(*ParseMigProfile("7g"), MigProfile::k7g);
  EXPECT_FALSE(ParseMigProfile("5g").ok());
  EXPECT_TRUE(ModelSupportsMig("A100-SXM4-80GB"));
  EXPECT_TRUE(ModelSupportsMig("H200"));
  EXPECT_FALSE(ModelSupportsMig("T4"));
}

}  // namespace
}  // namespace stoker::scheduler
