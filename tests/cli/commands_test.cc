// Main registers only the family of the command named on the command line (start-up cost of
// short commands); these tests keep the family table in step with what the families register.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "cli/cli.h"
#include "cli/programs.h"

namespace stoker::cli {
namespace {

std::set<std::string> TopLevel(const CLI::App& app) {
  std::set<std::string> out;
  for (const CLI::App* c : app.get_subcommands([](const CLI::App*) { return true; })) {
    out.insert(c->get_name());
  }
  return out;
}

TEST(CommandFamilies, TheTableNamesEveryTopLevelCommand) {
  CLI::App all;
  int rc = 0;
  RegisterCommands(all, rc, "");  // no family named: every family
  const std::set<std::string> registered = TopLevel(all);
  const std::vector<std::string> listed = FamilyCommands();
  const std::set<std::string> table(listed.begin(), listed.end());
  EXPECT_EQ(registered, table);
  EXPECT_GE(registered.size(), 20u);
}

TEST(CommandFamilies, NamingACommandRegistersItsFamilyOnly) {
  for (const std::string& name : FamilyCommands()) {
    CLI::App app;
    int rc = 0;
    RegisterCommands(app, rc, name);
    const std::set<std::string> got = TopLevel(app);
    EXPECT_TRUE(got.count(name)) << name;
    EXPECT_LT(got.size(), 12u) << name << ": more than its family";
  }
  // `stoker sim efficiency` (where built) comes from the efficiency family, under the
  // simulator's group: naming `sim` registers the same sim commands as registering everything.
  CLI::App all, sim;
  int rc = 0;
  RegisterCommands(all, rc, "");
  RegisterCommands(sim, rc, "sim");
  EXPECT_EQ(TopLevel(*sim.get_subcommand("sim")), TopLevel(*all.get_subcommand("sim")));
  EXPECT_TRUE(TopLevel(*sim.get_subcommand("sim")).count("packing"));
  CLI::App submit;
  RegisterCommands(submit, rc, "submit");
  EXPECT_EQ(TopLevel(submit).count("server"), 0u);
}

// `stoker` registers its client commands from its own family table (programs.h): each of them
// must be a command of Main's table with the same family, so its help, flags and checks are
// the ones stoker-full has.
TEST(CommandFamilies, StokersClientCommandsAreMainsWithTheSameFlags) {
  const std::vector<std::string> all = FamilyCommands();
  size_t n = 0;
  for (const Family& f : ClientFamilies()) {
    for (const char* name : f.commands) {
      if (name == nullptr) continue;
      ++n;
      EXPECT_NE(std::find(all.begin(), all.end(), name), all.end()) << name;
      CLI::App mine, full;
      int rc = 0;
      RegisterFamilies(mine, rc, name, ClientFamilies());
      RegisterCommands(full, rc, name);
      EXPECT_EQ(TopLevel(mine), TopLevel(full)) << name;
      EXPECT_EQ(mine.get_subcommand(name)->help(), full.get_subcommand(name)->help()) << name;
    }
  }
  EXPECT_EQ(n, 11u);  // submit, jobs, job, cancel, logs, queue, nodes, drain, undrain, token, audit
  // Nothing that serves, simulates or reports.
  for (const char* name : {"server", "up", "agent", "sim", "node", "zones", "device-plugin"}) {
    for (const Family& f : ClientFamilies()) EXPECT_FALSE(Names(f, name)) << name;
  }
}

}  // namespace
}  // namespace stoker::cli
