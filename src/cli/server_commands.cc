#include "cli/cli.h"

namespace stoker::cli {

// Filled in by the server module (issue 4): `stoker server`, `stoker up`, `stoker submit`, ....
void RegisterServerCommands(CLI::App& /*app*/, int& /*exit_code*/) {}

}  // namespace stoker::cli
