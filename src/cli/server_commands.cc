// The daemons: `stoker server`, `stoker up` (a server and a local node in one process),
// `stoker node`, and the hidden per-job supervisor `_job-shim`. The client commands are in
// job_commands.cc and admin_commands.cc; what they share in common.h.

#include <fcntl.h>
#include <fmt/core.h>
#include <pwd.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <span>
#include <thread>

#include "cli/cli.h"
#include "cli/common.h"
#include "cli/node_flags.h"
#include "client/api_client.h"
#include "core/clock.h"
#include "core/duration.h"
#include "integration/efficiency_service.h"
#include "integration/http_poster.h"
#include "integration/k8s_extender_service.h"
#include "integration/slurm_engine.h"
#include "k8s/pod_reclaim.h"
#include "node/node_agent.h"
#include "nvml/nvml_gpu_source.h"
#include "nvml/simulated.h"
#include "runner/runner.h"
#include "server/api.h"
#include "server/server.h"
#include "store/store.h"
#include "telemetry/sampler.h"
#include "telemetry/snapshot_json.h"
#include "web/history.h"
#include "web/site.h"

namespace stoker::cli {
namespace {
namespace fs = std::filesystem;
using server::json;

constexpr const char* kDefaultScenario = "h100-mig-node";

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }

void InstallSignalHandlers() {
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  // SIGPIPE is ignored for every command in cli::Main.
}

// ---- server and node wiring -----------------------------------------------------------------

struct ServerFlags {
  std::string data_dir;
  std::string listen = kDefaultListen;
  std::string tls_cert, tls_key;
  std::string tls_client_ca;
  std::vector<std::string> tls_client_roles;  // "CN=ROLE" (docs/kubernetes.md)
  std::string k8s_reclaim = "off";            // off | dry-run | evict
  std::string k8s_extender = "auto";          // auto | on | off
  std::string placement;
  std::string queue = "fifo";
  bool no_backfill = false;
  double node_timeout_s = 30;
  std::string sync = "full";
  std::string efficiency_config;  // YAML (docs/efficiency.md); empty: defaults
  std::string alertmanager;       // base URL: efficiency alerts are also posted there
  int http_threads = 32;
  std::string dashboard_bucket = "30s";  // the dashboard's history: one point per GPU per bucket
  std::string engine = "stoker";         // stoker: the server runs jobs; slurm: Slurm does
  std::string slurm_config;              // YAML (docs/slurm.md); empty: defaults
  std::string activity_window = "5m";    // placement by measured use (docs/scheduling.md)
  int gang_port_base = 29500;            // MASTER_PORT of multi-node jobs: 1,000 ports from it
};

void AddServerFlags(CLI::App* cmd, ServerFlags* f) {
  cmd->add_option("--efficiency-config", f->efficiency_config,
                  "Efficiency engine configuration (zones, alerts, idle reclaim, market; YAML)");
  cmd->add_option("--alertmanager", f->alertmanager,
                  "Also send efficiency alerts to this Alertmanager (http://host:9093)");
  cmd->add_option("--engine", f->engine,
                  "Who runs the jobs: stoker (the server places them on its nodes) or slurm "
                  "(Slurm does; the server steers, measures, reclaims and bills them)")
      ->check(CLI::IsMember({"stoker", "slurm"}))
      ->capture_default_str();
  cmd->add_option("--slurm-config", f->slurm_config,
                  "With --engine slurm: the Slurm engine's configuration (YAML, docs/slurm.md)");
  cmd->add_option("--data-dir", f->data_dir,
                  "Data directory (default $XDG_STATE_HOME/stoker or ~/.local/state/stoker)");
  cmd->add_option("--listen", f->listen, "HOST:PORT to serve the API on")->capture_default_str();
  cmd->add_option("--dashboard-bucket", f->dashboard_bucket,
                  "Time bucket of the web dashboard's GPU history (1s..10m; 24 h are kept)")
      ->capture_default_str();
  cmd->add_option("--tls-cert", f->tls_cert, "PEM certificate: serve HTTPS");
  cmd->add_option("--tls-key", f->tls_key, "PEM private key for --tls-cert");
  cmd->add_option("--tls-client-ca", f->tls_client_ca,
                  "PEM CA whose client certificates are accepted (kube-scheduler's; needs "
                  "--tls-cert)");
  cmd->add_option("--k8s-reclaim", f->k8s_reclaim,
                  "Kubernetes: idle reclaim of pods (off, dry-run: decide and record, evict: "
                  "evict through the Kubernetes API as this pod's service account)")
      ->check(CLI::IsMember({"off", "dry-run", "evict"}))
      ->capture_default_str();
  cmd->add_option("--k8s-extender", f->k8s_extender,
                  "Kubernetes scheduler extender: on, off, or auto (on when a client "
                  "certificate maps to the scheduler role or --k8s-reclaim is not off); while "
                  "off it takes no heartbeats and its verbs answer that it is off")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  cmd->add_option("--tls-client-role", f->tls_client_roles,
                  "CN=ROLE: a verified client certificate with this Common Name acts with this "
                  "role, e.g. kube-scheduler=scheduler (repeatable)");
  cmd->add_option("--placement", f->placement,
                  "Placement policy (scheduler library name; default: the library's default)");
  cmd->add_option("--queue", f->queue, "Queue policy: fifo, sjf, srtf, las, priority")
      ->capture_default_str();
  cmd->add_flag("--no-backfill", f->no_backfill,
                "Strict queue order: a blocked job stops later ones");
  cmd->add_option("--node-timeout", f->node_timeout_s,
                  "Seconds without heartbeat before a node is lost")
      ->capture_default_str();
  cmd->add_option("--activity-window", f->activity_window,
                  "Window over which the GPU activity the agents report is averaged for placement "
                  "by measured use (the weighted policy's utilization, oversubscription headroom)")
      ->capture_default_str();
  cmd->add_option("--gang-port-base", f->gang_port_base,
                  "First MASTER_PORT given to multi-node jobs (the lowest free of 1,000 ports from "
                  "it, per rank-0 node)")
      ->check(CLI::Range(1, 64536))
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
  // The web dashboard: the GPU history it draws (observer + API extension) and its files,
  // served in front of the API.
  std::unique_ptr<web::History> history;
  std::unique_ptr<web::Site> site;
  std::unique_ptr<http::Listener> http;
  SystemClock clock;
  // Efficiency engine: server observer + API extension; stopped before the clock goes.
  std::unique_ptr<efficiency::StoreLedgerStore> ledger;
  efficiency::LogNotifier log_notifier;
  std::unique_ptr<efficiency::WebhookPoster> poster;
  std::unique_ptr<efficiency::AlertmanagerNotifier> alertmanager;
  std::unique_ptr<efficiency::EfficiencyService> efficiency;
  // The Kubernetes scheduler extender (observer + API extension), stopped with the server, and
  // the Kubernetes API client its pod reclaim evicts through.
  std::unique_ptr<k8s::PodEvictor> evictor;
  std::unique_ptr<integration::KubernetesExtender> k8s;
  // --engine slurm: Slurm's commands, the agents, and the engine's loop (stopped first).
  std::unique_ptr<slurm::CommandSlurmClient> slurm_client;
  std::unique_ptr<slurm::AgentSampleSource> slurm_agents;
  std::unique_ptr<slurm::SlurmEngine> slurm;
  void Stop() const {
    if (http) http->Stop();
    if (slurm) slurm->Stop();
    if (k8s) k8s->Stop();
    if (efficiency) efficiency->Stop();
    if (core) core->Stop();
  }
};

// --tls-client-role CN=ROLE entries as the server's certificate map.
// Whether the scheduler extender is fed: --k8s-extender, or by default where Kubernetes is
// configured (kube-scheduler can reach the extender only with a client certificate mapped to
// the scheduler role; pod reclaim reads the extender's samples).
bool KubernetesExtenderOn(const ServerFlags& f,
                          const std::map<std::string, server::Principal>& certificates) {
  if (f.k8s_extender != "auto") return f.k8s_extender == "on";
  if (f.k8s_reclaim != "off") return true;
  return std::any_of(certificates.begin(), certificates.end(),
                     [](const auto& c) { return c.second.role == server::Role::kScheduler; });
}

Result<std::map<std::string, server::Principal>> ClientRoles(const ServerFlags& f) {
  std::map<std::string, server::Principal> out;
  for (const std::string& entry : f.tls_client_roles) {
    const size_t eq = entry.rfind('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == entry.size()) {
      return InvalidArgument("--tls-client-role: expected CN=ROLE, got '" + entry + "'");
    }
    const std::string cn = entry.substr(0, eq);
    auto role = protocol::kRoleNames.Parse(entry.substr(eq + 1));
    if (!role.ok()) return role.status().WithContext("--tls-client-role " + entry);
    out[cn] = server::Principal{cn, *role};
  }
  if (!out.empty() && f.tls_client_ca.empty()) {
    return InvalidArgument("--tls-client-role needs --tls-client-ca (the CA that signs them)");
  }
  return out;
}

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

// The jobs a restart finds queued or holding resources, read once for every observer joining at
// start: all of them, a page at a time (a deep queue holds more than a page), those holding
// resources first, then the queued, each in the order listed.
struct UnendedJobs {
  std::vector<server::Job> jobs;
  size_t holding = 0;  // jobs[0, holding) hold resources (assigned, running, cancelling)
};
Result<UnendedJobs> ReadUnendedJobs(const RunningServer& rs) {
  server::JobFilter unended;
  unended.states = {server::JobState::kAssigned, server::JobState::kRunning,
                    server::JobState::kCancelling, server::JobState::kQueued};
  unended.limit = 100000;
  auto jobs = rs.core->ListAllJobs(server::Principal{"observers", server::Role::kAdmin}, unended);
  if (!jobs.ok()) return jobs.status().WithContext("the jobs the observers join with");
  UnendedJobs out{std::move(jobs).value(), 0};
  const auto queued =
      std::stable_partition(out.jobs.begin(), out.jobs.end(),
                            [](const server::Job& j) { return server::IsActive(j.state); });
  out.holding = static_cast<size_t>(queued - out.jobs.begin());
  return out;
}

// Plugs the efficiency engine into the server, its API and /metrics; `unended`: every unended
// job (ReadUnendedJobs).
Status StartEfficiency(RunningServer& rs, const ServerFlags& f,
                       const efficiency::EfficiencyConfig& cfg_value,
                       const std::vector<server::Job>& unended) {
  const efficiency::EfficiencyConfig* cfg = &cfg_value;
  rs.ledger = std::make_unique<efficiency::StoreLedgerStore>(rs.store.get());
  rs.efficiency =
      std::make_unique<efficiency::EfficiencyService>(*cfg, rs.core.get(), rs.ledger.get());
  STOKER_RETURN_IF_ERROR(rs.efficiency->Init(rs.clock.WallNow()));
  rs.efficiency->SetReportChartScript(web::ReportChartScript());
  rs.efficiency->AddNotifier(&rs.log_notifier);
  if (!f.alertmanager.empty()) {
    rs.poster = std::make_unique<efficiency::WebhookPoster>();
    rs.alertmanager = std::make_unique<efficiency::AlertmanagerNotifier>(
        *rs.poster, f.alertmanager, cfg->alerting.repeat_interval + std::chrono::minutes(15));
    rs.efficiency->AddNotifier(rs.alertmanager.get());
  }
  // Jobs already running or queued (a restart) join the engine's directory.
  rs.efficiency->OnJobsChanged(unended);
  rs.core->AddObserver(rs.efficiency.get());
  rs.api->AddExtension(rs.efficiency.get());
  return Status::Ok();
}

// --engine slurm: the Slurm engine in the server's loop, its metrics on /metrics.
Status StartSlurmEngine(RunningServer& rs, const ServerFlags& f) {
  if (f.engine != "slurm") {
    if (!f.slurm_config.empty()) return InvalidArgument("--slurm-config: needs --engine slurm");
    return Status::Ok();
  }
  auto cfg = f.slurm_config.empty() ? slurm::LoadSlurmEngineConfigYaml("")
                                    : slurm::LoadSlurmEngineConfigFile(f.slurm_config);
  if (!cfg.ok()) return cfg.status().WithContext("--slurm-config");
  rs.slurm_client = std::make_unique<slurm::CommandSlurmClient>(cfg->client);
  rs.slurm_agents = std::make_unique<slurm::AgentSampleSource>(cfg->agents);
  auto engine = slurm::SlurmEngine::Create(*std::move(cfg), rs.slurm_client.get(),
                                           rs.slurm_agents.get(), rs.efficiency.get(), &rs.clock);
  if (!engine.ok()) return engine.status().WithContext("--slurm-config");
  rs.slurm = std::move(engine).value();
  rs.api->AddExtension(rs.slurm.get());
  return Status::Ok();
}

// The web dashboard's history (fed like the efficiency engine) and its files at /; `holding`:
// the unended jobs holding resources (ReadUnendedJobs).
Status StartDashboard(RunningServer& rs, const ServerFlags& f,
                      std::span<const server::Job> holding) {
  auto bucket = ParseDuration(f.dashboard_bucket);
  if (!bucket.ok()) return bucket.status().WithContext("--dashboard-bucket");
  if (*bucket < std::chrono::seconds(1) || *bucket > std::chrono::minutes(10)) {
    return InvalidArgument("--dashboard-bucket: must be between 1s and 10m");
  }
  web::HistoryOptions ho;
  ho.bucket = *bucket;
  // At most ~2,900 points per GPU whatever the bucket (24 h at 30 s), so memory stays bounded.
  ho.span = std::min<Duration>(std::chrono::hours(24), *bucket * 2880);
  rs.history = std::make_unique<web::History>(&rs.clock, ho);
  // Jobs holding GPUs (a restart): their GPUs' history is theirs. Queued ones hold nothing.
  rs.history->OnJobsChanged(holding);
  rs.core->AddObserver(rs.history.get());
  rs.api->AddExtension(rs.history.get());
  rs.site = std::make_unique<web::Site>(rs.api.get(), web::EmbeddedAssets());
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
  auto activity_window = ParseDuration(f.activity_window);
  if (!activity_window.ok()) return activity_window.status().WithContext("--activity-window");
  so.activity_window = *activity_window;
  so.gang_port_base = f.gang_port_base;
  STOKER_ASSIGN_OR_RETURN(so.client_certificates, ClientRoles(f));
  STOKER_ASSIGN_OR_RETURN(efficiency::EfficiencyConfig eff_cfg, LoadEfficiencyConfig(f));
  // Oversubscription is the efficiency configuration's; the scheduling pass applies it.
  so.gpu_oversubscription_milli = static_cast<int32_t>(eff_cfg.oversub.max_ratio_milli);
  so.preemption_grace = eff_cfg.oversub.grace;
  STOKER_ASSIGN_OR_RETURN(rs->core, server::Server::Create(rs->store.get(), &rs->clock, so));
  rs->api = std::make_unique<server::Api>(rs->core.get());
  http::ListenerOptions ho;
  ho.host = hp.first;
  ho.port = hp.second;
  ho.tls_cert = f.tls_cert;
  ho.tls_key = f.tls_key;
  ho.tls_client_ca = f.tls_client_ca;
  ho.threads = f.http_threads;
  STOKER_ASSIGN_OR_RETURN(const UnendedJobs unended, ReadUnendedJobs(*rs));
  STOKER_RETURN_IF_ERROR(StartEfficiency(*rs, f, eff_cfg, unended.jobs));
  STOKER_RETURN_IF_ERROR(StartSlurmEngine(*rs, f));
  // The scheduler extender: fed by heartbeats like the efficiency engine, zones as it sets them;
  // idle reclaim of pods with the engine's idle policy when --k8s-reclaim asks for it.
  integration::KubernetesOptions ko;
  ko.zones = eff_cfg.zones;
  ko.enabled = KubernetesExtenderOn(f, so.client_certificates);
  if (f.k8s_reclaim != "off") {
    ko.reclaim = eff_cfg.idle;
    if (f.k8s_reclaim == "evict") {
      STOKER_ASSIGN_OR_RETURN(k8s::KubeApiConfig api, k8s::InClusterConfig());
      rs->evictor = k8s::NewKubeApiEvictor(std::move(api));
      ko.evictor = rs->evictor.get();
    }
  }
  rs->k8s = std::make_unique<integration::KubernetesExtender>(rs->core.get(), &rs->clock, ko);
  if (ko.enabled) rs->core->AddObserver(rs->k8s.get());
  rs->api->AddExtension(rs->k8s.get());
  STOKER_RETURN_IF_ERROR(
      StartDashboard(*rs, f, std::span<const server::Job>(unended.jobs).first(unended.holding)));
  rs->http = std::make_unique<http::Listener>(rs->site.get(), ho);
  STOKER_RETURN_IF_ERROR(rs->http->Start());
  rs->core->Start();
  rs->efficiency->Start(&rs->clock);
  if (rs->slurm) rs->slurm->Start();
  rs->k8s->Start();
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

node::GpuSamplesFeed SamplesFrom(telemetry::Sampler* sampler) {
  if (!sampler) return {[] { return std::vector<GpuSample>(); }};
  return {[sampler] {
    telemetry::TelemetrySnapshot snap;
    sampler->Snapshot(&snap);
    return telemetry::ReportSamples(snap);
  }};
}

// ---- commands -------------------------------------------------------------------------------

int RunServer(ServerFlags f) {
  InstallSignalHandlers();
  auto rs = StartServer(f);
  if (!rs.ok()) return Fail(rs.status());
  auto token = EnsureAdminToken(**rs, f.data_dir);
  if (!token.ok()) return Fail(token.status());
  fmt::print("stoker server listening on {} (data {}; policy {})\n", (*rs)->http->url(), f.data_dir,
             protocol::PolicySettingsToJson((*rs)->core->Policy()).dump());
  if (f.engine == "slurm") {
    fmt::print(
        "engine: slurm ({}); Slurm runs the jobs, the server steers, measures, reclaims "
        "and bills them\n",
        f.slurm_config.empty() ? "default configuration" : f.slurm_config);
  }
  fmt::print("dashboard: {}/ (log in with a token)\n", (*rs)->http->url());
  fmt::print("admin token: {}/admin.token\n", f.data_dir);
  (void)std::fflush(stdout);  // for a reader of a pipe; nothing to do if it is gone
  while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  fmt::print("stopping (running jobs keep running on their nodes)\n");
  (*rs)->Stop();
  return kExitOk;
}

int RunUp(ServerFlags f, const GpuFlags& g, const JobRunFlags& jf, std::string node_name) {
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
  node::NodeAgent agent(no, &server.clock, inv, SamplesFrom(gpus->sampler.get()));

  fmt::print("stoker up: server {} , data dir {}\n", url, f.data_dir);
  fmt::print("dashboard: {}/ (log in with the admin token in {}/admin.token)\n", url, f.data_dir);
  if (!gpus->note.empty()) fmt::print("{}\n", gpus->note);
  fmt::print("node '{}': {} CPUs, {} MiB, {} GPU(s){}\n", node_name, inv.cpu_milli / 1000,
             inv.memory_mib, inv.gpus.size(), inv.simulated ? " [simulated]" : "");
  fmt::print("{}\n", isolation);
  fmt::print("admin token in {}/admin.token; the CLI on this machine finds this server via {}\n",
             f.data_dir, LocalEntryPath(f.data_dir));
  fmt::print("try: stoker submit -- echo hello   ·   stoker jobs   ·   stoker nodes\n");
  (void)std::fflush(stdout);  // for a reader of a pipe; nothing to do if it is gone

  std::thread node_thread([&] { agent.Run(&g_stop); });
  while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  server.clock.Wake();
  node_thread.join();
  if (gpus->sampler) gpus->sampler->Stop();
  server.Stop();
  fmt::print("stopped (running jobs keep running and are reconciled at the next start)\n");
  return kExitOk;
}

int RunNode(const ClientFlags& c, const GpuFlags& g, const JobRunFlags& jf, std::string name,
            std::string state_dir) {
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
                        SamplesFrom(gpus->sampler.get()));
  if (!gpus->note.empty()) fmt::print("{}\n", gpus->note);
  fmt::print("node '{}' reporting to {} (jobs in {})\n{}\n", name, no.server_url, state_dir,
             isolation);
  (void)std::fflush(stdout);  // for a reader of a pipe; nothing to do if it is gone
  std::thread t([&] { agent.Run(&g_stop); });
  while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  clock.Wake();
  t.join();
  if (gpus->sampler) gpus->sampler->Stop();
  return kExitOk;
}

}  // namespace

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
}

}  // namespace stoker::cli
