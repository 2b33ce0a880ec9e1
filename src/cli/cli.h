#pragma once
// Subcommand registration. Each group registers its subcommands on the root app and returns;
// the action runs after parsing and sets the process exit code (see docs/cli.md).

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace stoker::cli {

// Exit codes scripts can rely on.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;      // the operation failed (runtime error)
inline constexpr int kExitUsage = 2;        // bad flags or arguments
inline constexpr int kExitUnavailable = 3;  // server/NVML unreachable
inline constexpr int kExitNotFound = 4;
inline constexpr int kExitDenied = 5;  // authentication or authorization failed

int Main(int argc, char** argv);
// Registers the families of `command` (a top-level command name), or every family when no
// family names it. FamilyCommands() lists the names the families are looked up by.
void RegisterCommands(CLI::App& app, int& exit_code, std::string_view command);
std::vector<std::string> FamilyCommands();

// Storage for a subcommand's flag values: CLI11 binds flags to addresses that must outlive the
// parse and the callback. Owned here (freed at exit) so LeakSanitizer runs of the CLI stay clean.
template <class T, class... Args>
T* FlagStorage(Args&&... args) {
  static std::vector<std::unique_ptr<T>> storage;
  return storage.emplace_back(std::make_unique<T>(std::forward<Args>(args)...)).get();
}

// Each Register* adds subcommands; `exit_code` receives the result of whichever ran.
void RegisterAgentCommands(CLI::App& app, int& exit_code);       // agent, smi
void RegisterSimCommands(CLI::App& app, int& exit_code);         // sim ...
void RegisterServerCommands(CLI::App& app, int& exit_code);      // server, up, submit, jobs, ...
void RegisterEfficiencyCommands(CLI::App& app, int& exit_code);  // zones, alerts, report, ...
void RegisterKubernetesCommands(CLI::App& app, int& exit_code);  // device-plugin (kubelet.h)

// A request to the server, addressed as for `stoker jobs` (flags, STOKER_SERVER/STOKER_TOKEN,
// config files, the local `stoker up`); defined in server_commands.cc. Returns the response
// body; transport and HTTP errors come back as a Status (ExitCodeFor maps them).
struct ServerAccess {
  std::string server, token, ca_file;
};
Result<std::string> ServerRequest(const ServerAccess& access, const std::string& method,
                                  const std::string& path, const std::string& json_body = "");
int ExitCodeFor(const Status& s);

}  // namespace stoker::cli
