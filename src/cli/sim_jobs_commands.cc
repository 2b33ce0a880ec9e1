#include "cli/cli.h"

namespace stoker::cli {

// Filled in by the dynamic simulator (issue 3): `stoker sim jobs`.
void RegisterSimJobsCommand(CLI::App& /*sim*/, int& /*exit_code*/) {}

}  // namespace stoker::cli
