// Main registers only the family of the command named on the command line (start-up cost of
// short commands); these tests keep the family table in step with what the families register.
#include <gtest/gtest.h>

#include <set>

#include "cli/cli.h"

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

}  // namespace
}  // namespace stoker::cli
