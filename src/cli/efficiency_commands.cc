#include "cli/cli.h"

namespace stoker::cli {

// Filled in by the efficiency engine (issue 5): `stoker zones`, `stoker alerts`, `stoker report`.
void RegisterEfficiencyCommands(CLI::App& /*app*/, int& /*exit_code*/) {}

}  // namespace stoker::cli
