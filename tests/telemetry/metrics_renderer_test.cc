#include "telemetry/metrics_renderer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "support/fake_gpu_source.h"
#include "telemetry/sampler.h"

namespace stoker::telemetry {
namespace {

using stoker::testing::FakeGpuSource;
using stoker::testing::MakeH100Sample;

bool Contains(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// A snapshot of two GPUs as the sampler would hold it.
TelemetrySnapshot TwoGpus() {
  TelemetrySnapshot snap;
  snap.nvml_available = true;
  snap.source_description = "test";
  snap.gpus.resize(2);
  for (uint32_t i = 0; i < 2; ++i) {
    snap.gpus[i].have_sample = true;
    snap.gpus[i].samples_total = 10;
    snap.gpus[i].sample = MakeH100Sample(i, 2);
  }
  return snap;
}

std::string Render(const TelemetrySnapshot& snap, bool dcgm = false,
                   std::string hostname = "node-1") {
  MetricsRenderer r(
      RendererOptions{.hostname = std::move(hostname), .version = "0.1.0", .dcgm_compat = dcgm});
  std::string out;
  r.Render(snap, &out);
  return out;
}

TEST(MetricsRendererTest, BaseUnitsAndLabels) {
  const std::string out = Render(TwoGpus());
  const std::string base =
      "gpu=\"0\",uuid=\"GPU-00000000-0000-0000-0000-000000000000\",pci_bus_id=\"00000000:24:00.0\","
      "model=\"NVIDIA H100 80GB HBM3\",hostname=\"node-1\"";
  EXPECT_TRUE(Contains(out, "stoker_gpu_power_watts{" + base + "} 250\n")) << out;
  EXPECT_TRUE(Contains(out, "stoker_gpu_utilization_ratio{" + base + "} 0.45\n"));
  EXPECT_TRUE(Contains(out, "stoker_gpu_memory_total_bytes{" + base + "} 85899345920\n"));
  EXPECT_TRUE(Contains(out, "stoker_gpu_energy_joules_total{" + base + "} 123456.789\n"));
  EXPECT_TRUE(Contains(out, "# TYPE stoker_gpu_energy_joules_total counter\n"));
  EXPECT_TRUE(Contains(out, "stoker_gpu_sm_clock_hertz{" + base + "} 1755000000\n"));
  EXPECT_TRUE(Contains(out, "stoker_gpu_temperature_celsius{" + base + "} 61\n"));
  EXPECT_TRUE(
      Contains(out, "stoker_gpu_clock_event_active{" + base + ",reason=\"sw_power_cap\"} 1\n"));
  EXPECT_TRUE(Contains(out, "stoker_gpu_clock_event_active{" + base + ",reason=\"gpu_idle\"} 0\n"));
  EXPECT_TRUE(Contains(out, "stoker_gpu_health{" + base + ",state=\"ok\"} 1\n"));
  EXPECT_TRUE(Contains(out, "stoker_gpu_health{" + base + ",state=\"lost\"} 0\n"));
  EXPECT_TRUE(Contains(out, "stoker_gpu_up{" + base + "} 1\n"));
  EXPECT_TRUE(
      Contains(out, "stoker_agent_info{version=\"0.1.0\",hostname=\"node-1\",simulated=\"false\""));
}

TEST(MetricsRendererTest, EveryFamilyHasHelpAndTypeAndCountersEndInTotal) {
  TelemetrySnapshot snap = TwoGpus();
  snap.gpus[0].xid_counts[79] = 1;
  const std::string out = Render(snap);
  std::map<std::string, std::string> types;
  std::set<std::string> helps;
  for (const std::string& line : Lines(out)) {
    if (line.starts_with("# HELP ")) {
      helps.insert(line.substr(7, line.find(' ', 7) - 7));
    } else if (line.starts_with("# TYPE ")) {
      std::istringstream in(line.substr(7));
      std::string name, type;
      in >> name >> type;
      EXPECT_TRUE(types.emplace(name, type).second) << "family declared twice: " << name;
    } else {
      const std::string name = line.substr(0, line.find_first_of("{ "));
      ASSERT_TRUE(types.count(name)) << "sample before TYPE: " << line;
    }
  }
  ASSERT_GT(types.size(), 40u);
  for (const auto& [name, type] : types) {
    EXPECT_TRUE(helps.count(name)) << name;
    EXPECT_TRUE(name.starts_with("stoker_")) << name;
    EXPECT_EQ(type == "counter", name.ends_with("_total")) << name << " is a " << type;
  }
}

TEST(MetricsRendererTest, OmitsUnsupportedAndFailedFieldsAndCountsErrors) {
  TelemetrySnapshot snap = TwoGpus();
  snap.gpus[0].sample.temperature_c = Field<uint32_t>::Unsupported();
  snap.gpus[0].sample.power_mw = Field<uint32_t>::Error(15);
  snap.gpus[1].sample.gpm = GpmMetrics{};  // unset: e.g. the first GPM sample
  const auto fields = protocol::GpuScalarFields();
  for (size_t f = 0; f < fields.size(); ++f) {
    if (fields[f].key == "power_mw") snap.gpus[0].field_errors_total[f] = 4;
  }
  const std::string out = Render(snap);
  EXPECT_FALSE(Contains(out, "stoker_gpu_temperature_celsius{gpu=\"0\""));
  EXPECT_TRUE(Contains(out, "stoker_gpu_temperature_celsius{gpu=\"1\""));
  EXPECT_FALSE(Contains(out, "stoker_gpu_power_watts{gpu=\"0\""));
  EXPECT_FALSE(Contains(out, "stoker_gpu_sm_active_ratio{gpu=\"1\""));
  EXPECT_TRUE(Contains(out, "stoker_gpu_sm_active_ratio{gpu=\"0\""));
  EXPECT_TRUE(Contains(out, ",field=\"power_mw\"} 4\n"));
}

TEST(MetricsRendererTest, StaleOrFailedGpuExportsOnlyHealth) {
  TelemetrySnapshot snap = TwoGpus();
  snap.gpus[1].last_error = "UNAVAILABLE: timeout";
  const std::string out = Render(snap);
  EXPECT_FALSE(Contains(out, "stoker_gpu_power_watts{gpu=\"1\""));
  EXPECT_TRUE(Contains(out, "stoker_gpu_up{gpu=\"1\""));
  EXPECT_TRUE(Contains(out, ",state=\"unreachable\"} 1\n"));
}

TEST(MetricsRendererTest, EscapesLabelValues) {
  TelemetrySnapshot snap = TwoGpus();
  snap.gpus[0].sample.id.name = "Weird \"GPU\" \\ model\nline2";
  const std::string out = Render(snap, false, "host\"x");
  EXPECT_TRUE(Contains(out, "model=\"Weird \\\"GPU\\\" \\\\ model\\nline2\""));
  EXPECT_TRUE(Contains(out, "hostname=\"host\\\"x\""));
  EXPECT_EQ(prom::EscapeLabelValue("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
}

TEST(MetricsRendererTest, ProcessAndJobSeriesFollowTheProcessList) {
  TelemetrySnapshot snap = TwoGpus();
  auto& procs = snap.gpus[0].sample.processes;
  procs[0].job = JobRef{JobRef::Kind::kSlurm, "1234", "alice", ""};
  procs[1].job = JobRef{JobRef::Kind::kSlurm, "1234", "alice", "", "0"};
  std::string out = Render(snap);
  EXPECT_TRUE(Contains(out, "pid=\"1000\",jobid=\"1234\",user=\"alice\"} 1073741824\n")) << out;
  EXPECT_TRUE(Contains(out, "pid=\"1001\",jobid=\"1234\",user=\"alice\",step=\"0\"}")) << out;
  EXPECT_TRUE(Contains(out, "stoker_gpu_job_memory_used_bytes{gpu=\"0\""));
  EXPECT_TRUE(Contains(out, ",jobid=\"1234\",user=\"alice\"} 2147483648\n"));
  EXPECT_TRUE(Contains(out, ",jobid=\"1234\",user=\"alice\",kind=\"slurm\",container=\"\"} 1\n"));
  // The job's processes exit: their series disappear with them.
  procs.clear();
  out = Render(snap);
  EXPECT_FALSE(Contains(out, "pid=\"1000\""));
  EXPECT_FALSE(Contains(out, "jobid=\"1234\""));
}

// Kubernetes: a pod's processes and its claims name the namespace, pod and container (the
// kubelet's PodResources, k8s/pod_attribution.h); a pod known only by its UID gets no pod label.
TEST(MetricsRendererTest, KubernetesPodsAndClaimsNameNamespacePodAndContainer) {
  TelemetrySnapshot snap = TwoGpus();
  auto& s = snap.gpus[0].sample;
  s.processes[0].job = JobRef{JobRef::Kind::kKubernetes, "ml/train-0", "alice", "train"};
  s.processes[1].job = JobRef{JobRef::Kind::kKubernetes, "3f2a9c1e-5b7d", "bob", "abc123"};
  GpuClaim a;
  a.job = JobRef{JobRef::Kind::kKubernetes, "ml/train-0", "", "train"};
  a.gpu_milli = 300;
  GpuClaim b;
  b.job = JobRef{JobRef::Kind::kKubernetes, "vision/infer", "", "server"};
  b.gpu_milli = 500;
  s.claims = {a, b};
  const std::string out = Render(snap);
  EXPECT_TRUE(Contains(out,
                       ",jobid=\"ml/train-0\",user=\"alice\",kind=\"kubernetes\","
                       "container=\"train\",namespace=\"ml\",pod=\"train-0\"} 1\n"))
      << out;
  EXPECT_TRUE(Contains(out,
                       ",jobid=\"3f2a9c1e-5b7d\",user=\"bob\",kind=\"kubernetes\","
                       "container=\"abc123\"} 1\n"))
      << out;
  EXPECT_TRUE(Contains(out, "stoker_gpu_claim_milli{gpu=\"0\""));
  EXPECT_TRUE(Contains(out,
                       ",jobid=\"vision/infer\",kind=\"kubernetes\",container=\"server\","
                       "namespace=\"vision\",pod=\"infer\",mig_uuid=\"\"} 500\n"))
      << out;
}

TEST(MetricsRendererTest, PerProcessUtilizationOnlyWhereReported) {
  TelemetrySnapshot snap = TwoGpus();
  auto& procs = snap.gpus[0].sample.processes;
  procs[0].sm_util_pct = Field<uint32_t>::Of(37);
  procs[0].mem_util_pct = Field<uint32_t>::Of(5);
  procs[1].sm_util_pct = Field<uint32_t>::Unsupported();
  const std::string out = Render(snap);
  EXPECT_TRUE(Contains(out, "# TYPE stoker_gpu_process_sm_utilization_ratio gauge\n")) << out;
  EXPECT_TRUE(Contains(out, ",pid=\"1000\",jobid=\"\",user=\"\"} 0.37\n")) << out;
  EXPECT_TRUE(Contains(out, ",pid=\"1000\",jobid=\"\",user=\"\"} 0.05\n")) << out;
  // The process whose utilization NVML does not report gets no utilization series.
  const size_t pos = out.find("stoker_gpu_process_sm_utilization_ratio{");
  ASSERT_NE(pos, std::string::npos);
  EXPECT_FALSE(Contains(out.substr(pos, out.find("# HELP", pos) - pos), "pid=\"1001\""));
}

TEST(MetricsRendererTest, MigInstancesCarryMigLabels) {
  TelemetrySnapshot snap = TwoGpus();
  MigInstance m;
  m.gpu_instance_id = 3;
  m.compute_instance_id = 0;
  m.profile = "1g.10gb";
  m.uuid = "MIG-abc";
  m.slices = 1;
  m.memory_used_bytes = Field<uint64_t>::Of(1048576 * 5);
  m.gpm.sm_active = Field<double>::Of(0.75);
  snap.gpus[0].sample.mig_instances.push_back(m);
  const std::string out = Render(snap, /*dcgm=*/true);
  EXPECT_TRUE(Contains(out,
                       "mig_profile=\"1g.10gb\",gpu_instance=\"3\",compute_instance=\"0\","
                       "mig_uuid=\"MIG-abc\"} 0.75\n"));
  EXPECT_TRUE(Contains(out, "DCGM_FI_PROF_SM_ACTIVE{gpu=\"0\""));
  EXPECT_TRUE(Contains(out, "GPU_I_PROFILE=\"1g.10gb\",GPU_I_ID=\"3\"} 0.75\n"));
  EXPECT_TRUE(Contains(out, "GPU_I_PROFILE=\"1g.10gb\",GPU_I_ID=\"3\"} 5\n"));  // FB_USED MiB
}

TEST(MetricsRendererTest, DcgmCompatUsesDcgmNamesAndUnits) {
  TelemetrySnapshot snap = TwoGpus();
  snap.gpus[0].last_xid = 79;
  const std::string plain = Render(snap);
  EXPECT_FALSE(Contains(plain, "DCGM_FI_"));
  const std::string out = Render(snap, true);
  const std::string labels =
      "gpu=\"0\",UUID=\"GPU-00000000-0000-0000-0000-000000000000\",pci_bus_id=\"00000000:24:00.0\","
      "device=\"nvidia0\",modelName=\"NVIDIA H100 80GB "
      "HBM3\",Hostname=\"node-1\",hostname=\"node-1\"";
  EXPECT_TRUE(Contains(out, "DCGM_FI_DEV_FB_USED{" + labels + "} 40960\n")) << out;
  EXPECT_TRUE(Contains(out, "DCGM_FI_DEV_GPU_UTIL{" + labels + "} 45\n"));
  EXPECT_TRUE(Contains(out, "DCGM_FI_DEV_POWER_USAGE{" + labels + "} 250\n"));
  EXPECT_TRUE(Contains(out, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{" + labels + "} 123456789\n"));
  EXPECT_TRUE(Contains(out, "DCGM_FI_DEV_SM_CLOCK{" + labels + "} 1755\n"));
  EXPECT_TRUE(Contains(out, "DCGM_FI_DEV_XID_ERRORS{" + labels + "} 79\n"));
  EXPECT_TRUE(Contains(out, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{" + labels + "} 0.125\n"));
}

TEST(MetricsRendererTest, HostMetricsWithoutNvml) {
  TelemetrySnapshot snap;
  snap.source_description = "NVML unavailable";
  snap.host = ReadHostStats();
  const std::string out = Render(snap);
  EXPECT_TRUE(Contains(out, "stoker_agent_nvml_available 0\n"));
  EXPECT_TRUE(Contains(out, "stoker_host_load1{hostname=\"node-1\"} "));
  EXPECT_TRUE(Contains(out, "stoker_host_memory_total_bytes{hostname=\"node-1\"} "));
  EXPECT_FALSE(Contains(out, "stoker_gpu_up{"));
}

TEST(MetricsRendererTest, RendersSamplerOutputIdenticallyOnReuse) {
  ManualClock clock;
  FakeGpuSource source({MakeH100Sample(0, 3)});
  Sampler sampler(&source, &clock, nullptr, SamplerOptions{});
  sampler.SampleOnce(0);
  TelemetrySnapshot snap;
  sampler.Snapshot(&snap);
  MetricsRenderer r(RendererOptions{.hostname = "h"});
  std::string a, b;
  r.Render(snap, &a);
  r.Render(snap, &b);
  EXPECT_EQ(a, b);
  EXPECT_TRUE(Contains(a, "stoker_agent_samples_total{gpu=\"0\""));
}

// promtool is the reference parser and linter; CI installs it (Debian package `prometheus`).
void CheckWithPromtool(const std::string& text, bool expect_clean_lint) {
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "promtool not installed";
  }
  const auto dir = std::filesystem::path(::testing::TempDir());
  const auto in = dir / ("stoker_metrics_" + std::to_string(::getpid()) + ".prom");
  const auto log = dir / ("stoker_promtool_" + std::to_string(::getpid()) + ".log");
  std::ofstream(in) << text;
  const std::string cmd =
      "promtool check metrics < " + in.string() + " > " + log.string() + " 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream lf(log);
  const std::string report((std::istreambuf_iterator<char>(lf)), std::istreambuf_iterator<char>());
  std::filesystem::remove(in);
  std::filesystem::remove(log);
  if (expect_clean_lint) {
    EXPECT_EQ(rc, 0) << report;
    EXPECT_EQ(report, "") << report;
  } else {
    // dcgm-exporter's own names break the lint rules (counter without _total, units in help);
    // they must still parse.
    EXPECT_EQ(report.find("error while linting"), std::string::npos) << report;
    EXPECT_EQ(report.find("text format parsing error"), std::string::npos) << report;
  }
}

TelemetrySnapshot RichSnapshot() {
  TelemetrySnapshot snap = TwoGpus();
  snap.host = ReadHostStats();
  snap.gpus[0].xid_counts[13] = 2;
  snap.gpus[0].last_xid = 13;
  snap.gpus[0].sample.processes[0].job =
      JobRef{JobRef::Kind::kKubernetes, "0f2d3c4e-1234-4a5b-8c9d-0123456789ab", "1000", "abc"};
  MigInstance m;
  m.profile = "3g.40gb";
  m.gpu_instance_id = 1;
  m.memory_total_bytes = Field<uint64_t>::Of(40ULL << 30);
  m.gpm.tensor_active = Field<double>::Of(0.5);
  snap.gpus[1].sample.mig_instances.push_back(m);
  snap.gpus[1].sample.id.name = "A \"quoted\" \\ name";
  return snap;
}

TEST(PromtoolTest, StokerExpositionPassesPromtoolLint) {
  CheckWithPromtool(Render(RichSnapshot()), /*expect_clean_lint=*/true);
}

TEST(PromtoolTest, DcgmCompatExpositionParses) {
  CheckWithPromtool(Render(RichSnapshot(), true), /*expect_clean_lint=*/false);
}

}  // namespace
}  // namespace stoker::telemetry

namespace stoker::telemetry {
namespace {

// docs/metrics.md is the users' reference: every family the agent can emit must be in it.
TEST(MetricsRendererTest, EveryFamilyIsDocumented) {
  TelemetrySnapshot snap = TwoGpus();
  auto& g = snap.gpus[0];
  g.xid_counts[79] = 1;
  g.last_xid = 79;
  g.field_errors_total[0] = 3;
  g.sample.processes[0].job = JobRef{JobRef::Kind::kStoker, "7", "alice", ""};
  g.sample.processes[0].sm_util_pct = Field<uint32_t>::Of(50);
  GpuClaim claim;
  claim.job = JobRef{JobRef::Kind::kKubernetes, "ml/p", "", "c"};
  claim.gpu_milli = 250;
  g.sample.claims.push_back(claim);
  g.sample.processes[0].mem_util_pct = Field<uint32_t>::Of(10);
  MigInstance m;
  m.profile = "1g.10gb";
  m.uuid = "MIG-1";
  m.slices = 1;
  snap.gpus[1].sample.mig_instances.push_back(m);
  const std::string out = Render(snap);
  std::ifstream doc_file(std::string(STOKER_SOURCE_DIR) + "/docs/metrics.md");
  ASSERT_TRUE(doc_file) << "docs/metrics.md missing";
  std::stringstream doc;
  doc << doc_file.rdbuf();
  std::istringstream lines(out);
  int families = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("# TYPE ", 0) != 0) continue;
    const std::string name = line.substr(7, line.find(' ', 7) - 7);
    ++families;
    EXPECT_NE(doc.str().find("`" + name + "`"), std::string::npos)
        << name << " is not in docs/metrics.md";
  }
  EXPECT_GE(families, 50);  // the snapshot above exercises nearly all of them
}

}  // namespace
}  // namespace stoker::telemetry
