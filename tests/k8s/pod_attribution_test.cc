// Pod attribution in the agent against a fake kubelet's PodResources server (gRPC List over a
// unix socket): the agent's real Attributor with the PodAttribution resolver, over processes
// whose /proc facts (cgroup, environment) a scripted ProcessInfo gives.
//
// The node: GPU-A held whole by ml/train; GPU-B shared by ml/a (300 milli) and ml/b (500 milli);
// GPU-C in MIG mode, instance MIG-C1 held by ml/m. Processes: one on GPU-A; on GPU-B one of each
// share (their STOKER_K8S_SHARE_DEVICE says which), one pod process without the variable, and
// one that is in no pod at all; one on MIG-C1.
#include "k8s/pod_attribution.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "fake_kubelet.h"
#include "k8s/resources.h"
#include "telemetry/attribution.h"

namespace stoker::k8s {
namespace {
namespace fs = std::filesystem;

const std::string kPodUid = "3f2a9c1e-5b7d-4e21-9a0c-7d8e1f2a3b4c";

class ScriptedProcesses final : public telemetry::ProcessInfo {
 public:
  void Add(uint32_t pid, std::string cgroup, std::string env) {
    telemetry::ProcessFacts f;
    f.name = "python";
    f.cgroup = std::move(cgroup);
    f.environ_block = std::move(env);
    f.user = "alice";
    facts_[pid] = f;
  }
  Result<telemetry::ProcessFacts> Lookup(uint32_t pid) const override {
    auto it = facts_.find(pid);
    if (it == facts_.end()) return NotFound("pid");
    return it->second;
  }

 private:
  std::map<uint32_t, telemetry::ProcessFacts> facts_;
};

std::string PodCgroup() { return "0::/kubepods/besteffort/pod" + kPodUid + "/0123abcd\n"; }
std::string Env(const std::string& share) {
  std::string e = "PATH=/usr/bin";
  e.push_back('\0');
  if (!share.empty()) {
    e += std::string(kShareDeviceEnv) + "=" + share;
    e.push_back('\0');
  }
  return e;
}

GpuSample Gpu(const std::string& uuid, std::vector<uint32_t> pids) {
  GpuSample s;
  s.id.uuid = uuid;
  for (uint32_t pid : pids) {
    GpuProcess p;
    p.pid = pid;
    p.used_memory_bytes = Field<uint64_t>::Of(uint64_t{1} << 30);
    s.processes.push_back(p);
  }
  return s;
}

std::vector<std::string> Shares(const std::string& gpu, int from, int to) {
  std::vector<std::string> out;
  for (int k = from; k < to; ++k) out.push_back(ShareDeviceId(gpu, k));
  return out;
}

TEST(PodAttribution, NamesPodsOnWholeSharedAndMigGpusAndNeverGuesses) {
  const std::string dir =
      (fs::temp_directory_path() / ("stoker_podattr_" + std::to_string(::getpid()))).string();
  fs::remove_all(dir);
  fs::create_directories(dir);
  FakeKubelet kubelet;
  kubelet.Start(dir + "/kubelet.sock", dir + "/pod-resources.sock");
  kubelet.SetPods({{"ml", "train", "main", "stoker.io/gpu", {"GPU-A"}},
                   {"ml", "a", "c1", "stoker.io/gpu-milli", Shares("GPU-B", 0, 300)},
                   {"ml", "b", "c2", "stoker.io/gpu-milli", Shares("GPU-B", 300, 800)},
                   {"ml", "m", "c3", "stoker.io/mig-1g.10gb", {"MIG-C1"}},
                   {"ml", "other", "x", "example.com/fpga", {"fpga0"}}});
  auto source = NewKubeletPodResources(dir + "/pod-resources.sock");

  ScriptedProcesses procs;
  procs.Add(10, PodCgroup(), Env(""));
  procs.Add(11, PodCgroup(), Env(ShareDeviceId("GPU-B", 0)));
  procs.Add(12, PodCgroup(), Env(ShareDeviceId("GPU-B", 300)));
  procs.Add(13, PodCgroup(), Env(""));                          // a pod, but which share?
  procs.Add(14, "0::/system.slice/backup.service\n", Env(""));  // in no pod
  procs.Add(15, PodCgroup(), Env(""));
  ManualClock clock;
  telemetry::Attributor attributor(&procs, &clock);
  PodAttribution pods(source.get(), &clock);
  attributor.SetClaimResolver(&pods);

  GpuSample a = Gpu("GPU-A", {10});
  GpuSample b = Gpu("GPU-B", {11, 12, 13, 14});
  GpuSample c = Gpu("GPU-C", {15});
  c.mig_enabled = Field<bool>::Of(true);
  MigInstance mi;
  mi.gpu_instance_id = 1;
  mi.uuid = "MIG-C1";
  mi.profile = "1g.10gb";
  c.mig_instances.push_back(mi);
  c.processes[0].gpu_instance_id = 1;
  attributor.Attribute(&a);
  attributor.Attribute(&b);
  attributor.Attribute(&c);

  auto job = [](const GpuSample& s, size_t i) {
    const JobRef& j = s.processes[i].job;
    return std::string(JobKindName(j.kind)) + ":" + j.id + ":" + j.container + ":" + j.user;
  };
  EXPECT_EQ(job(a, 0), "kubernetes:ml/train:main:alice");
  EXPECT_EQ(job(b, 0), "kubernetes:ml/a:c1:alice");
  EXPECT_EQ(job(b, 1), "kubernetes:ml/b:c2:alice");
  // Two shares and no variable: known as its pod's UID only, never given to a wrong pod.
  EXPECT_EQ(job(b, 2), "kubernetes:" + kPodUid + ":0123abcd:alice");
  EXPECT_EQ(b.processes[3].job.kind, JobRef::Kind::kNone);  // ghost: no pod owns it
  EXPECT_EQ(job(c, 0), "kubernetes:ml/m:c3:alice");

  ASSERT_EQ(a.claims.size(), 1u);
  EXPECT_TRUE(a.claims[0].whole);
  EXPECT_EQ(a.claims[0].job.id, "ml/train");
  ASSERT_EQ(b.claims.size(), 2u);
  std::map<std::string, int32_t> milli;
  for (const GpuClaim& cl : b.claims) milli[cl.job.id + "/" + cl.job.container] = cl.gpu_milli;
  EXPECT_EQ(milli, (std::map<std::string, int32_t>{{"ml/a/c1", 300}, {"ml/b/c2", 500}}));
  ASSERT_EQ(c.claims.size(), 1u);
  EXPECT_EQ(c.claims[0].mig_uuid, "MIG-C1");

  // With a single share holder left, its pod's processes are that holder's.
  kubelet.SetPods({{"ml", "a", "c1", "stoker.io/gpu-milli", Shares("GPU-B", 0, 300)}});
  clock.Advance(std::chrono::seconds(3));  // past the refresh
  GpuSample b2 = Gpu("GPU-B", {13});
  attributor.Attribute(&b2);
  EXPECT_EQ(job(b2, 0), "kubernetes:ml/a:c1:alice");

  // The kubelet gone: the last holdings stay, and nothing crashes.
  kubelet.Stop();
  clock.Advance(std::chrono::seconds(3));
  GpuSample b3 = Gpu("GPU-B", {11});
  attributor.Attribute(&b3);
  EXPECT_EQ(job(b3, 0), "kubernetes:ml/a:c1:alice");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace stoker::k8s
