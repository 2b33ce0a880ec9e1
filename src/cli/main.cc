#include <cstdio>

#include "cli/cli.h"
#include "cli/common.h"

namespace stoker::cli {

int Main(int argc, char** argv) {
  CLI::App app{"Stoker: keep every GPU of a cluster busy.", "stoker"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("stoker ") + STOKER_VERSION);
  int exit_code = kExitOk;
  RegisterAgentCommands(app, exit_code);
  RegisterSimCommands(app, exit_code);
  RegisterServerCommands(app, exit_code);
  RegisterJobCommands(app, exit_code);
  RegisterAdminCommands(app, exit_code);
  RegisterEfficiencyCommands(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitUsage;
  }
  return exit_code;
}

}  // namespace stoker::cli
