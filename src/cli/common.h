#pragma once
// What the client commands share: the one Status -> exit-code map (cli.h lists the codes,
// docs/cli.md documents them), finding the server and a token (flags, environment, config file,
// the local `stoker up`), a request whose transport and HTTP errors come back as a Status, and
// printing a response as a table or as JSON.

#include <signal.h>
#include <sys/types.h>

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "client/api_client.h"
#include "core/status.h"

namespace stoker::cli {

using json = nlohmann::json;

// Where `stoker server` and `stoker up` listen, and where the client looks, by default.
inline constexpr const char* kDefaultListen = "127.0.0.1:8470";

// Prints "stoker: <message>" on stderr and returns ExitCodeFor(s).
int Fail(const Status& s);

// ---- files and places ----
std::string HomeDir();
std::string ConfigDir();       // $XDG_CONFIG_HOME/stoker or ~/.config/stoker
std::string DefaultDataDir();  // $XDG_STATE_HOME/stoker or ~/.local/state/stoker
// This machine's name (the default node name): gethostname(), any character outside
// [A-Za-z0-9._-] as '-', "localhost" when there is none.
std::string HostName();
std::string CurrentUserName();
std::string SelfExe();  // /proc/self/exe, or "stoker"
std::string Trim(std::string s);

// Daemons that wait for a signal: blocks SIGINT and SIGTERM in the calling thread before any
// other thread starts (they inherit the mask), so that only Wait() receives them.
class ShutdownSignals {
 public:
  ShutdownSignals();
  // Waits for SIGINT or SIGTERM and returns it; then unblocks them, so a second Ctrl-C during a
  // slow shutdown (a GPU read hung in the driver) kills the process.
  int Wait();

 private:
  sigset_t set_;
};
std::optional<std::string> ReadFile(const std::string& path);
// Mode 0600 from the moment the file exists, written whole, then renamed into place.
Status WritePrivateFile(const std::string& path, const std::string& content);

// ---- the local servers (`stoker up`) ----
// Each running `stoker up` registers itself in <config dir>/local.d/<hash of its data dir>.yaml
// and removes the entry when it stops.
struct LocalServer {
  std::string file, server, token_file, data_dir;
  pid_t pid = 0;
  std::string pid_start;  // the process's start time (/proc/PID/stat), so a reused pid is not it
  bool alive = false;
};
std::string LocalEntryPath(const std::string& data_dir);
// One entry (`alive` left false): read through the document reader, errors
// "FILE:LINE:COL: field: what"; unknown fields are refused.
Result<LocalServer> ReadLocalServer(const std::string& file);
Status RegisterLocalServer(const std::string& url, const std::string& data_dir);
void UnregisterLocalServer(const std::string& data_dir);
std::vector<LocalServer> LocalServers();

// ---- client configuration ----
// <config dir>/config.yaml: `server:`, and `token:` or `token_file:` (docs/cli.md). Read through
// the document reader: errors "FILE:LINE:COL: field: what"; unknown fields are refused. A file
// that does not exist gives empty fields.
struct ClientConfig {
  std::string server, token, token_file;
};
Result<ClientConfig> ReadClientConfig(const std::string& file);
struct ClientFlags {
  std::string server;
  std::string token;
  std::string ca_file;
  bool json = false;
};
void AddClientFlags(CLI::App* cmd, ClientFlags* f);
// The client for these flags; first match wins: flags, STOKER_SERVER/STOKER_TOKEN,
// <config dir>/config.yaml, the running local `stoker up` (STOKER_DATA_DIR picks one).
Result<client::ApiClient> MakeClient(const ClientFlags& f);
// Runs a request and turns transport and HTTP errors into a Status.
Result<json> Call(client::ApiClient& c, const std::string& method, const std::string& path,
                  const json& body = nullptr);
// GET `path`; prints the answer as JSON with --json, else through `table`. Returns the exit code.
int RunGetAndPrint(const ClientFlags& c, const std::string& path,
                   const std::function<void(const json&)>& table);
// Any request; prints the answer as JSON with --json, else through `text`.
int RunAndPrint(const ClientFlags& c, const std::string& method, const std::string& path,
                const json& body, const std::function<void(const json&)>& text);
std::string UrlEncode(const std::string& s);

// ---- time formatting ----
std::string Age(int64_t from_ms, int64_t to_ms);  // "42s", "7m", "3h"
int64_t NowMs();
std::string FormatMs(int64_t ms);  // "2026-12-01 19:07" in the viewer's time zone

// ---- command families (each in its own file) ----
void RegisterJobCommands(CLI::App& app, int& exit_code);  // submit, jobs, job, cancel, logs, queue
void RegisterAdminCommands(CLI::App& app, int& exit_code);  // nodes, drain, token, audit

}  // namespace stoker::cli
