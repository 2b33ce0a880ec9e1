// The programs of the CLI (src/cli/programs.h): `stoker` runs the short client commands over
// plain HTTP itself, without OpenSSL, and replaces itself by stoker-full, beside it, for every
// other command and for an https:// server; what a user sees is the same either way.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "process_util.h"

namespace stoker::e2e {
namespace {
namespace fs = std::filesystem;

class ProgramsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() /
            ("stoker_programs_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    fs::remove_all(dir_);
    fs::create_directories(dir_ + "/config");
    // No configuration, no local `stoker up` and no server from the environment.
    env_ = "env -u STOKER_SERVER -u STOKER_TOKEN -u STOKER_DATA_DIR XDG_CONFIG_HOME=" + dir_ +
           "/config ";
  }
  void TearDown() override {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      WaitExit(pid_);
    }
    fs::remove_all(dir_);
  }
  std::string Read(const std::string& file) const {
    std::ifstream in(file);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  // `program args`, stdout and stderr together.
  CmdResult Cli(const std::string& program, const std::string& args) {
    return e2e::Run(env_ + program + " " + args + " 2>&1");
  }

  std::string dir_;
  std::string env_;
  pid_t pid_ = -1;
};

TEST_F(ProgramsTest, ShortClientCommandsRunInStokerItself) {
  // `stoker` alone, without stoker-full beside it.
  const std::string alone = dir_ + "/stoker";
  fs::copy_file(STOKER_BIN, alone);
  fs::permissions(alone, fs::perms::owner_all);
  CmdResult r = Cli(alone, "submit --server http://127.0.0.1:1 --token x -- true");
  EXPECT_EQ(r.exit_code, 3) << r.out;  // unavailable: it ran, and found no server
  EXPECT_NE(r.out.find("stoker: cannot reach the server at http://127.0.0.1:1"), std::string::npos)
      << r.out;
  for (const char* args : {"jobs --server http://127.0.0.1:1 --token x",
                           "nodes --server http://127.0.0.1:1 --token x --json",
                           "token list --server http://127.0.0.1:1 --token x"}) {
    r = Cli(alone, args);
    EXPECT_EQ(r.exit_code, 3) << args << "\n" << r.out;
    EXPECT_EQ(r.out.find("cannot run"), std::string::npos) << args << "\n" << r.out;
  }
  EXPECT_EQ(Cli(alone, "--version").exit_code, 0);
  EXPECT_EQ(Cli(alone, "submit --help").exit_code, 0);

  // What it does not run itself needs stoker-full, and says so.
  const std::string missing = "stoker: cannot run " + dir_ + "/stoker-full (";
  for (const char* args : {"jobs --server https://127.0.0.1:1 --token x", "server --help", "--help",
                           "sim packing --help", "zones"}) {
    r = Cli(alone, args);
    EXPECT_EQ(r.exit_code, 3) << args << "\n" << r.out;
    EXPECT_NE(r.out.find(missing), std::string::npos) << args << "\n" << r.out;
  }
}

TEST_F(ProgramsTest, WhatStokerPrintsIsWhatStokerFullPrints) {
  // Help, usage errors, versions and failures: the same text and exit code from both programs,
  // whichever of them runs the command.
  for (const char* args : {"--version",
                           "",
                           "--help",
                           "nosuch",
                           "submit --help",
                           "submit",
                           "submit --gpus x -- true",
                           "jobs --help",
                           "job --help",
                           "cancel --help",
                           "logs --help",
                           "queue --help",
                           "nodes --help",
                           "drain --help",
                           "undrain --help",
                           "token --help",
                           "token create --help",
                           "audit --help",
                           "server --help",
                           "up --help",
                           "sim --help",
                           "submit --server http://127.0.0.1:1 --token x -- true",
                           "submit --server http://127.0.0.1:1 --token x --json -- true",
                           "submit --server http://127.0.0.1:1 --token x --gpu-mem 3Q -- true",
                           "jobs --server https://127.0.0.1:1 --token x",
                           "nodes --server http://127.0.0.1:1"}) {
    const CmdResult a = Cli(STOKER_BIN, args);
    const CmdResult b = Cli(STOKER_FULL_BIN, args);
    EXPECT_EQ(a.exit_code, b.exit_code) << args;
    EXPECT_EQ(a.out, b.out) << args;
    EXPECT_FALSE(a.out.empty()) << args;
  }
}

TEST_F(ProgramsTest, ClientCommandsOverHttpsRunInStokerFull) {
  const std::string cert = dir_ + "/cert.pem", key = dir_ + "/key.pem";
  ASSERT_EQ(std::system(("openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 "
                         "-addext subjectAltName=IP:127.0.0.1 -keyout " +
                         key + " -out " + cert + " >/dev/null 2>&1")
                            .c_str()),
            0)
      << "openssl is needed (scripts/install-deps.sh)";
  const std::string url = "https://127.0.0.1:" + std::to_string(FreePort());
  const std::string data = dir_ + "/data";
  pid_ = Spawn({STOKER_BIN, "server", "--data-dir", data, "--listen", url.substr(8), "--tls-cert",
                cert, "--tls-key", key},
               {}, dir_ + "/server.log");
  for (int i = 0; i < 300 && Read(dir_ + "/server.log").find("admin token") == std::string::npos;
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_NE(Read(dir_ + "/server.log").find("listening on " + url), std::string::npos)
      << Read(dir_ + "/server.log");
  // The server runs in stoker-full (the same process: `stoker` replaced itself).
  std::error_code ec;
  EXPECT_EQ(fs::read_symlink("/proc/" + std::to_string(pid_) + "/exe", ec).filename(),
            "stoker-full");
  std::string token = Read(data + "/admin.token");
  while (!token.empty() && token.back() == '\n') token.pop_back();
  const std::string flags = "--server " + url + " --ca-file " + cert + " --token " + token;
  CmdResult r = Cli(STOKER_BIN, "submit " + flags + " --name over-tls -- true");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out, "submitted job 1\n");
  r = Cli(STOKER_BIN, "jobs --json " + flags);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("\"over-tls\""), std::string::npos) << r.out;
  // The server's certificate is still verified: without the CA, the handshake fails.
  r = Cli(STOKER_BIN, "jobs --server " + url + " --token " + token);
  EXPECT_EQ(r.exit_code, 3) << r.out;
  EXPECT_NE(r.out.find("TLS handshake"), std::string::npos) << r.out;
  ::kill(pid_, SIGTERM);
  EXPECT_EQ(WaitExit(pid_), 0) << Read(dir_ + "/server.log");
  pid_ = -1;
}

}  // namespace
}  // namespace stoker::e2e
