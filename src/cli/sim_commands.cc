#include "cli/cli.h"

namespace stoker::cli {

// `stoker sim packing` (static packing experiment) lives here; `stoker sim jobs` (dynamic
// experiment) is registered by sim_jobs_commands.cc.
void RegisterSimJobsCommand(CLI::App& sim, int& exit_code);

void RegisterSimCommands(CLI::App& app, int& exit_code) {
  CLI::App* sim = app.add_subcommand("sim", "Replay cluster traces through the production scheduler");
  sim->require_subcommand(1);
  RegisterSimJobsCommand(*sim, exit_code);
}

}  // namespace stoker::cli
