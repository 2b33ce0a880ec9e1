// The CLI's client configuration (<config dir>/config.yaml) and the local-server entries
// (local.d/*.yaml) are read through the document reader: each error names the file, line and
// column, and the field.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "cli/common.h"
#include "support/temp_dir.h"

namespace stoker::cli {
namespace {
namespace fs = std::filesystem;

class ClientConfigTest : public ::testing::Test {
 protected:
  void SetUp() override { fs::create_directories(dir_ + "/stoker/local.d"); }
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/stoker/" + name;
    std::ofstream(path) << text;
    return path;
  }
  stoker::testing::TempDir tmp_{"client_config"};
  const std::string dir_ = tmp_.path();
};

TEST_F(ClientConfigTest, ReadsServerAndTokenFile) {
  const std::string f = Write("config.yaml",
                              "# a comment\nserver: https://stoker.example:8470\n"
                              "token_file: /home/me/.stoker-token\n");
  Result<ClientConfig> c = ReadClientConfig(f);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->server, "https://stoker.example:8470");
  EXPECT_EQ(c->token, "");
  EXPECT_EQ(c->token_file, "/home/me/.stoker-token");
}

TEST_F(ClientConfigTest, AnAbsentOrEmptyFileGivesNothing) {
  Result<ClientConfig> c = ReadClientConfig(dir_ + "/stoker/none.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->server, "");
  c = ReadClientConfig(Write("config.yaml", "# nothing yet\n"));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->token, "");
}

TEST_F(ClientConfigTest, ErrorsNameFileLineColumnAndField) {
  struct Case {
    std::string text, error;
  };
  const Case cases[] = {
      {"server: http://a:1\ntokn: abc\n",
       "config.yaml:2:1: tokn: unknown field (allowed: server, token, token_file)"},
      {"server:\n  - http://a:1\n", "config.yaml:2:3: server: expected a string, got a list"},
      {"server: http://a:1\ntoken: abc\ntoken_file: /t\n",
       "config.yaml:3:13: token_file: give token or token_file, not both"},
      {"- server\n", "config.yaml:1:1: (top level): expected a mapping, got a list"},
      {"server: [http://a:1\n", "config.yaml:"},  // not YAML: the parser's position
  };
  for (const Case& c : cases) {
    const std::string f = Write("config.yaml", c.text);
    Result<ClientConfig> r = ReadClientConfig(f);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << c.text;
    EXPECT_EQ(r.status().message().rfind(dir_ + "/stoker/" + c.error, 0), 0u)
        << c.text << " -> " << r.status().message();
  }
}

TEST_F(ClientConfigTest, AFileLargerThanAConfigurationIsRefused) {
  const std::string f = Write("config.yaml", "server: " + std::string(70000, 'a') + "\n");
  Result<ClientConfig> r = ReadClientConfig(f);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("larger than"), std::string::npos) << r.status().message();
}

TEST_F(ClientConfigTest, TheClientReportsTheConfigurationsError) {
  Write("config.yaml", "server: http://127.0.0.1:1\ntoken: [a]\n");
  ::setenv("XDG_CONFIG_HOME", dir_.c_str(), 1);
  ::unsetenv("STOKER_SERVER");
  ::unsetenv("STOKER_TOKEN");
  Result<client::ApiClient> c = MakeClient(ClientFlags{});
  ::unsetenv("XDG_CONFIG_HOME");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            dir_ + "/stoker/config.yaml:2:8: token: expected a string, got a list");
}

TEST_F(ClientConfigTest, LocalServerEntries) {
  // As `stoker up` writes it (RegisterLocalServer).
  const std::string good = Write("local.d/a.yaml",
                                 "# written by `stoker up`, removed when it stops\n"
                                 "server: http://127.0.0.1:8470\ntoken_file: /d/admin.token\n"
                                 "data_dir: /d\npid: 4242\npid_start: 123456\n");
  Result<LocalServer> l = ReadLocalServer(good);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->server, "http://127.0.0.1:8470");
  EXPECT_EQ(l->token_file, "/d/admin.token");
  EXPECT_EQ(l->data_dir, "/d");
  EXPECT_EQ(l->pid, 4242);
  EXPECT_EQ(l->pid_start, "123456");
  EXPECT_FALSE(l->alive);

  const std::string bad = Write("local.d/b.yaml", "server: http://127.0.0.1:8470\npid: -3\n");
  l = ReadLocalServer(bad);
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().message().rfind(bad + ":2:6: pid: ", 0), 0u) << l.status().message();
  const std::string odd = Write("local.d/c.yaml", "server: x\nport: 1\n");
  l = ReadLocalServer(odd);
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().message().rfind(odd + ":2:1: port: unknown field", 0), 0u)
      << l.status().message();
}

TEST_F(ClientConfigTest, WhatStokerUpRegistersReadsBackAndAStaleEntryIsRemoved) {
  ::setenv("XDG_CONFIG_HOME", dir_.c_str(), 1);
  ASSERT_TRUE(RegisterLocalServer("http://127.0.0.1:9", dir_ + "/data").ok());
  Write("local.d/0badf00d.yaml", "server: [\n");  // unreadable: removed like a dead one
  std::vector<LocalServer> all = LocalServers();
  ::unsetenv("XDG_CONFIG_HOME");
  ASSERT_EQ(all.size(), 2u);
  int alive = 0;
  for (const LocalServer& l : all) {
    if (!l.alive) {
      EXPECT_FALSE(fs::exists(l.file)) << l.file;
      continue;
    }
    ++alive;
    EXPECT_EQ(l.server, "http://127.0.0.1:9");
    EXPECT_EQ(l.data_dir, fs::weakly_canonical(dir_ + "/data").string());
    EXPECT_EQ(l.pid, ::getpid());
  }
  EXPECT_EQ(alive, 1);
}

// The places every command shares (cli/common.h), one definition each: the server's data
// folder and the agent's job state under it, and this machine's name as a node name.
class PlacesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"XDG_STATE_HOME", "HOME"}) {
      if (const char* v = ::getenv(name)) saved_.emplace_back(name, v);
    }
  }
  void TearDown() override {
    ::unsetenv("XDG_STATE_HOME");
    for (const auto& [name, value] : saved_) ::setenv(name.c_str(), value.c_str(), 1);
  }
  std::vector<std::pair<std::string, std::string>> saved_;
};

TEST_F(PlacesTest, TheDataFolderIsXdgStateHomeThenHome) {
  ::setenv("XDG_STATE_HOME", "/var/lib/me", 1);
  ::setenv("HOME", "/home/me", 1);
  EXPECT_EQ(DefaultDataDir(), "/var/lib/me/stoker");
  ::setenv("XDG_STATE_HOME", "", 1);
  EXPECT_EQ(DefaultDataDir(), "/home/me/.local/state/stoker");
  ::unsetenv("XDG_STATE_HOME");
  EXPECT_EQ(DefaultDataDir(), "/home/me/.local/state/stoker");
  EXPECT_EQ(DefaultDataDir(), HomeDir() + "/.local/state/stoker");
}

TEST_F(PlacesTest, TheHostNameIsThisMachinesNameInNodeNameCharacters) {
  char buf[256] = {0};
  ASSERT_EQ(::gethostname(buf, sizeof(buf) - 1), 0);
  const std::string expected = buf[0] != '\0' ? std::string(buf) : std::string("localhost");
  const std::string h = HostName();
  ASSERT_EQ(h.size(), expected.size()) << h << " vs " << expected;
  for (size_t i = 0; i < h.size(); ++i) {
    const char c = h[i];
    EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')
        << h;
    if (c != '-') {
      EXPECT_EQ(c, expected[i]) << h << " vs " << expected;
    }
  }
}

}  // namespace
}  // namespace stoker::cli
