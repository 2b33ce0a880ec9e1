// `stoker server`, `stoker up`, `stoker node` and the client commands (submit, jobs, job, cancel,
// logs, nodes, drain, undrain, token, policy), plus the hidden `_job-shim` and `_loadgen`.
//
// Client configuration, first match wins: --server/--token flags; STOKER_SERVER/STOKER_TOKEN;
// ~/.config/stoker/config.yaml (server:, token: or token_file:); the local server recorded by
// `stoker up` in ~/.config/stoker/local.d/ (one entry per running `stoker up`: server +
// token_file = DIR/admin.token; STOKER_DATA_DIR picks one when several run).

#include <fcntl.h>
#include <fmt/core.h>
#include <pwd.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include "cli/cli.h"
#include "cli/node_flags.h"
#include "client/api_client.h"
#include "core/clock.h"
#include "integration/efficiency_service.h"
#include "integration/http_poster.h"
#include "node/node_agent.h"
#include "nvml/nvml_gpu_source.h"
#include "nvml/simulated.h"
#include "runner/runner.h"
#include "server/api.h"
#include "server/server.h"
#include "store/store.h"
#include "telemetry/sampler.h"
#include "telemetry/snapshot_json.h"

namespace stoker::cli {
namespace {
namespace fs = std::filesystem;
using server::json;

constexpr const char* kDefaultListen = "127.0.0.1:8470";
constexpr const char* kDefaultScenario = "h100-mig-node";

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }

void InstallSignalHandlers() {
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

int ExitFor(const Status& s) {
  switch (s.code()) {
    case StatusCode::kOk:
      return kExitOk;
    case StatusCode::kInvalidArgument:
      return kExitUsage;
    case StatusCode::kUnavailable:
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
  return ExitFor(s);
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

std::string CurrentUserName() {
  if (const passwd* pw = getpwuid(geteuid())) return pw->pw_name;
  return "admin";
}

std::string SelfExe() {
  std::error_code ec;
  auto p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? "stoker" : p.string();
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

struct LocalServer {
  std::string file, server, token_file, data_dir;
  bool alive = false;
};

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
  char name[32];
  std::snprintf(name, sizeof name, "%08x.yaml", h);
  return ConfigDir() + "/local.d/" + name;
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

// Every registered local server; an entry whose process is gone is removed (and reported as
// not alive).
std::vector<LocalServer> LocalServers() {
  std::vector<LocalServer> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(ConfigDir() + "/local.d", ec)) {
    if (e.path().extension() != ".yaml") continue;
    LocalServer l;
    l.file = e.path().string();
    try {
      YAML::Node y = YAML::LoadFile(l.file);
      l.server = y["server"].as<std::string>("");
      l.token_file = y["token_file"].as<std::string>("");
      l.data_dir = y["data_dir"].as<std::string>("");
      const pid_t pid = y["pid"].as<pid_t>(0);
      l.alive =
          pid > 0 && ::kill(pid, 0) == 0 && ProcessStart(pid) == y["pid_start"].as<std::string>("");
    } catch (const std::exception&) {
      l.alive = false;
    }
    if (!l.alive) fs::remove(e.path(), ec);
    out.push_back(std::move(l));
  }
  return out;
}

// ---- client configuration -------------------------------------------------------------------

struct ClientFlags {
  std::string server;
  std::string token;
  std::string ca_file;
  bool json = false;
};

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
  for (const std::string& file : {ConfigDir() + "/config.yaml"}) {
    if (!url.empty() && (!token.empty() || !token_file.empty())) break;
    if (!fs::exists(file)) continue;
    try {
      YAML::Node y = YAML::LoadFile(file);
      if (url.empty() && y["server"]) url = y["server"].as<std::string>();
      if (token.empty() && token_file.empty()) {
        if (y["token"])
          token = y["token"].as<std::string>();
        else if (y["token_file"])
          token_file = y["token_file"].as<std::string>();
      }
    } catch (const std::exception& e) {
      return InvalidArgument(file + ": " + e.what());
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
  return client::ApiClient(url, token, 30, f.ca_file);
}

// Runs a request and turns transport and HTTP errors into a Status.
Result<json> Call(client::ApiClient& c, const std::string& method, const std::string& path,
                  const json& body = nullptr) {
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
  localtime_r(&t, &local);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", &local);
  return buf;
}

std::string GpuText(const json& spec) {
  if (spec.value("gpus", 0) > 0) {
    const int min = spec.value("min_gpus", 0);
    return std::to_string(spec["gpus"].get<int>()) +
           (min > 0 ? " (min " + std::to_string(min) + ")" : "");
  }
  if (spec.value("gpu_milli", 0) > 0) return std::to_string(spec["gpu_milli"].get<int>()) + "m";
  if (!spec.value("mig", std::string()).empty()) return "mig " + spec["mig"].get<std::string>();
  return "-";
}

void PrintJobsTable(const json& jobs) {
  fmt::print("{:<6} {:<10} {:<11} {:<18} {:<14} {:<10} {:<6} {}\n", "ID", "USER", "STATE", "NAME",
             "NODE", "GPUS", "AGE", "INFO");
  const int64_t now = NowMs();
  for (const json& j : jobs) {
    std::string info = j.value("reason", "");
    if (j.contains("exit_code"))
      info =
          "exit " + std::to_string(j["exit_code"].get<int>()) + (info.empty() ? "" : "; " + info);
    std::string node = j.contains("assignment") ? j["assignment"].value("node", "") : "";
    if (j.contains("assignment") &&
        !j["assignment"].value("cuda_visible_devices", std::string()).empty()) {
      info = "devices " + j["assignment"]["cuda_visible_devices"].get<std::string>() +
             (info.empty() ? "" : "; " + info);
    }
    std::string name = j.value("name", "");
    if (name.empty() && j["spec"]["command"].is_array() && !j["spec"]["command"].empty()) {
      name = j["spec"]["command"][0].get<std::string>();
    }
    fmt::print("{:<6} {:<10} {:<11} {:<18} {:<14} {:<10} {:<6} {}\n", j["id"].get<int64_t>(),
               j.value("user", ""), j.value("state", ""), name.substr(0, 18),
               node.empty() ? "-" : node, GpuText(j["spec"]),
               Age(j.value("submit_ms", int64_t{0}), now), info);
  }
}

// ---- quantities -----------------------------------------------------------------------------

// "4096" (MiB), "512M", "16G", "1.5G" -> MiB.
Result<int64_t> ParseMib(const std::string& flag, const std::string& text) {
  if (text.empty()) return InvalidArgument(flag + ": empty");
  double mult = 1;
  std::string num = text;
  const char last = static_cast<char>(std::toupper(static_cast<unsigned char>(text.back())));
  if (last == 'G' || last == 'M' || last == 'T') {
    num = text.substr(0, text.size() - 1);
    mult = last == 'G' ? 1024 : last == 'T' ? 1024 * 1024 : 1;
  } else if (text.size() > 2 && (text.ends_with("Gi") || text.ends_with("Mi"))) {
    mult = text.ends_with("Gi") ? 1024 : 1;
    num = text.substr(0, text.size() - 2);
  }
  try {
    size_t used = 0;
    const double v = std::stod(num, &used);
    if (used != num.size() || v < 0) throw std::invalid_argument("x");
    return static_cast<int64_t>(v * mult);
  } catch (...) {
    return InvalidArgument(flag + ": '" + text + "' is not a size (e.g. 4096, 512M, 16G)");
  }
}

// ---- server and node wiring -----------------------------------------------------------------

struct ServerFlags {
  std::string data_dir;
  std::string listen = kDefaultListen;
  std::string tls_cert, tls_key;
  std::string placement;
  std::string queue = "fifo";
  bool no_backfill = false;
  double node_timeout_s = 30;
  std::string sync = "full";
  std::string efficiency_config;  // YAML (docs/efficiency.md); empty: defaults
  std::string alertmanager;       // base URL: efficiency alerts are also posted there
  int http_threads = 32;
};

void AddServerFlags(CLI::App* cmd, ServerFlags* f) {
  cmd->add_option("--efficiency-config", f->efficiency_config,
                  "Efficiency engine configuration (zones, alerts, idle reclaim, market; YAML)");
  cmd->add_option("--alertmanager", f->alertmanager,
                  "Also send efficiency alerts to this Alertmanager (http://host:9093)");
  cmd->add_option("--data-dir", f->data_dir,
                  "Data directory (default $XDG_STATE_HOME/stoker or ~/.local/state/stoker)");
  cmd->add_option("--listen", f->listen, "HOST:PORT to serve the API on")->capture_default_str();
  cmd->add_option("--tls-cert", f->tls_cert, "PEM certificate: serve HTTPS");
  cmd->add_option("--tls-key", f->tls_key, "PEM private key for --tls-cert");
  cmd->add_option("--placement", f->placement,
                  "Placement policy (scheduler library name; default: the library's default)");
  cmd->add_option("--queue", f->queue, "Queue policy: fifo, sjf, srtf, las, priority")
      ->capture_default_str();
  cmd->add_flag("--no-backfill", f->no_backfill,
                "Strict queue order: a blocked job stops later ones");
  cmd->add_option("--node-timeout", f->node_timeout_s,
                  "Seconds without heartbeat before a node is lost")
      ->capture_default_str();
  cmd->add_option(
         "--sync", f->sync,
         "SQLite synchronous mode: full (survives power loss) or normal (survives kill -9)")
      ->check(CLI::IsMember({"full", "normal"}))
      ->capture_default_str();
  // Connections are served asynchronously; these threads run handlers, and a submission waits
  // in one for its durable commit, so they bound how many commits are grouped together.
  cmd->add_option(
         "--http-threads", f->http_threads,
         "Threads that run API requests (each durable submission holds one until its commit)")
      ->check(CLI::Range(2, 1024))
      ->capture_default_str();
}

// A running server: store + core + API + HTTP.
struct RunningServer {
  std::unique_ptr<store::Store> store;
  std::unique_ptr<server::Server> core;
  std::unique_ptr<server::Api> api;
  std::unique_ptr<http::Server> http;
  SystemClock clock;
  // Efficiency engine: server observer + API extension; stopped before the clock goes.
  std::unique_ptr<efficiency::StoreLedgerStore> ledger;
  efficiency::LogNotifier log_notifier;
  std::unique_ptr<efficiency::HttplibPoster> poster;
  std::unique_ptr<efficiency::AlertmanagerNotifier> alertmanager;
  std::unique_ptr<efficiency::EfficiencyService> efficiency;
};

// Loads --efficiency-config (defaults without one); rejected rules are reported, not fatal.
Result<efficiency::EfficiencyConfig> LoadEfficiencyConfig(const ServerFlags& f) {
  auto cfg = f.efficiency_config.empty() ? efficiency::LoadConfigYaml("")
                                         : efficiency::LoadConfigFile(f.efficiency_config);
  if (!cfg.ok()) return InvalidArgument("--efficiency-config: " + cfg.status().message());
  for (const Status& e : cfg->rule_errors) {
    std::cerr << "stoker: --efficiency-config: rule rejected: " << e.message() << "\n";
  }
  return cfg;
}

// Plugs the efficiency engine into the server, its API and /metrics.
Status StartEfficiency(RunningServer& rs, const ServerFlags& f,
                       const efficiency::EfficiencyConfig& cfg_value) {
  const efficiency::EfficiencyConfig* cfg = &cfg_value;
  rs.ledger = std::make_unique<efficiency::StoreLedgerStore>(rs.store.get());
  rs.efficiency =
      std::make_unique<efficiency::EfficiencyService>(*cfg, rs.core.get(), rs.ledger.get());
  STOKER_RETURN_IF_ERROR(rs.efficiency->Init(rs.clock.WallNow()));
  rs.efficiency->AddNotifier(&rs.log_notifier);
  if (!f.alertmanager.empty()) {
    rs.poster = std::make_unique<efficiency::HttplibPoster>();
    rs.alertmanager = std::make_unique<efficiency::AlertmanagerNotifier>(
        *rs.poster, f.alertmanager, cfg->alerting.repeat_interval + std::chrono::minutes(15));
    rs.efficiency->AddNotifier(rs.alertmanager.get());
  }
  // Jobs already running (a restart) join the engine's directory.
  server::JobFilter active;
  active.states = {server::JobState::kAssigned, server::JobState::kRunning,
                   server::JobState::kCancelling, server::JobState::kQueued};
  active.limit = 100000;
  auto jobs = rs.core->ListJobs(server::Principal{"efficiency", server::Role::kAdmin}, active);
  if (jobs.ok()) {
    for (const server::Job& j : *jobs) rs.efficiency->OnJobChanged(j);
  }
  rs.core->AddObserver(rs.efficiency.get());
  rs.api->AddExtension(rs.efficiency.get());
  return Status::Ok();
}

Result<std::unique_ptr<RunningServer>> StartServer(ServerFlags& f) {
  // Every agent keeps a connection open, and the usual soft limit of 1,024 descriptors would
  // stop the server near 1,000 nodes: take the hard limit, which needs no privilege.
  if (rlimit rl{}; ::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) spdlog::warn("cannot raise the open-file limit");
  }
  if (f.data_dir.empty()) f.data_dir = DefaultDataDir();
  std::error_code ec;
  fs::create_directories(f.data_dir, ec);
  if (ec) return InvalidArgument("--data-dir: cannot create " + f.data_dir + ": " + ec.message());
  ::chmod(f.data_dir.c_str(), 0700);
  STOKER_ASSIGN_OR_RETURN(auto hp, http::ParseHostPort(f.listen));
  auto rs = std::make_unique<RunningServer>();
  STOKER_ASSIGN_OR_RETURN(
      rs->store,
      store::OpenSqliteStore(f.data_dir + "/stoker.db", {.synchronous_full = f.sync == "full"}));
  server::ServerOptions so;
  so.data_dir = f.data_dir;
  so.placement_policy = f.placement;
  so.queue_policy = f.queue;
  so.backfill = !f.no_backfill;
  so.node_timeout = std::chrono::milliseconds(static_cast<int64_t>(f.node_timeout_s * 1000));
  STOKER_ASSIGN_OR_RETURN(efficiency::EfficiencyConfig eff_cfg, LoadEfficiencyConfig(f));
  // Oversubscription is the efficiency configuration's; the scheduling pass applies it.
  so.gpu_oversubscription_milli = static_cast<int32_t>(eff_cfg.oversub.max_ratio_milli);
  so.preemption_grace = eff_cfg.oversub.grace;
  STOKER_ASSIGN_OR_RETURN(rs->core, server::Server::Create(rs->store.get(), &rs->clock, so));
  rs->api = std::make_unique<server::Api>(rs->core.get());
  http::ServerOptions ho;
  ho.host = hp.first;
  ho.port = hp.second;
  ho.tls_cert = f.tls_cert;
  ho.tls_key = f.tls_key;
  ho.threads = f.http_threads;
  STOKER_RETURN_IF_ERROR(StartEfficiency(*rs, f, eff_cfg));
  rs->http = std::make_unique<http::Server>(rs->api.get(), ho);
  STOKER_RETURN_IF_ERROR(rs->http->Start());
  rs->core->Start();
  rs->efficiency->Start(&rs->clock);
  return rs;
}

// Creates DIR/admin.token on the first start. Returns the token (read back on later starts).
Result<std::string> EnsureAdminToken(RunningServer& rs, const std::string& data_dir) {
  const std::string path = data_dir + "/admin.token";
  STOKER_ASSIGN_OR_RETURN(auto created, rs.core->BootstrapAdminToken(CurrentUserName()));
  if (created) {
    STOKER_RETURN_IF_ERROR(WritePrivateFile(path, *created + "\n"));
    return *created;
  }
  auto existing = ReadFile(path);
  return existing ? Trim(*existing) : std::string();
}

struct GpuFlags {
  std::string simulate;
  std::string nvml_lib = "libnvidia-ml.so.1";
};

struct LocalGpus {
  std::unique_ptr<GpuSource> source;
  std::unique_ptr<telemetry::Sampler> sampler;
  std::string note;  // what the user should know (simulated, NVML missing)
};

// Real NVML when it loads; otherwise (or with --simulate) the fake-NVML scenario.
Result<LocalGpus> OpenLocalGpus(const GpuFlags& f, Clock* clock, bool fall_back_to_simulation) {
  LocalGpus g;
  if (f.simulate.empty()) {
    auto real = nvml::OpenNvmlGpuSource(nvml::NvmlOptions{f.nvml_lib});
    if (real.ok()) {
      g.source = std::move(*real);
    } else if (fall_back_to_simulation) {
      auto sim = nvml::OpenSimulatedGpuSource(kDefaultScenario);
      if (!sim.ok()) return sim.status();
      g.source = std::move(*sim);
      g.note = "NVML is not available here (" + real.status().message() +
               ").\nSIMULATED node: GPUs come from the fake-NVML scenario '" + kDefaultScenario +
               "'. Jobs run for real as processes; GPU jobs get the simulated device ids.";
    } else {
      g.note = "NVML not available (" + real.status().message() + "): this node offers CPU only";
    }
  } else {
    STOKER_ASSIGN_OR_RETURN(g.source, nvml::OpenSimulatedGpuSource(f.simulate));
    g.note = "SIMULATED node: GPUs come from the fake-NVML scenario '" + f.simulate +
             "'. Jobs run for real as processes; GPU jobs get the simulated device ids.";
  }
  if (g.source) {
    telemetry::SamplerOptions so;
    so.watch_events = false;
    g.sampler = std::make_unique<telemetry::Sampler>(g.source.get(), clock, nullptr, so);
    STOKER_RETURN_IF_ERROR(g.sampler->Start());
  }
  return g;
}

std::function<json()> SamplesFrom(telemetry::Sampler* sampler, std::string host) {
  if (!sampler) return [] { return json::array(); };
  return [sampler, host] {
    telemetry::TelemetrySnapshot snap;
    sampler->Snapshot(&snap);
    json j = telemetry::SnapshotToJson(snap, host);
    return j.contains("gpus") ? j["gpus"] : json::array();
  };
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

// ---- commands -------------------------------------------------------------------------------

int RunServer(ServerFlags f) {
  InstallSignalHandlers();
  auto rs = StartServer(f);
  if (!rs.ok()) return Fail(rs.status());
  auto token = EnsureAdminToken(**rs, f.data_dir);
  if (!token.ok()) return Fail(token.status());
  fmt::print("stoker server listening on {} (data {}; policy {})\n", (*rs)->http->url(), f.data_dir,
             (*rs)->core->Policy().dump());
  fmt::print("admin token: {}/admin.token\n", f.data_dir);
  std::fflush(stdout);
  while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  fmt::print("stopping (running jobs keep running on their nodes)\n");
  (*rs)->http->Stop();
  (*rs)->efficiency->Stop();
  (*rs)->core->Stop();
  return kExitOk;
}

int RunUp(ServerFlags f, GpuFlags g, JobRunFlags jf, std::string node_name) {
  InstallSignalHandlers();
  auto rs = StartServer(f);
  if (!rs.ok()) return Fail(rs.status());
  RunningServer& server = **rs;
  auto admin = EnsureAdminToken(server, f.data_dir);
  if (!admin.ok()) return Fail(admin.status());
  // Record where the local server and its admin token are, so the CLI needs no flags.
  const std::string url = server.http->url();
  if (Status reg = RegisterLocalServer(url, f.data_dir); !reg.ok()) {
    spdlog::warn("cannot register the local server for the CLI: {}", reg.ToString());
  }
  struct Unregister {
    std::string dir;
    ~Unregister() { UnregisterLocalServer(dir); }
  } unregister{f.data_dir};

  auto gpus = OpenLocalGpus(g, &server.clock, true);
  if (!gpus.ok()) return Fail(gpus.status());
  if (node_name.empty()) node_name = HostName();
  protocol::NodeInventory inv = node::BuildInventory(node_name, gpus->source.get());
  // The local agent's token is kept in DATA_DIR/agent.token and reused while it is valid.
  const std::string agent_token_file = f.data_dir + "/agent.token";
  auto agent_token =
      server.core->LocalAgentToken(node_name, Trim(ReadFile(agent_token_file).value_or("")));
  if (!agent_token.ok()) return Fail(agent_token.status());
  if (Status w = WritePrivateFile(agent_token_file, *agent_token + "\n"); !w.ok()) {
    return Fail(w);
  }
  node::NodeOptions no;
  no.server_url = url;
  no.token = *agent_token;
  no.state_dir = f.data_dir + "/node/jobs";
  no.shim_argv = {SelfExe(), "_job-shim"};
  const std::string isolation = ApplyJobRunFlags(jf, &no);
  node::NodeAgent agent(no, &server.clock, inv, SamplesFrom(gpus->sampler.get(), node_name));

  fmt::print("stoker up: server {} , data dir {}\n", url, f.data_dir);
  if (!gpus->note.empty()) fmt::print("{}\n", gpus->note);
  fmt::print("node '{}': {} CPUs, {} MiB, {} GPU(s){}\n", node_name, inv.cpu_milli / 1000,
             inv.memory_mib, inv.gpus.size(), inv.simulated ? " [simulated]" : "");
  fmt::print("{}\n", isolation);
  fmt::print("admin token in {}/admin.token; the CLI on this machine finds this server via {}\n",
             f.data_dir, LocalEntryPath(f.data_dir));
  fmt::print("try: stoker submit -- echo hello   ·   stoker jobs   ·   stoker nodes\n");
  std::fflush(stdout);

  std::thread node_thread([&] { agent.Run(&g_stop); });
  while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  server.clock.Wake();
  node_thread.join();
  if (gpus->sampler) gpus->sampler->Stop();
  server.http->Stop();
  server.efficiency->Stop();
  server.core->Stop();
  fmt::print("stopped (running jobs keep running and are reconciled at the next start)\n");
  return kExitOk;
}

int RunNode(ClientFlags c, GpuFlags g, JobRunFlags jf, std::string name, std::string state_dir) {
  InstallSignalHandlers();
  SystemClock clock;
  auto client = MakeClient(c);
  if (!client.ok()) return Fail(client.status());
  auto gpus = OpenLocalGpus(g, &clock, false);
  if (!gpus.ok()) return Fail(gpus.status());
  if (name.empty()) name = HostName();
  if (state_dir.empty()) state_dir = DefaultDataDir() + "/node/jobs";
  std::string token = c.token;
  if (token.empty()) {
    if (const char* e = getenv("STOKER_TOKEN")) token = e;
  }
  node::NodeOptions no;
  no.server_url = client->base_url();
  no.token = token;
  no.ca_file = c.ca_file;
  no.state_dir = state_dir;
  no.shim_argv = {SelfExe(), "_job-shim"};
  const std::string isolation = ApplyJobRunFlags(jf, &no);
  node::NodeAgent agent(no, &clock, node::BuildInventory(name, gpus->source.get()),
                        SamplesFrom(gpus->sampler.get(), name));
  if (!gpus->note.empty()) fmt::print("{}\n", gpus->note);
  fmt::print("node '{}' reporting to {} (jobs in {})\n{}\n", name, no.server_url, state_dir,
             isolation);
  std::fflush(stdout);
  std::thread t([&] { agent.Run(&g_stop); });
  while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  clock.Wake();
  t.join();
  if (gpus->sampler) gpus->sampler->Stop();
  return kExitOk;
}

struct SubmitFlags {
  int gpus = 0;
  int min_gpus = 0;
  int gpu_milli = 0;
  std::string gpu_mem;
  std::vector<std::string> gpu_models;
  std::string mig;
  double cpu = 0;
  std::string mem;
  std::string job_class;
  int priority = 0;
  bool preemptible = false;
  bool movable = false;
  std::string name;
  std::string workdir;
  std::vector<std::string> env;
  std::string on_node_loss;
  std::string user;
  std::vector<std::string> command;
};

int RunSubmit(const ClientFlags& c, const SubmitFlags& s) {
  json spec;
  spec["command"] = s.command;
  if (s.gpus) spec["gpus"] = s.gpus;
  if (s.min_gpus) spec["min_gpus"] = s.min_gpus;
  if (s.gpu_milli) spec["gpu_milli"] = s.gpu_milli;
  if (!s.gpu_mem.empty()) {
    auto v = ParseMib("--gpu-mem", s.gpu_mem);
    if (!v.ok()) return Fail(v.status());
    spec["gpu_memory_mib"] = *v;
  }
  if (!s.gpu_models.empty()) spec["gpu_models"] = s.gpu_models;
  if (!s.mig.empty()) spec["mig"] = s.mig;
  if (s.cpu > 0) spec["cpu_milli"] = static_cast<int64_t>(s.cpu * 1000 + 0.5);
  if (!s.mem.empty()) {
    auto v = ParseMib("--mem", s.mem);
    if (!v.ok()) return Fail(v.status());
    spec["memory_mib"] = *v;
  }
  if (!s.job_class.empty()) spec["class"] = s.job_class;
  if (s.priority) spec["priority"] = s.priority;
  if (s.preemptible) spec["preemptible"] = true;
  if (s.movable) spec["movable"] = true;
  if (!s.name.empty()) spec["name"] = s.name;
  std::string workdir = s.workdir;
  if (workdir.empty()) {
    std::error_code ec;
    workdir = fs::current_path(ec).string();
  }
  spec["workdir"] = workdir;
  if (!s.on_node_loss.empty()) spec["on_node_loss"] = s.on_node_loss;
  if (!s.user.empty()) spec["user"] = s.user;
  json env = json::object();
  for (const std::string& kv : s.env) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0)
      return Fail(InvalidArgument("--env: expected K=V, got '" + kv + "'"));
    env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  if (!env.empty()) spec["env"] = env;
  auto client = MakeClient(c);
  if (!client.ok()) return Fail(client.status());
  auto r = Call(*client, "POST", "/api/v1/jobs", spec);
  if (!r.ok()) return Fail(r.status());
  if (c.json) {
    fmt::print("{}\n", r->dump(2));
  } else {
    fmt::print("submitted job {}\n", (*r)["id"].get<int64_t>());
  }
  return kExitOk;
}

int RunGetAndPrint(const ClientFlags& c, const std::string& path,
                   const std::function<void(const json&)>& table) {
  auto client = MakeClient(c);
  if (!client.ok()) return Fail(client.status());
  auto r = Call(*client, "GET", path);
  if (!r.ok()) return Fail(r.status());
  if (c.json) {
    fmt::print("{}\n", r->dump(2));
  } else {
    table(*r);
  }
  return kExitOk;
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

int RunLogs(const ClientFlags& c, int64_t id, bool follow, bool stderr_stream) {
  auto client = MakeClient(c);
  if (!client.ok()) return Fail(client.status());
  int64_t offset = 0;
  const std::string stream = stderr_stream ? "stderr" : "stdout";
  while (true) {
    auto r = Call(*client, "GET",
                  "/api/v1/jobs/" + std::to_string(id) + "/logs?stream=" + stream +
                      "&offset=" + std::to_string(offset));
    if (!r.ok()) return Fail(r.status());
    const std::string data = (*r)["data"].get<std::string>();
    std::fwrite(data.data(), 1, data.size(), stdout);
    std::fflush(stdout);
    offset = (*r)["next_offset"].get<int64_t>();
    if (!follow || (*r)["finished"].get<bool>()) break;
    if (data.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  return kExitOk;
}

}  // namespace

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

int ExitCodeFor(const Status& s) { return ExitFor(s); }

void RegisterServerCommands(CLI::App& app, int& exit_code) {
  // stoker server
  {
    auto* f = FlagStorage<ServerFlags>();
    auto* cmd = app.add_subcommand("server", "Run the Stoker API server and scheduler");
    AddServerFlags(cmd, f);
    cmd->callback([f, &exit_code] { exit_code = RunServer(*f); });
  }
  // stoker up
  {
    auto* f = FlagStorage<ServerFlags>();
    auto* g = FlagStorage<GpuFlags>();
    auto* name = FlagStorage<std::string>();
    auto* cmd = app.add_subcommand(
        "up", "Start a server and a local node in one process (simulated GPUs without NVML)");
    AddServerFlags(cmd, f);
    cmd->add_option("--simulate", g->simulate,
                    "Serve a simulated node from this fake-NVML scenario");
    cmd->add_option("--nvml-lib", g->nvml_lib, "NVML library to load")->capture_default_str();
    cmd->add_option("--node-name", *name, "Name of the local node (default: host name)");
    auto* jf = FlagStorage<JobRunFlags>();
    AddJobRunFlags(cmd, jf);
    cmd->callback([f, g, jf, name, &exit_code] { exit_code = RunUp(*f, *g, *jf, *name); });
  }
  // stoker node
  {
    auto* c = FlagStorage<ClientFlags>();
    auto* g = FlagStorage<GpuFlags>();
    auto* name = FlagStorage<std::string>();
    auto* dir = FlagStorage<std::string>();
    auto* cmd =
        app.add_subcommand("node", "Run jobs for a Stoker server on this machine (agent token)");
    AddClientFlags(cmd, c);
    cmd->add_option("--name", *name,
                    "Node name (must match the agent token's name; default: host name)");
    cmd->add_option("--state-dir", *dir, "Job state directory (default <data dir>/node/jobs)");
    cmd->add_option("--simulate", g->simulate,
                    "Serve a simulated node from this fake-NVML scenario");
    cmd->add_option("--nvml-lib", g->nvml_lib, "NVML library to load")->capture_default_str();
    auto* jf = FlagStorage<JobRunFlags>();
    AddJobRunFlags(cmd, jf);
    cmd->callback(
        [c, g, jf, name, dir, &exit_code] { exit_code = RunNode(*c, *g, *jf, *name, *dir); });
  }
  // stoker _job-shim DIR (internal: the per-job supervisor)
  {
    auto* dir = FlagStorage<std::string>();
    auto* cmd = app.add_subcommand("_job-shim", "");
    cmd->group("");
    cmd->add_option("dir", *dir)->required();
    cmd->callback([dir, &exit_code] { exit_code = runner::ShimMain(*dir); });
  }
  // stoker submit
  {
    auto* c = FlagStorage<ClientFlags>();
    auto* s = FlagStorage<SubmitFlags>();
    auto* cmd =
        app.add_subcommand("submit", "Submit a job: stoker submit --gpus 2 -- python train.py");
    AddClientFlags(cmd, c);
    cmd->add_option("--gpus", s->gpus, "Whole GPUs (elastic maximum with --min-gpus)");
    cmd->add_option("--min-gpus", s->min_gpus, "Elastic minimum GPUs");
    cmd->add_option("--gpu-milli", s->gpu_milli, "A share of one GPU in milli-GPU (1..999)");
    cmd->add_option("--gpu-mem", s->gpu_mem, "GPU memory per GPU (MiB, or 16G)");
    cmd->add_option("--gpu-model", s->gpu_models, "Allowed GPU model (substring; repeatable)");
    cmd->add_option("--mig", s->mig, "MIG profile, e.g. 1g.10gb");
    cmd->add_option("--cpu", s->cpu, "CPU cores (e.g. 0.5)");
    cmd->add_option("--mem", s->mem, "Memory (MiB, or 4G)");
    cmd->add_option("--class", s->job_class, "Job class (weighted placement policy)");
    cmd->add_option("--priority", s->priority, "Priority (-1000..1000, larger first)");
    cmd->add_flag("--preemptible", s->preemptible, "The job may be preempted");
    cmd->add_flag("--movable", s->movable,
                  "The job checkpoints: the system may restart it at once to consolidate GPUs");
    cmd->add_option("--name", s->name, "Job name");
    cmd->add_option("--workdir", s->workdir, "Working directory (default: the current one)");
    cmd->add_option("--env", s->env, "Environment variable K=V (repeatable)");
    cmd->add_option("--on-node-loss", s->on_node_loss, "requeue (default) or fail");
    cmd->add_option("--user", s->user, "Submit for this user (admins)");
    cmd->add_option("command", s->command, "The command and its arguments (after --)")->required();
    cmd->callback([c, s, &exit_code] { exit_code = RunSubmit(*c, *s); });
  }
  // stoker jobs
  {
    auto* c = FlagStorage<ClientFlags>();
    auto* state = FlagStorage<std::string>();
    auto* user = FlagStorage<std::string>();
    auto* node = FlagStorage<std::string>();
    auto* cmd = app.add_subcommand("jobs", "List jobs");
    AddClientFlags(cmd, c);
    cmd->add_option(
        "--state", *state,
        "Comma-separated states (queued,assigned,running,cancelling,succeeded,failed,cancelled)");
    cmd->add_option("--user", *user, "Only this user's jobs");
    cmd->add_option("--node", *node, "Only jobs on this node");
    cmd->callback([c, state, user, node, &exit_code] {
      std::string q;
      if (!state->empty()) q += "&state=" + UrlEncode(*state);
      if (!user->empty()) q += "&user=" + UrlEncode(*user);
      if (!node->empty()) q += "&node=" + UrlEncode(*node);
      if (!q.empty()) q[0] = '?';
      exit_code = RunGetAndPrint(*c, "/api/v1/jobs" + q, PrintJobsTable);
    });
  }
  // stoker job ID
  {
    auto* c = FlagStorage<ClientFlags>();
    auto* id = FlagStorage<int64_t>(0);
    auto* cmd = app.add_subcommand("job", "Show one job and its events");
    AddClientFlags(cmd, c);
    cmd->add_option("id", *id, "Job id")->required();
    cmd->callback([c, id, &exit_code] {
      exit_code = RunGetAndPrint(*c, "/api/v1/jobs/" + std::to_string(*id), [&](const json& j) {
        PrintJobsTable(json::array({j}));
        fmt::print("\ncommand: {}\n", j["spec"]["command"].dump());
        if (j.contains("assignment")) fmt::print("assignment: {}\n", j["assignment"].dump());
        auto client = MakeClient(*c);
        if (!client.ok()) return;
        auto ev = Call(*client, "GET", "/api/v1/jobs/" + std::to_string(*id) + "/events");
        if (!ev.ok()) return;
        fmt::print("events:\n");
        for (const json& e : *ev) {
          fmt::print("  {}  {:<10} {}\n", e["ts_ms"].get<int64_t>(), e["kind"].get<std::string>(),
                     e["message"].get<std::string>());
        }
      });
    });
  }
  // stoker cancel ID
  {
    auto* c = FlagStorage<ClientFlags>();
    auto* id = FlagStorage<int64_t>(0);
    auto* cmd =
        app.add_subcommand("cancel", "Cancel a job (SIGTERM to its process group, then SIGKILL)");
    AddClientFlags(cmd, c);
    cmd->add_option("id", *id, "Job id")->required();
    cmd->callback([c, id, &exit_code] {
      auto client = MakeClient(*c);
      if (!client.ok()) {
        exit_code = Fail(client.status());
        return;
      }
      auto r = Call(*client, "POST", "/api/v1/jobs/" + std::to_string(*id) + "/cancel");
      if (!r.ok()) {
        exit_code = Fail(r.status());
        return;
      }
      if (c->json)
        fmt::print("{}\n", r->dump(2));
      else
        fmt::print("job {}: {}\n", *id, (*r)["state"].get<std::string>());
      exit_code = kExitOk;
    });
  }
  // stoker logs ID [-f]
  {
    auto* c = FlagStorage<ClientFlags>();
    auto* id = FlagStorage<int64_t>(0);
    auto* follow = FlagStorage<bool>(false);
    auto* err = FlagStorage<bool>(false);
    auto* cmd = app.add_subcommand("logs", "Print a job's output");
    AddClientFlags(cmd, c);
    cmd->add_option("id", *id, "Job id")->required();
    cmd->add_flag("-f,--follow", *follow, "Keep printing until the job ends");
    cmd->add_flag("--stderr", *err, "Print standard error instead of standard output");
    cmd->callback(
        [c, id, follow, err, &exit_code] { exit_code = RunLogs(*c, *id, *follow, *err); });
  }
  // stoker nodes
  {
    auto* c = FlagStorage<ClientFlags>();
    auto* cmd = app.add_subcommand("nodes", "List nodes");
    AddClientFlags(cmd, c);
    cmd->callback([c, &exit_code] {
      exit_code = RunGetAndPrint(*c, "/api/v1/nodes", [](const json& nodes) {
        fmt::print("{:<20} {:<8} {:<6} {:<9} {:<5} {:<30} {}\n", "NODE", "STATE", "CPUS",
                   "MEM(GiB)", "JOBS", "GPUS", "SOURCE");
        for (const json& n : nodes) {
          std::string gpus = std::to_string(n["gpus"].size());
          if (!n["gpus"].empty()) gpus += " x " + n["gpus"][0].value("model", "");
          fmt::print("{:<20} {:<8} {:<6} {:<9} {:<5} {:<30} {}\n", n["name"].get<std::string>(),
                     n["state"].get<std::string>(), n["cpu_milli"].get<int64_t>() / 1000,
                     n["memory_mib"].get<int64_t>() / 1024, n.value("active_jobs", 0),
                     gpus.substr(0, 30),
                     n.value("simulated", false) ? "SIMULATED" : n.value("source", ""));
        }
        // What each node enforces for its jobs (cgroups, or process tracking only).
        for (const json& n : nodes) {
          if (n.contains("isolation")) {
            fmt::print("{}: jobs run with {}\n", n["name"].get<std::string>(),
                       n["isolation"].get<std::string>());
          }
        }
      });
    });
  }
  // stoker drain / undrain NODE
  for (const char* verb : {"drain", "undrain"}) {
    auto* c = FlagStorage<ClientFlags>();
    auto* node = FlagStorage<std::string>();
    auto* cmd = app.add_subcommand(verb, std::string(verb) == "drain"
                                             ? "Stop placing new jobs on a node (admin)"
                                             : "Resume placing jobs on a node (admin)");
    AddClientFlags(cmd, c);
    cmd->add_option("node", *node, "Node name")->required();
    const std::string v = verb;
    cmd->callback([c, node, v, &exit_code] {
      auto client = MakeClient(*c);
      if (!client.ok()) {
        exit_code = Fail(client.status());
        return;
      }
      auto r = Call(*client, "POST", "/api/v1/nodes/" + *node + "/" + v);
      if (!r.ok()) {
        exit_code = Fail(r.status());
        return;
      }
      if (c->json)
        fmt::print("{}\n", r->dump(2));
      else
        fmt::print("node {}: {}\n", *node, (*r)["state"].get<std::string>());
      exit_code = kExitOk;
    });
  }
  // stoker token create|list|revoke, stoker audit
  {
    auto* tok = app.add_subcommand("token", "Manage API tokens (admin): create, list, revoke");
    tok->require_subcommand(1);
    auto* c = FlagStorage<ClientFlags>();
    auto* role = FlagStorage<std::string>("user");
    auto* name = FlagStorage<std::string>();
    auto* expires = FlagStorage<std::string>();
    auto* create = tok->add_subcommand("create", "Create a token; it is printed once");
    AddClientFlags(create, c);
    create->add_option("--role", *role, "admin, agent or user")
        ->check(CLI::IsMember({"admin", "agent", "user"}))
        ->capture_default_str();
    create->add_option("--name", *name, "User name, or the node name for an agent token")
        ->required();
    create->add_option("--expires-in", *expires,
                       "Stop accepting the token after this long (e.g. 90d, 12h); default never");
    create->callback([c, role, name, expires, &exit_code] {
      auto client = MakeClient(*c);
      if (!client.ok()) {
        exit_code = Fail(client.status());
        return;
      }
      json body{{"role", *role}, {"name", *name}};
      if (!expires->empty()) body["expires_in"] = *expires;
      auto r = Call(*client, "POST", "/api/v1/tokens", body);
      if (!r.ok()) {
        exit_code = Fail(r.status());
        return;
      }
      if (c->json)
        fmt::print("{}\n", r->dump(2));
      else
        fmt::print("{}\n", (*r)["token"].get<std::string>());
      exit_code = kExitOk;
    });
    auto* lc = FlagStorage<ClientFlags>();
    auto* list = tok->add_subcommand("list", "List tokens: id, name, role, created, expiry");
    AddClientFlags(list, lc);
    list->callback([lc, &exit_code] {
      exit_code = RunGetAndPrint(*lc, "/api/v1/tokens", [](const json& ts) {
        fmt::print("{:<13} {:<20} {:<6} {:<20} {}\n", "ID", "NAME", "ROLE", "CREATED", "EXPIRES");
        for (const json& t : ts) {
          fmt::print(
              "{:<13} {:<20} {:<6} {:<20} {}\n", t["id"].get<std::string>(),
              t["name"].get<std::string>(), t["role"].get<std::string>(),
              FormatMs(t["created_ms"].get<int64_t>()),
              t["expires_ms"].is_null() ? "never" : FormatMs(t["expires_ms"].get<int64_t>()));
        }
      });
    });
    auto* rc = FlagStorage<ClientFlags>();
    auto* id = FlagStorage<std::string>();
    auto* revoke = tok->add_subcommand("revoke", "Revoke a token by its id (see token list)");
    AddClientFlags(revoke, rc);
    revoke->add_option("id", *id, "Token id")->required();
    revoke->callback([rc, id, &exit_code] {
      auto client = MakeClient(*rc);
      if (!client.ok()) {
        exit_code = Fail(client.status());
        return;
      }
      auto r = Call(*client, "DELETE", "/api/v1/tokens/" + *id);
      if (!r.ok()) {
        exit_code = Fail(r.status());
        return;
      }
      if (rc->json)
        fmt::print("{}\n", r->dump(2));
      else
        fmt::print("revoked token {} ({}, {})\n", *id, (*r)["name"].get<std::string>(),
                   (*r)["role"].get<std::string>());
      exit_code = kExitOk;
    });
    auto* ac = FlagStorage<ClientFlags>();
    auto* audit = app.add_subcommand("audit", "Show the audit log (admin)");
    AddClientFlags(audit, ac);
    audit->callback([ac, &exit_code] {
      exit_code = RunGetAndPrint(*ac, "/api/v1/audit", [](const json& rows) {
        fmt::print("{:<20} {:<16} {:<13} {}\n", "TIME", "ACTOR", "ACTION", "SUBJECT");
        for (const json& a : rows) {
          fmt::print("{:<20} {:<16} {:<13} {} ({})\n", FormatMs(a["ts_ms"].get<int64_t>()),
                     a["actor"].get<std::string>(), a["action"].get<std::string>(),
                     a["subject"].get<std::string>(), a["detail"].get<std::string>());
        }
      });
    });
  }
  // stoker queue
  {
    auto* c = FlagStorage<ClientFlags>();
    auto* cmd = app.add_subcommand("queue", "Show queued jobs in scheduling order");
    AddClientFlags(cmd, c);
    cmd->callback([c, &exit_code] {
      exit_code = RunGetAndPrint(*c, "/api/v1/queue", [](const json& q) {
        fmt::print("{:<5} {:<6} {:<10} {:<18} {:<5} {}\n", "POS", "ID", "USER", "NAME", "PRIO",
                   "REASON");
        for (const json& e : q) {
          fmt::print("{:<5} {:<6} {:<10} {:<18} {:<5} {}\n", e["position"].get<int>(),
                     e["job"].get<int64_t>(), e["user"].get<std::string>(),
                     e["name"].get<std::string>(), e["priority"].get<int>(),
                     e["reason"].get<std::string>());
        }
      });
    });
  }
}

}  // namespace stoker::cli
