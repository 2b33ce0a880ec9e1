#include "cli/cli.h"
#include "cli/common.h"
#include "cli/programs.h"

namespace stoker::cli {
namespace {

// Every command family with the top-level commands it registers (programs.h: Main registers
// only the family of the command named on the command line).
constexpr Family kFamilies[] = {
    {RegisterAgentCommands, {"agent", "smi"}},
    {RegisterSimCommands, {"sim"}},
    {RegisterServerCommands, {"server", "up", "node", "_job-shim"}},
    {RegisterJobCommands, {"submit", "jobs", "job", "cancel", "logs", "queue"}},
    {RegisterAdminCommands, {"nodes", "drain", "undrain", "token", "audit"}},
    // Also `stoker sim efficiency`, under the simulator's group when that is registered.
    {RegisterEfficiencyCommands,
     {"zones", "alerts", "reclaim", "report", "budgets", "ledger", "silence", "sim"}},
    {RegisterKubernetesCommands, {"device-plugin"}},
};

}  // namespace

std::vector<std::string> FamilyCommands() {
  std::vector<std::string> out;
  for (const Family& f : kFamilies) {
    for (const char* c : f.commands) {
      if (c != nullptr) out.emplace_back(c);
    }
  }
  return out;
}

void RegisterCommands(CLI::App& app, int& exit_code, std::string_view command) {
  RegisterFamilies(app, exit_code, command, kFamilies);
}

int Main(int argc, char** argv) { return RunApp(argc, argv, kFamilies); }

}  // namespace stoker::cli
