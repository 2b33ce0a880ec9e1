#include "cli/cli.h"

namespace stoker::cli {

// Filled in by the agent module (issue 2): `stoker agent`, `stoker smi`.
void RegisterAgentCommands(CLI::App& /*app*/, int& /*exit_code*/) {}

}  // namespace stoker::cli
