#include "cli/cli.h"

namespace stoker::cli {

// Filled in by the simulator module (issue 3): `stoker sim packing`, `stoker sim jobs`.
void RegisterSimCommands(CLI::App& /*app*/, int& /*exit_code*/) {}

}  // namespace stoker::cli
