// `stoker agent` (the node exporter; with --server also the node that runs a server's jobs) and
// `stoker smi` (a one-node status table).

#include <fmt/core.h>
#include <pthread.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include "agent/agent_config.h"
#include "agent/agent_server.h"
#include "agent/scenario_process_info.h"
#include "cli/cli.h"
#include "cli/common.h"
#include "cli/kubelet.h"
#include "cli/node_flags.h"
#include "cli/table.h"
#include "core/clock.h"
#include "fakenvml/scenario.h"
#include "k8s/pod_attribution.h"
#include "k8s/pod_resources.h"
#include "node/node_agent.h"
#include "nvml/nvml_gpu_source.h"
#include "nvml/simulated.h"
#include "telemetry/attribution.h"
#include "telemetry/sampler.h"
#include "telemetry/snapshot_json.h"
#include "telemetry/xid.h"

#ifndef STOKER_VERSION
#define STOKER_VERSION "dev"
#endif

namespace stoker::cli {
namespace {

using telemetry::GpuState;
using telemetry::TelemetrySnapshot;

struct SourceFlags {
  std::string simulate;
  std::string nvml_lib = "libnvidia-ml.so.1";
};

// The opened GPU source plus what attribution needs; `source` is null when NVML is missing.
struct OpenedSource {
  std::unique_ptr<GpuSource> source;
  std::unique_ptr<telemetry::ProcessInfo> process_info;
  std::string hostname;  // scenario host name when simulated
  std::string unavailable_reason;
};

bool ListScenarios(const SourceFlags& flags) {
  if (flags.simulate != "list") return false;
  for (const auto& s : nvml::BuiltinScenarios()) {
    std::cout << fmt::format("{:<16} {}\n", s.name, s.description);
  }
  return true;
}

// A simulated scenario that cannot be opened is an error; real NVML that cannot be opened is
// reported and `source` stays null (the caller decides whether that is fatal).
Result<OpenedSource> OpenSource(const SourceFlags& flags) {
  OpenedSource out;
  if (!flags.simulate.empty()) {
    STOKER_ASSIGN_OR_RETURN(out.source, nvml::OpenSimulatedGpuSource(flags.simulate));
    STOKER_ASSIGN_OR_RETURN(fakenvml::Scenario scenario,
                            nvml::LoadSimulatedScenario(flags.simulate));
    out.hostname = scenario.hostname;
    out.process_info = std::make_unique<agent::ScenarioProcessInfo>(scenario);
    return out;
  }
  out.process_info = std::make_unique<telemetry::ProcfsProcessInfo>();
  Result<std::unique_ptr<GpuSource>> src =
      nvml::OpenNvmlGpuSource({.library_path = flags.nvml_lib});
  if (src.ok()) {
    out.source = std::move(*src);
  } else {
    out.unavailable_reason = "NVML unavailable: " + src.status().ToString();
  }
  return out;
}

void AddSourceFlags(CLI::App* cmd, SourceFlags& flags) {
  cmd->add_option("--simulate", flags.simulate,
                  "Play a fake-NVML scenario: a built-in name or a YAML file ('list' lists them)");
  cmd->add_option("--nvml-lib", flags.nvml_lib, "NVML library to dlopen")->capture_default_str();
}

// ---------------------------------------------------------------------------------------------
// stoker agent

struct AgentFlags {
  SourceFlags source;
  std::string listen = "127.0.0.1:" + std::to_string(agent::kDefaultAgentPort);
  std::string interval = "1s";
  std::string xid_hold = "5m";
  std::string hostname;
  bool dcgm_compat = false;
  // Scale-out: with a server, the agent also registers this node, heartbeats with its samples
  // and runs the jobs the server places here (src/node).
  std::string server;
  std::string token;
  std::string token_file;     // a per-node file (Kubernetes: mounted from the host)
  std::string pod_resources;  // the kubelet's PodResources socket: name pods on their GPUs
  std::string ca_file;
  std::string state_dir;
  JobRunFlags jobs;
};

// Server URL and agent token, first match wins: flags, STOKER_SERVER / STOKER_TOKEN, then
// ~/.config/stoker/config.yaml (server:, token: or token_file:), as for the other commands.
// An empty URL means: no server, exporter only.
Result<std::pair<std::string, std::string>> ResolveServer(const AgentFlags& f) {
  std::string url = f.server, token = f.token, token_file = f.token_file;
  if (url.empty()) {
    if (const char* e = getenv("STOKER_SERVER"); e && *e) url = e;
  }
  if (url.empty()) return std::make_pair(std::string(), std::string());
  if (token.empty()) {
    if (const char* e = getenv("STOKER_TOKEN"); e && *e) token = e;
  }
  if (token.empty() && token_file.empty()) {
    STOKER_ASSIGN_OR_RETURN(ClientConfig config, ReadClientConfig(ConfigDir() + "/config.yaml"));
    token = config.token;
    token_file = config.token_file;
  }
  if (token.empty() && !token_file.empty()) {
    std::ifstream in(token_file);
    if (!(in >> token)) return PermissionDenied("cannot read token file " + token_file);
  }
  if (token.empty()) {
    return InvalidArgument("--token: an agent token is needed with --server (or STOKER_TOKEN)");
  }
  if (url.find("://") == std::string::npos) url = "http://" + url;
  return std::make_pair(url, token);
}

int RunAgent(const AgentFlags& flags) {
  if (ListScenarios(flags.source)) return kExitOk;
  // The PodResources client is gRPC: in stoker-k8s only (cli/kubelet.h).
  if (!flags.pod_resources.empty() && Kubelet().pod_resources == nullptr) {
    return RunKubeletProgram("agent");
  }
  auto listen = agent::ParseListenAddress(flags.listen);
  auto interval = ParseDuration(flags.interval);
  auto hold = ParseDuration(flags.xid_hold);
  for (const Status& s : {listen.status(), interval.status(), hold.status()}) {
    if (!s.ok()) {
      std::cerr << "stoker agent: " << s.message() << "\n";
      return kExitUsage;
    }
  }
  if (*interval < telemetry::kMinSampleInterval) {
    std::cerr << "stoker agent: --interval " << flags.interval << " is below the minimum 100ms\n";
    return kExitUsage;
  }
  auto upstream = ResolveServer(flags);
  if (!upstream.ok()) {
    std::cerr << "stoker agent: " << upstream.status().message() << "\n";
    return ExitCodeFor(upstream.status());
  }
  auto opened = OpenSource(flags.source);
  if (!opened.ok()) {
    std::cerr << "stoker agent: " << opened.status().ToString() << "\n";
    return ExitCodeFor(opened.status());
  }
  if (opened->source == nullptr) {
    spdlog::warn("{}; serving host metrics only (stoker_agent_nvml_available 0)",
                 opened->unavailable_reason);
  }
  const std::string hostname = !flags.hostname.empty()     ? flags.hostname
                               : !opened->hostname.empty() ? opened->hostname
                                                           : HostName();

  // Before any thread starts, so that they all inherit the mask.
  ShutdownSignals signals;

  SystemClock clock;
  telemetry::Attributor attributor(opened->process_info.get(), &clock,
                                   std::max<Duration>(*interval * 5, std::chrono::seconds(5)));
  // Kubernetes: the kubelet says which pod holds which of Stoker's devices.
  std::unique_ptr<k8s::PodResourcesSource> pod_resources;
  std::unique_ptr<k8s::PodAttribution> pods;
  if (!flags.pod_resources.empty()) {
    pod_resources = Kubelet().pod_resources(flags.pod_resources);
    pods = std::make_unique<k8s::PodAttribution>(pod_resources.get(), &clock);
    attributor.SetClaimResolver(pods.get());
    spdlog::info("stoker agent: pods named through the kubelet's PodResources at {}",
                 flags.pod_resources);
  }
  telemetry::SamplerOptions sopts;
  sopts.interval = *interval;
  sopts.xid_hold = *hold;
  telemetry::Sampler sampler(opened->source.get(), &clock, &attributor, sopts);
  sampler.set_unavailable_reason(opened->unavailable_reason);
  if (Status s = sampler.Start(); !s.ok()) {
    std::cerr << "stoker agent: " << s.ToString() << "\n";
    return kExitUsage;
  }
  agent::AgentServerOptions server_opts;
  server_opts.listen = *listen;
  server_opts.renderer = {
      .hostname = hostname, .version = STOKER_VERSION, .dcgm_compat = flags.dcgm_compat};
  agent::AgentServer server(&sampler, server_opts);
  if (Status s = server.Start(); !s.ok()) {
    sampler.Stop();
    std::cerr << "stoker agent: " << s.ToString() << "\n";
    return kExitUnavailable;
  }
  const bool simulated = opened->source != nullptr && opened->source->simulated();
  spdlog::info("stoker agent {} listening on http://{}:{}/metrics ({} GPUs, {}{})", STOKER_VERSION,
               listen->host, server.port(), sampler.gpu_count(),
               opened->source ? opened->source->Describe() : "no NVML",
               simulated ? ", SIMULATED" : "");
  // The node loop (server mode): same sampler, so the server sees what /metrics shows.
  std::unique_ptr<node::NodeAgent> node_agent;
  std::atomic<bool> stop_node{false};
  std::thread node_thread;
  if (!upstream->first.empty()) {
    // The agent token's name is the node name; --hostname sets both.
    const std::string node_name = !flags.hostname.empty() ? flags.hostname : HostName();
    node::NodeOptions no;
    no.server_url = upstream->first;
    no.token = upstream->second;
    no.ca_file = flags.ca_file;
    no.state_dir = !flags.state_dir.empty() ? flags.state_dir : DefaultDataDir() + "/node/jobs";
    no.shim_argv = {SelfExe(), "_job-shim"};
    spdlog::info("stoker agent: {}", ApplyJobRunFlags(flags.jobs, &no));
    protocol::NodeInventory inv = node::BuildInventory(node_name, opened->source.get());
    node_agent =
        std::make_unique<node::NodeAgent>(no, &clock, inv, node::GpuSamplesFeed{[&sampler] {
                                            TelemetrySnapshot snap;
                                            sampler.Snapshot(&snap);
                                            return telemetry::ReportSamples(snap);
                                          }});
    node_thread = std::thread([&] { node_agent->Run(&stop_node); });
    spdlog::info("stoker agent: node '{}' ({} GPUs{}) reporting to {}, jobs in {}", node_name,
                 inv.gpus.size(), inv.simulated ? ", SIMULATED" : "", no.server_url, no.state_dir);
  }
  const int sig = signals.Wait();
  spdlog::info("stoker agent: signal {}, shutting down", sig);
  if (node_thread.joinable()) {
    stop_node = true;
    clock.Wake();
    node_thread.join();  // running jobs keep running; the next start reconciles them
  }
  server.Stop();
  sampler.Stop();
  return kExitOk;
}

// ---------------------------------------------------------------------------------------------
// stoker smi

struct SmiFlags {
  SourceFlags source;
  bool json = false;
  std::string watch;  // seconds; "" with --watch given = default
  bool watch_given = false;
};

std::string Pct(const Field<uint32_t>& f) {
  if (f.has_value()) return fmt::format("{}%", f.value());
  return f.state() == FieldState::kError ? "err" : "n/a";
}
std::string Ratio(const Field<double>& f) {
  if (f.has_value()) return fmt::format("{:.0f}%", f.value() * 100);
  return f.state() == FieldState::kError ? "err" : "n/a";
}
std::string GiB(const Field<uint64_t>& f) {
  if (f.has_value()) return fmt::format("{:.1f}", static_cast<double>(f.value()) / (1ULL << 30));
  return f.state() == FieldState::kError ? "err" : "n/a";
}
std::string Watts(const Field<uint32_t>& f) {
  if (f.has_value()) return fmt::format("{:.0f}", f.value() / 1000.0);
  return f.state() == FieldState::kError ? "err" : "n/a";
}

std::string RenderTable(const TelemetrySnapshot& snap, const std::string& hostname, bool color) {
  std::string out;
  const char* bold = color ? "\033[1m" : "";
  const char* warn = color ? "\033[1;33m" : "";
  const char* reset = color ? "\033[0m" : "";
  // A header line in bold: the escapes around the text, before its '\n'.
  auto styled = [&](std::string line) {
    line.insert(line.size() - 1, reset);
    return bold + line;
  };
  if (snap.simulated) {
    out += fmt::format("{}*** SIMULATED: readings come from the fake NVML ({}) ***{}\n", warn,
                       snap.source_description, reset);
  }
  out += fmt::format("{}{}{}  {}\n", bold, hostname, reset, snap.source_description);
  const std::vector<Column> gpu_columns = {{"GPU", 4},
                                           {"Model", 26, Align::kLeft, ""},
                                           {"Util", 5, Align::kRight, ""},
                                           {"SM", 6, Align::kRight, ""},
                                           {"Tensor", 8, Align::kRight, ""},
                                           {"Memory GiB", 16, Align::kLeft, "  "},
                                           {"Temp", 6, Align::kRight, ""},
                                           {"Power W", 12, Align::kLeft, "  "},
                                           {"Health", 0, Align::kLeft, ""}};
  const Table gpus(gpu_columns);
  // A GPU without a fresh sample: its index, model and "-" for utilisation, then why.
  const Table lost({gpu_columns.begin(), gpu_columns.begin() + 3});
  const Table mig({{"", 0},
                   {"", 9, Align::kLeft, ""},
                   {"", 2, Align::kLeft, " GI "},
                   {"", 2, Align::kLeft, " CI "},
                   {"", 6, Align::kRight, "   "},
                   {"", 8, Align::kRight, ""},
                   {"", 16, Align::kLeft, "  "}});
  out += styled(gpus.Header());
  for (size_t i = 0; i < snap.gpus.size(); ++i) {
    const GpuState& g = snap.gpus[i];
    const GpuSample& s = g.sample;
    const bool fresh = g.have_sample && g.last_error.empty();
    std::string health =
        !fresh ? (g.have_sample ? "unreachable" : "no sample") : GpuHealthName(s.health);
    if (g.last_xid != 0) {
      health += fmt::format(" XID {} ({})", g.last_xid,
                            telemetry::XidGradeName(telemetry::GradeXid(g.last_xid)));
    }
    if (!fresh) {
      out += lost.Line({fmt::format("{}", i), s.id.name.substr(0, 25), "-"},
                       "  " + health + (g.last_error.empty() ? "" : ": " + g.last_error));
      continue;
    }
    const std::string temp =
        s.temperature_c.has_value() ? fmt::format("{}C", s.temperature_c.value()) : "n/a";
    out += gpus.Line({fmt::format("{}", i), s.id.name.substr(0, 25), Pct(s.util_gpu_pct),
                      Ratio(s.gpm.sm_active), Ratio(s.gpm.tensor_active),
                      GiB(s.memory_used_bytes) + "/" + GiB(s.memory_total_bytes), temp,
                      Watts(s.power_mw) + "/" + Watts(s.power_limit_mw), health});
    for (const MigInstance& m : s.mig_instances) {
      out += mig.Line({"  └ MIG ", m.profile, fmt::format("{}", m.gpu_instance_id),
                       fmt::format("{}", m.compute_instance_id), Ratio(m.gpm.sm_active),
                       Ratio(m.gpm.tensor_active),
                       GiB(m.memory_used_bytes) + "/" + GiB(m.memory_total_bytes)});
    }
  }
  const Table procs({{"GPU", 5},
                     {"PID", 8, Align::kLeft, ""},
                     {"MIG", 9, Align::kLeft, ""},
                     {"Job", 28, Align::kLeft, ""},
                     {"User", 12, Align::kLeft, ""},
                     {"Memory", 10, Align::kRight, ""},
                     {"Name", 0, Align::kLeft, "  "}});
  bool any = false;
  for (size_t i = 0; i < snap.gpus.size(); ++i) {
    const GpuState& g = snap.gpus[i];
    if (!g.have_sample || !g.last_error.empty()) continue;
    for (const GpuProcess& p : g.sample.processes) {
      if (!any) {
        out += "\n" + styled(procs.Header());
        any = true;
      }
      const std::string mig_ids =
          p.gpu_instance_id == UINT32_MAX
              ? "-"
              : fmt::format("{}/{}", p.gpu_instance_id, p.compute_instance_id);
      const std::string job = p.job.known()
                                  ? fmt::format("{}:{}{}{}", JobKindName(p.job.kind), p.job.id,
                                                p.job.step.empty() ? "" : ".", p.job.step)
                                  : "-";
      const std::string mem =
          p.used_memory_bytes.has_value()
              ? fmt::format("{:.1f} GiB",
                            static_cast<double>(p.used_memory_bytes.value()) / (1ULL << 30))
              : "n/a";
      out += procs.Line({fmt::format("{}", i), fmt::format("{}", p.pid), mig_ids, job.substr(0, 27),
                         p.job.user.empty() ? "-" : p.job.user.substr(0, 11), mem, p.name});
    }
  }
  if (!any) out += "\nNo GPU processes.\n";
  return out;
}

std::atomic<bool> g_smi_stop{false};
void OnSmiSignal(int) { g_smi_stop = true; }

int RunSmi(const SmiFlags& flags) {
  if (ListScenarios(flags.source)) return kExitOk;
  double watch_seconds = 0;
  if (flags.watch_given) {
    auto d = ParseDuration(flags.watch.empty() ? "2" : flags.watch);
    if (!d.ok() || *d < telemetry::kMinSampleInterval) {
      std::cerr << "stoker smi: --watch expects seconds >= 0.1\n";
      return kExitUsage;
    }
    watch_seconds = ToSeconds(*d);
  }
  auto opened = OpenSource(flags.source);
  if (!opened.ok()) {
    std::cerr << "stoker smi: " << opened.status().ToString() << "\n";
    return ExitCodeFor(opened.status());
  }
  if (opened->source == nullptr) {
    std::cerr << "stoker smi: " << opened->unavailable_reason
              << "\n(no GPU driver here? try `stoker smi --simulate list`)\n";
    return kExitUnavailable;
  }
  const std::string hostname = !opened->hostname.empty() ? opened->hostname : HostName();
  SystemClock clock;
  telemetry::Attributor attributor(opened->process_info.get(), &clock);
  telemetry::SamplerOptions sopts;
  sopts.watch_events = false;
  telemetry::Sampler sampler(opened->source.get(), &clock, &attributor, sopts);
  TelemetrySnapshot snap;
  const bool tty = isatty(STDOUT_FILENO) != 0;
  if (watch_seconds > 0) {
    // sigaction, not signal(): the handler stays installed with the same semantics everywhere.
    struct sigaction sa {};
    sa.sa_handler = OnSmiSignal;
    sigemptyset(&sa.sa_mask);
    for (int sig : {SIGINT, SIGTERM}) {
      if (sigaction(sig, &sa, nullptr) != 0) {
        std::cerr << "stoker smi: cannot install the handler of signal " << sig << ": "
                  << std::strerror(errno) << "\n";
        return kExitFailure;
      }
    }
  }
  for (uint32_t i = 0; i < sampler.gpu_count(); ++i) sampler.SampleOnce(i);
  // GPM ratios (SM/tensor activity, PCIe on Hopper+) are differences of two GPM samples, so a
  // one-shot read has none yet: take a second sample half a second later when they are missing.
  sampler.Snapshot(&snap);
  bool gpm_pending = false;
  for (const GpuState& g : snap.gpus) {
    gpm_pending |= g.have_sample && g.sample.gpm.sm_active.state() == FieldState::kUnset;
  }
  if (gpm_pending) clock.SleepUntil(clock.Now() + std::chrono::milliseconds(500));
  while (true) {
    for (uint32_t i = 0; i < sampler.gpu_count(); ++i) sampler.SampleOnce(i);
    sampler.Snapshot(&snap);
    snap.host = telemetry::ReadHostStats();
    if (flags.json) {
      std::cout << telemetry::SnapshotToJson(snap, hostname).dump(2) << std::endl;
    } else {
      // Redraw in place on a terminal; in a pipe each frame is simply appended.
      if (watch_seconds > 0 && tty) std::cout << "\033[H\033[2J";
      std::cout << RenderTable(snap, hostname, tty) << std::flush;
    }
    if (watch_seconds <= 0) break;
    const MonoTime until = clock.Now() + std::chrono::duration_cast<Duration>(
                                             std::chrono::duration<double>(watch_seconds));
    while (!g_smi_stop && clock.Now() < until) {
      clock.SleepUntil(std::min(until, clock.Now() + std::chrono::milliseconds(100)));
    }
    if (g_smi_stop) break;
  }
  return kExitOk;
}

}  // namespace

void RegisterAgentCommands(CLI::App& app, int& exit_code) {
  auto agent_flags = std::make_shared<AgentFlags>();
  CLI::App* agent = app.add_subcommand(
      "agent",
      "Run the node GPU telemetry agent (Prometheus /metrics, /healthz, /api/v1/snapshot)");
  agent->add_option("--listen", agent_flags->listen, "HOST:PORT to serve on")
      ->capture_default_str();
  agent->add_option("--interval", agent_flags->interval, "Sample interval (min 100ms)")
      ->capture_default_str();
  agent
      ->add_option("--xid-hold", agent_flags->xid_hold,
                   "How long stoker_gpu_last_xid keeps showing an XID before clearing to 0")
      ->capture_default_str();
  agent->add_option("--hostname", agent_flags->hostname, "hostname label (default: this host)");
  agent->add_flag("--dcgm-compat", agent_flags->dcgm_compat,
                  "Also emit dcgm-exporter's DCGM_FI_* metrics (names, labels, units)");
  agent->add_option(
      "--server", agent_flags->server,
      "Stoker server URL: also register this node and run its jobs (env STOKER_SERVER)");
  agent->add_option("--token", agent_flags->token,
                    "Agent token for --server, named like this node (env STOKER_TOKEN)");
  agent->add_option("--token-file", agent_flags->token_file,
                    "Read the agent token from this file (instead of --token)");
  agent->add_option("--ca-file", agent_flags->ca_file, "CA certificate for an HTTPS server");
  agent->add_option("--kubelet-pod-resources", agent_flags->pod_resources,
                    "Kubernetes: the kubelet's PodResources socket "
                    "(/var/lib/kubelet/pod-resources/kubelet.sock): name pods on their GPUs");
  agent->add_option("--state-dir", agent_flags->state_dir,
                    "Job state directory with --server (default ~/.local/state/stoker/node/jobs)");
  AddJobRunFlags(agent, &agent_flags->jobs);
  AddSourceFlags(agent, agent_flags->source);
  agent->callback([agent_flags, &exit_code] { exit_code = RunAgent(*agent_flags); });

  auto smi_flags = std::make_shared<SmiFlags>();
  CLI::App* smi = app.add_subcommand("smi", "Show this node's GPUs, MIG instances and processes");
  smi->add_flag("--json", smi_flags->json, "Print the JSON snapshot instead of a table");
  CLI::Option* watch =
      smi->add_option("--watch", smi_flags->watch, "Redraw every SECONDS (default 2) until Ctrl-C")
          ->expected(0, 1);
  AddSourceFlags(smi, smi_flags->source);
  smi->callback([smi_flags, watch, &exit_code] {
    smi_flags->watch_given = watch->count() > 0;
    exit_code = RunSmi(*smi_flags);
  });
}

}  // namespace stoker::cli
