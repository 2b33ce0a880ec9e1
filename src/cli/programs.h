#pragma once
// The programs of the CLI. Users run one command, `stoker`; its work is split over programs that
// are built and installed together, in one directory:
//
//   stoker       the short client commands over plain HTTP (ClientFamilies(): submit, jobs, job,
//                cancel, logs, queue, nodes, drain, undrain, token, audit) and `stoker --version`.
//                It links no OpenSSL (stoker::client_plain), so such a command maps and relocates
//                no TLS tables at start (docs/performance.md, "CLI"). For every other command, and
//                for a client command whose server is https://, it replaces itself by stoker-full
//                on the same command line.
//   stoker-full  every command (Main), with TLS: the server, `stoker up`, the agent, the
//                simulators, the reports, the client commands over HTTPS.
//   stoker-k8s   stoker-full with the kubelet's gRPC APIs (kubelet.h).
//
// A program replaced by another keeps its process id, arguments, environment and descriptors;
// what the command prints, and its exit code, are the other program's.

#include <CLI/CLI.hpp>
#include <span>
#include <string>
#include <string_view>

#include "core/status.h"

namespace stoker::cli {

inline constexpr const char* kFullProgram = "stoker-full";

// A family of commands: the function that registers them and the top-level names it registers.
struct Family {
  void (*add)(CLI::App&, int&);
  const char* commands[8];
};
bool Names(const Family& f, std::string_view command);

// The command line as the root sees it: the command is the first word that is not a flag (the
// root has no options that take a value); `help` when --help or -h comes before or after it.
struct CommandWord {
  std::string_view command;
  bool help = false;
};
CommandWord FindCommand(int argc, char** argv);

// Registers the families of `families` that name `command`, or all of them when none does.
void RegisterFamilies(CLI::App& app, int& exit_code, std::string_view command,
                      std::span<const Family> families);
// Builds the root app, registers the families that name the command (every one of `families`
// when none does; none for `stoker --version`), parses and runs. Returns the exit code.
int RunApp(int argc, char** argv, std::span<const Family> families);

// The command line Main or ClientMain was given, for ExecSibling.
void SetCommandLine(int argc, char** argv);
// Replaces this process by `program` from the directory of this program's executable, on the
// same command line (argv[0] becomes its path). Returns only when that fails: Unavailable
// "cannot run PATH (WHAT): reason" when the program is not there, else an Internal error.
Status ExecSibling(std::string_view program, std::string_view what);

// `stoker`'s main: runs the commands of ClientFamilies() itself, replaces itself by stoker-full
// for the rest.
int ClientMain(int argc, char** argv);
std::span<const Family> ClientFamilies();
// In `stoker` (no TLS), for a client command whose server is https://: replaces the process by
// stoker-full on the same command line. Returns only when that fails.
Status RunInFullProgram();

}  // namespace stoker::cli
