#pragma once
// A fresh folder under the system's temporary directory for one test, removed with everything in
// it when the TempDir goes: <tmp>/stoker_<prefix>_<pid>_<test name>. The process id keeps
// parallel test processes apart (ctest runs each test in its own); the test's name keeps the
// tests of one process apart. Anything left by an earlier run under the same name is removed
// first. For GoogleTest tests (benchmarks have their own folders).
//
//   stoker::testing::TempDir tmp("runner");
//   Runner runner({.state_dir = tmp.path() + "/jobs", ...});

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

namespace stoker::testing {

class TempDir {
 public:
  explicit TempDir(const std::string& prefix) : path_(PathFor(prefix)) {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
    std::filesystem::create_directories(path_, ec);
    EXPECT_FALSE(ec) << path_ << ": " << ec.message();
  }
  ~TempDir() {
    std::error_code ec;  // a destructor does not throw; a folder that will not go stays behind
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }

  // The folder a TempDir with this prefix uses in the running test (outside any test: the
  // process id alone).
  static std::string PathFor(const std::string& prefix) {
    std::string name = "stoker_" + prefix + "_" + std::to_string(::getpid());
    if (const ::testing::TestInfo* t = ::testing::UnitTest::GetInstance()->current_test_info()) {
      name += '_';
      for (char c : std::string_view(t->name())) name += c == '/' ? '_' : c;  // "Param/0"
    }
    return (std::filesystem::temp_directory_path() / name).string();
  }

 private:
  std::string path_;
};

}  // namespace stoker::testing
