// What every client command shares: the exit-code map, finding the server and its token, a
// request with errors as a Status, the local `stoker up` registry, and time formatting.

#include "cli/common.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/programs.h"
#include "core/clock.h"
#include "doc/reader.h"

namespace stoker::cli {
namespace fs = std::filesystem;

int ExitCodeFor(const Status& s) {
  switch (s.code()) {
    case StatusCode::kOk:
      return kExitOk;
    case StatusCode::kInvalidArgument:
      return kExitUsage;
    case StatusCode::kUnavailable:
    case StatusCode::kDeadlineExceeded:
      return kExitUnavailable;
    case StatusCode::kNotFound:
      return kExitNotFound;
    case StatusCode::kUnauthenticated:
    case StatusCode::kPermissionDenied:
      return kExitDenied;
    default:
      return kExitFailure;
  }
}

int Fail(const Status& s) {
  std::cerr << "stoker: " << s.message() << "\n";
  return ExitCodeFor(s);
}

std::string HomeDir() {
  if (const char* h = getenv("HOME"); h && *h) return h;
  if (const passwd* pw = getpwuid(getuid())) return pw->pw_dir;
  return "/tmp";
}

std::string ConfigDir() {
  if (const char* x = getenv("XDG_CONFIG_HOME"); x && *x) return std::string(x) + "/stoker";
  return HomeDir() + "/.config/stoker";
}

std::string DefaultDataDir() {
  if (const char* x = getenv("XDG_STATE_HOME"); x && *x) return std::string(x) + "/stoker";
  return HomeDir() + "/.local/state/stoker";
}

std::string HostName() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof(buf) - 1) != 0 || !*buf) return "localhost";
  std::string h = buf;
  for (char& c : h) {
    if (!(isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) c = '-';
  }
  return h;
}

std::string CurrentUserName() {
  if (const passwd* pw = getpwuid(geteuid())) return pw->pw_name;
  return "admin";
}

std::string SelfExe() {
  std::error_code ec;
  auto p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? "stoker" : p.string();
}

ShutdownSignals::ShutdownSignals() {
  sigemptyset(&set_);
  sigaddset(&set_, SIGINT);
  sigaddset(&set_, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set_, nullptr);
}

int ShutdownSignals::Wait() {
  int sig = 0;
  sigwait(&set_, &sig);
  pthread_sigmask(SIG_UNBLOCK, &set_, nullptr);
  return sig;
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Mode 0600 from the moment the file exists (a token must never be readable by others, even
// briefly), written whole, then renamed into place.
Status WritePrivateFile(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp";
  ::unlink(tmp.c_str());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return Internal("cannot write " + tmp + ": " + std::strerror(errno));
  const bool ok =
      ::write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size()) &&
      ::fsync(fd) == 0;
  ::close(fd);
  if (!ok) return Internal("cannot write " + tmp);
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return Internal("rename " + path + ": " + ec.message());
  return Status::Ok();
}

// ---- local servers (`stoker up`) ------------------------------------------------------------
// Each running `stoker up` registers itself in <config dir>/local.d/<hash of its data dir>.yaml
// (server, token_file, data_dir, pid and the process's start time) and removes the entry when it
// stops, so several `stoker up` with different data directories never overwrite each other's
// entry, and the CLI never follows an entry of a server that is gone.

std::string ProcessStart(pid_t pid) {
  auto stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return "";
  const size_t close = stat->rfind(')');
  if (close == std::string::npos) return "";
  std::istringstream in(stat->substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22 && (in >> field); ++i) {
  }
  return field;
}

std::string LocalEntryPath(const std::string& data_dir) {
  std::error_code ec;
  const std::string dir = fs::weakly_canonical(data_dir, ec).string();
  uint32_t h = 2166136261u;  // FNV-1a of the data directory
  for (unsigned char c : dir) h = (h ^ c) * 16777619u;
  return ConfigDir() + "/local.d/" + fmt::format("{:08x}.yaml", h);
}

Status RegisterLocalServer(const std::string& url, const std::string& data_dir) {
  std::error_code ec;
  fs::create_directories(ConfigDir() + "/local.d", ec);
  const std::string abs = fs::weakly_canonical(data_dir, ec).string();
  return WritePrivateFile(LocalEntryPath(data_dir),
                          "# written by `stoker up`, removed when it stops\nserver: " + url +
                              "\ntoken_file: " + abs + "/admin.token\ndata_dir: " + abs +
                              "\npid: " + std::to_string(::getpid()) +
                              "\npid_start: " + ProcessStart(::getpid()) + "\n");
}

void UnregisterLocalServer(const std::string& data_dir) {
  std::error_code ec;
  fs::remove(LocalEntryPath(data_dir), ec);
}

namespace {

// Both files are a few lines; anything larger is not one of them.
constexpr size_t kMaxClientFileBytes = 64 << 10;
constexpr size_t kMaxClientField = 4096;

Result<doc::Value> ReadClientFile(const std::string& file) {
  STOKER_ASSIGN_OR_RETURN(std::string text, doc::ReadText(file, kMaxClientFileBytes));
  return doc::ParseYaml(text, file);
}

}  // namespace

Result<LocalServer> ReadLocalServer(const std::string& file) {
  STOKER_ASSIGN_OR_RETURN(doc::Value root, ReadClientFile(file));
  doc::Reader r(root, file);
  STOKER_RETURN_IF_ERROR(r.ExpectMap());
  STOKER_RETURN_IF_ERROR(r.Keys({"server", "token_file", "data_dir", "pid", "pid_start"}));
  LocalServer l;
  l.file = file;
  STOKER_RETURN_IF_ERROR(r.Get("server", &l.server, kMaxClientField));
  STOKER_RETURN_IF_ERROR(r.Get("token_file", &l.token_file, kMaxClientField));
  STOKER_RETURN_IF_ERROR(r.Get("data_dir", &l.data_dir, kMaxClientField));
  STOKER_RETURN_IF_ERROR(r.GetInt("pid", &l.pid, 1));
  STOKER_RETURN_IF_ERROR(r.Get("pid_start", &l.pid_start, kMaxClientField));
  return l;
}

// Every registered local server; an entry whose process is gone, or that cannot be read, is
// removed (and reported as not alive).
std::vector<LocalServer> LocalServers() {
  std::vector<LocalServer> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(ConfigDir() + "/local.d", ec)) {
    if (e.path().extension() != ".yaml") continue;
    Result<LocalServer> read = ReadLocalServer(e.path().string());
    LocalServer l = read.ok() ? *read : LocalServer{.file = e.path().string()};
    l.alive = l.pid > 0 && ::kill(l.pid, 0) == 0 && ProcessStart(l.pid) == l.pid_start;
    if (!l.alive) fs::remove(e.path(), ec);
    out.push_back(std::move(l));
  }
  return out;
}

Result<ClientConfig> ReadClientConfig(const std::string& file) {
  ClientConfig c;
  std::error_code ec;
  if (!fs::exists(file, ec)) return c;
  STOKER_ASSIGN_OR_RETURN(doc::Value root, ReadClientFile(file));
  if (root.is_null()) return c;  // an empty file
  doc::Reader r(root, file);
  STOKER_RETURN_IF_ERROR(r.ExpectMap());
  STOKER_RETURN_IF_ERROR(r.Keys({"server", "token", "token_file"}));
  STOKER_RETURN_IF_ERROR(r.Get("server", &c.server, kMaxClientField));
  STOKER_RETURN_IF_ERROR(r.Get("token", &c.token, kMaxClientField));
  STOKER_RETURN_IF_ERROR(r.Get("token_file", &c.token_file, kMaxClientField));
  if (!c.token.empty() && !c.token_file.empty()) {
    return r.FieldError("token_file", "give token or token_file, not both");
  }
  return c;
}

// ---- client configuration -------------------------------------------------------------------

void AddClientFlags(CLI::App* cmd, ClientFlags* f) {
  cmd->add_option("--server", f->server, "Server URL (env STOKER_SERVER)");
  cmd->add_option("--token", f->token, "API token (env STOKER_TOKEN)");
  cmd->add_option("--ca-file", f->ca_file, "CA certificate for an HTTPS server");
  cmd->add_flag("--json", f->json, "Print JSON");
}

Result<client::ApiClient> MakeClient(const ClientFlags& f) {
  std::string url = f.server, token = f.token, token_file;
  if (url.empty()) {
    if (const char* e = getenv("STOKER_SERVER")) url = e;
  }
  if (token.empty()) {
    if (const char* e = getenv("STOKER_TOKEN")) token = e;
  }
  if (url.empty() || token.empty()) {
    STOKER_ASSIGN_OR_RETURN(ClientConfig config, ReadClientConfig(ConfigDir() + "/config.yaml"));
    if (url.empty()) url = config.server;
    if (token.empty()) {
      token = config.token;
      token_file = config.token_file;
    }
  }
  if (url.empty() || (token.empty() && token_file.empty())) {
    // A `stoker up` on this machine: the one running (STOKER_DATA_DIR picks among several).
    std::vector<LocalServer> live, gone;
    const char* want = getenv("STOKER_DATA_DIR");
    std::error_code ec;
    const std::string want_dir = want ? fs::weakly_canonical(want, ec).string() : "";
    for (LocalServer& l : LocalServers()) {
      if (!want_dir.empty() && l.data_dir != want_dir) continue;
      (l.alive ? live : gone).push_back(std::move(l));
    }
    const bool url_given = !url.empty();
    if (live.size() > 1 && !url_given) {
      std::string list;
      for (const auto& l : live) list += "\n  " + l.server + "  (data " + l.data_dir + ")";
      return InvalidArgument(
          "several `stoker up` run on this machine; pick one with --server, "
          "STOKER_SERVER or STOKER_DATA_DIR:" +
          list);
    }
    const LocalServer* pick = nullptr;
    for (const auto& l : live) {
      if (!url_given || l.server == url) pick = &l;
    }
    if (pick != nullptr) {
      if (url.empty()) url = pick->server;
      if (token.empty() && token_file.empty()) token_file = pick->token_file;
    } else if (url.empty() && !gone.empty()) {
      return Unavailable("the local server (`stoker up` with data " + gone.front().data_dir +
                         ") is no longer running; start it again, or pass --server");
    }
  }
  if (token.empty() && !token_file.empty()) {
    auto t = ReadFile(token_file);
    if (!t) return PermissionDenied("cannot read token file " + token_file);
    token = Trim(*t);
  }
  if (url.empty()) url = std::string("http://") + kDefaultListen;
  if (url.find("://") == std::string::npos) url = "http://" + url;
  // `stoker` has no TLS (programs.h): stoker-full runs the command again, on the same command
  // line. Nothing has been printed or sent yet; every command asks for its client before that.
  if (!client::HasTls() && url.starts_with("https://")) return RunInFullProgram();
  return client::ApiClient(url, token, 30, f.ca_file);
}

// Runs a request and turns transport and HTTP errors into a Status.
Result<json> Call(client::ApiClient& c, const std::string& method, const std::string& path,
                  const json& body) {
  Result<client::HttpResult> r = method == "GET"      ? c.Get(path)
                                 : method == "DELETE" ? c.Delete(path)
                                 : method == "POST"
                                     ? c.Post(path, body.is_null() ? json::object() : body)
                                     : c.Put(path, body);
  if (!r.ok()) return r.status();
  STOKER_RETURN_IF_ERROR(client::StatusFromHttp(*r));
  return r->body;
}

// ---- formatting -----------------------------------------------------------------------------

std::string Age(int64_t from_ms, int64_t to_ms) {
  if (from_ms <= 0) return "-";
  const int64_t s = std::max<int64_t>(0, (to_ms - from_ms) / 1000);
  if (s < 120) return std::to_string(s) + "s";
  if (s < 7200) return std::to_string(s / 60) + "m";
  return std::to_string(s / 3600) + "h";
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             SystemClock().WallNow().time_since_epoch())
      .count();
}

// "2026-12-01 19:07" in the viewer's time zone.
std::string FormatMs(int64_t ms) {
  const time_t t = static_cast<time_t>(ms / 1000);
  tm local{};
  char buf[32];
  if (localtime_r(&t, &local) == nullptr ||
      std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", &local) == 0) {
    return "@" + std::to_string(t);  // Unix seconds where the local time cannot be written
  }
  return buf;
}
int RunGetAndPrint(const ClientFlags& c, const std::string& path,
                   const std::function<void(const json&)>& table) {
  return RunAndPrint(c, "GET", path, nullptr, table);
}

std::string UrlEncode(const std::string& s) {
  std::string out;
  for (unsigned char ch : s) {
    if (isalnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == ',') {
      out += static_cast<char>(ch);
    } else {
      out += fmt::format("%{:02X}", ch);
    }
  }
  return out;
}

int RunAndPrint(const ClientFlags& c, const std::string& method, const std::string& path,
                const json& body, const std::function<void(const json&)>& text) {
  auto client = MakeClient(c);
  if (!client.ok()) return Fail(client.status());
  auto r = Call(*client, method, path, body);
  if (!r.ok()) return Fail(r.status());
  if (c.json) {
    fmt::print("{}\n", r->dump(2));
  } else {
    text(*r);
  }
  return kExitOk;
}

Result<std::string> ServerRequest(const ServerAccess& access, const std::string& method,
                                  const std::string& path, const std::string& json_body) {
  ClientFlags f;
  f.server = access.server;
  f.token = access.token;
  f.ca_file = access.ca_file;
  STOKER_ASSIGN_OR_RETURN(auto client, MakeClient(f));
  json body = json::object();
  if (!json_body.empty()) {
    body = json::parse(json_body, nullptr, false);
    if (body.is_discarded()) return InvalidArgument("request body: not valid JSON");
  }
  Result<client::HttpResult> r = method == "GET" ? client.Get(path) : client.Post(path, body);
  if (!r.ok()) return r.status();
  STOKER_RETURN_IF_ERROR(client::StatusFromHttp(*r));
  return r->raw;
}

}  // namespace stoker::cli
