#include <csignal>
#include <cstdio>

#include "cli/cli.h"
#include "cli/common.h"
#include "cli/kubelet.h"

namespace stoker::cli {
namespace {

// Every command family with the top-level commands it registers. Building every family's
// flags costs more than a short command's whole run (`stoker submit` in a script's loop), so
// Main registers only the family of the command named on the command line.
struct Family {
  void (*add)(CLI::App&, int&);
  const char* commands[8];
};
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

bool Names(const Family& f, std::string_view command) {
  for (const char* c : f.commands) {
    if (c != nullptr && command == c) return true;
  }
  return false;
}

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
  bool any = false;
  for (const Family& f : kFamilies) {
    if (!command.empty() && Names(f, command)) {
      f.add(app, exit_code);
      any = true;
    }
  }
  if (any) return;
  for (const Family& f : kFamilies) f.add(app, exit_code);
}

int Main(int argc, char** argv) {
  // A peer that closes its end (a TLS server refusing a client certificate after a TLS 1.3
  // handshake, a reader of our output that exits) must give a write error that the command
  // reports, not kill the process: OpenSSL writes with write(2), which raises SIGPIPE. Jobs do
  // not inherit this: the job shim restores the default before it runs the job.
  std::signal(SIGPIPE, SIG_IGN);
  SetCommandLine(argc, argv);
  CLI::App app{"Stoker: keep every GPU of a cluster busy.", "stoker"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("stoker ") + STOKER_VERSION);
  int exit_code = kExitOk;
  // The command is the first word that is not a flag (the root has no options that take a
  // value). None named (`stoker --version`): nothing to register, unless help is asked for; a
  // word no family names: all of them, so the error or the help lists every command.
  std::string_view command;
  bool help = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--help" || a == "-h") help = true;
    if (!a.empty() && a[0] != '-') {
      command = a;
      break;
    }
  }
  if (!command.empty() || help) RegisterCommands(app, exit_code, command);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitUsage;
  }
  return exit_code;
}

}  // namespace stoker::cli
