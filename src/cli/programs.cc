// The programs of the CLI (programs.h): the root app every program runs, and `stoker`'s main,
// which keeps the short client commands and hands the rest to stoker-full.

#include "cli/programs.h"

#include <limits.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "cli/common.h"

#ifndef STOKER_VERSION
#define STOKER_VERSION "dev"
#endif

namespace stoker::cli {
namespace {

int g_argc = 0;
char** g_argv = nullptr;

// What `stoker` runs itself: plain-HTTP client commands (stoker::client_plain).
constexpr Family kClientFamilies[] = {
    {RegisterJobCommands, {"submit", "jobs", "job", "cancel", "logs", "queue"}},
    {RegisterAdminCommands, {"nodes", "drain", "undrain", "token", "audit"}},
};

}  // namespace

bool Names(const Family& f, std::string_view command) {
  for (const char* c : f.commands) {
    if (c != nullptr && command == c) return true;
  }
  return false;
}

CommandWord FindCommand(int argc, char** argv) {
  CommandWord w;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--help" || a == "-h") w.help = true;
    if (!a.empty() && a[0] != '-') {
      w.command = a;
      break;
    }
  }
  return w;
}

void RegisterFamilies(CLI::App& app, int& exit_code, std::string_view command,
                      std::span<const Family> families) {
  bool any = false;
  for (const Family& f : families) {
    if (!command.empty() && Names(f, command)) {
      f.add(app, exit_code);
      any = true;
    }
  }
  if (any) return;
  for (const Family& f : families) f.add(app, exit_code);
}

int RunApp(int argc, char** argv, std::span<const Family> families) {
  // A peer that closes its end (a TLS server refusing a client certificate after a TLS 1.3
  // handshake, a reader of our output that exits) must give a write error that the command
  // reports, not kill the process: OpenSSL writes with write(2), which raises SIGPIPE. Jobs do
  // not inherit this: the job shim restores the default before it runs the job. (It cannot fail
  // for SIGPIPE.)
  (void)std::signal(SIGPIPE, SIG_IGN);
  SetCommandLine(argc, argv);
  CLI::App app{"Stoker: keep every GPU of a cluster busy.", "stoker"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("stoker ") + STOKER_VERSION);
  int exit_code = kExitOk;
  // Building every family's flags costs more than a short command's whole run (`stoker submit`
  // in a script's loop), so only the family of the command named is registered. None named
  // (`stoker --version`): nothing, unless help is asked for; a word no family names: all of
  // them, so the error or the help lists every command.
  const CommandWord w = FindCommand(argc, argv);
  if (!w.command.empty() || w.help) RegisterFamilies(app, exit_code, w.command, families);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitUsage;
  }
  return exit_code;
}

void SetCommandLine(int argc, char** argv) {
  g_argc = argc;
  g_argv = argv;
}

Status ExecSibling(std::string_view program, std::string_view what) {
  char self[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0 || g_argv == nullptr) {
    return Internal("cannot find this program's own path to run " + std::string(program) +
                    " beside it");
  }
  std::string path(self, static_cast<size_t>(n));
  path.erase(path.rfind('/') + 1);
  path += program;
  std::vector<char*> args(g_argv, g_argv + g_argc);
  args.push_back(nullptr);
  args[0] = path.data();
  // Nothing buffered may be lost (or written twice). A stream that cannot be written now will
  // not be after the exec either: there is nothing to do about it here.
  (void)std::fflush(nullptr);
  execv(path.c_str(), args.data());
  const int err = errno;
  const std::string msg =
      "cannot run " + path + " (" + std::string(what) + "): " + std::strerror(err);
  return err == ENOENT ? Unavailable(msg) : Internal(msg);
}

Status RunInFullProgram() {
  return ExecSibling(kFullProgram, "the program with TLS, installed beside stoker");
}

std::span<const Family> ClientFamilies() { return kClientFamilies; }

int ClientMain(int argc, char** argv) {
  SetCommandLine(argc, argv);
  const CommandWord w = FindCommand(argc, argv);
  bool mine = w.command.empty() && !w.help;  // `stoker --version`, or a usage error
  for (const Family& f : kClientFamilies) mine = mine || Names(f, w.command);
  if (mine) return RunApp(argc, argv, kClientFamilies);
  const Status s =
      ExecSibling(kFullProgram, "the program with every command, installed beside stoker");
  return Fail(s);
}

}  // namespace stoker::cli
