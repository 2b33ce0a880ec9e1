// The test-support library's own checks: TempDir gives each test a fresh folder of its own and
// leaves nothing behind.
#include "support/temp_dir.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace stoker::testing {
namespace {
namespace fs = std::filesystem;

TEST(TempDir, IsAFreshFolderNamedByPrefixProcessAndTest) {
  std::string path;
  {
    const TempDir tmp("support");
    path = tmp.path();
    EXPECT_EQ(path, (fs::temp_directory_path() / ("stoker_support_" + std::to_string(::getpid()) +
                                                  "_IsAFreshFolderNamedByPrefixProcessAndTest"))
                        .string());
    EXPECT_EQ(path, TempDir::PathFor("support"));
    ASSERT_TRUE(fs::is_directory(path));
    EXPECT_TRUE(fs::is_empty(path));
    fs::create_directories(path + "/a/b");
    std::ofstream(path + "/a/b/file") << "x";
  }
  EXPECT_FALSE(fs::exists(path)) << "a TempDir removes its folder and everything in it";
}

TEST(TempDir, WhatAnEarlierRunLeftIsRemovedFirst) {
  const std::string path = TempDir::PathFor("support");
  fs::create_directories(path + "/stale");
  std::ofstream(path + "/stale/file") << "from a run that crashed";
  const TempDir tmp("support");
  EXPECT_EQ(tmp.path(), path);
  EXPECT_TRUE(fs::is_empty(tmp.path()));
}

TEST(TempDir, PrefixesKeepTheFoldersOfOneTestApart) {
  const TempDir a("one"), b("two");
  EXPECT_NE(a.path(), b.path());
  EXPECT_TRUE(fs::is_directory(a.path()));
  EXPECT_TRUE(fs::is_directory(b.path()));
}

class TempDirParam : public ::testing::TestWithParam<int> {};

TEST_P(TempDirParam, AParameterisedTestsNameStaysOneFolder) {
  const TempDir tmp("support");
  // "AParameterisedTestsNameStaysOneFolder/0": the slash is not a folder level.
  EXPECT_EQ(fs::path(tmp.path()).parent_path(), fs::temp_directory_path());
  EXPECT_NE(tmp.path().find("AParameterisedTestsNameStaysOneFolder_" + std::to_string(GetParam())),
            std::string::npos)
      << tmp.path();
}
INSTANTIATE_TEST_SUITE_P(Support, TempDirParam, ::testing::Values(0, 1));

}  // namespace
}  // namespace stoker::testing
