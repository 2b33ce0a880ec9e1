// The extender's wire format and decisions: golden requests shaped exactly as kube-scheduler's
// HTTPExtender marshals them (with node names, and with full Node objects), the protocol's edge
// cases, quantities, pod requests, and the fit rules (ghost memory, lost GPUs, shares, MIG,
// init containers, stale and drained nodes).
#include "k8s/extender.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "k8s/cluster_view.h"
#include "k8s/extender_types.h"
#include "k8s/quantity.h"
#include "k8s/resources.h"
#include "k8s_samples.h"

namespace stoker::k8s {
namespace {
using nlohmann::json;
using testing::AddProcess;
using testing::AddShareClaim;
using testing::AddWholeClaim;
using testing::IdleGpu;
using testing::IdleNode;
using testing::kGiB;

std::string Golden(const std::string& name) {
  std::ifstream in(std::string(STOKER_SOURCE_DIR) + "/tests/k8s/golden/" + name);
  EXPECT_TRUE(in.good()) << name;
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

const WallTime kNow = WallTime(std::chrono::seconds(1'747'040'000));

// The cluster of the golden files: gpu-a idle; gpu-b's GPUs hold 70 GiB each for processes no
// pod owns; gpu-c has a lost GPU and one with 600 milli-GPU shared out; gpu-z is unknown.
ClusterView GoldenView() {
  ClusterView v;
  v.Update("gpu-a", GpusFromSamples(IdleNode("gpu-a", 8, kNow), nullptr), kNow);
  std::vector<GpuSample> b = IdleNode("gpu-b", 2, kNow);
  for (GpuSample& s : b) AddProcess(s, 4242, 70 * kGiB);
  v.Update("gpu-b", GpusFromSamples(b, nullptr), kNow);
  std::vector<GpuSample> c = IdleNode("gpu-c", 2, kNow);
  c[0].health = GpuHealth::kLost;
  AddShareClaim(c[1], "ml/infer-1", 600);
  v.Update("gpu-c", GpusFromSamples(c, nullptr), kNow);
  return v;
}

TEST(Quantity, ParsesTheApiServersForms) {
  EXPECT_EQ(*QuantityValue("500"), 500);
  EXPECT_EQ(*QuantityValue("8k"), 8000);
  EXPECT_EQ(*QuantityValue("20Gi"), int64_t{20} << 30);
  EXPECT_EQ(*QuantityValue("1.5Gi"), int64_t{3} << 29);
  EXPECT_EQ(*QuantityValue("1e3"), 1000);
  EXPECT_EQ(*QuantityValue("2E+2"), 200);
  EXPECT_EQ(*QuantityValue("250m"), 1);  // rounded up, as Quantity.Value() rounds
  EXPECT_EQ(*QuantityMilliValue("250m"), 250);
  EXPECT_EQ(*QuantityMilliValue("2"), 2000);
  EXPECT_EQ(*QuantityMilliValue("0.5"), 500);
  EXPECT_EQ(*QuantityValue("+7"), 7);
  EXPECT_EQ(*QuantityValue("0"), 0);
  EXPECT_EQ(*QuantityValue("7Ei"), int64_t{7} << 60);
  EXPECT_FALSE(QuantityValue("8Ei").ok());  // 2^63: past int64
  for (const char* bad : {"", "-1", "1.2.3", "12 Gi", "1Qi", "Gi", "1e", "1e99", ".", "9Ei9"}) {
    EXPECT_FALSE(QuantityValue(bad).ok()) << bad;
  }
  EXPECT_FALSE(QuantityValue("9999999999999999999").ok());  // past int64
  auto st = QuantityValue("12x");
  EXPECT_NE(st.status().message().find("unknown suffix 'x'"), std::string::npos)
      << st.status().ToString();
}

TEST(PodRequest, ReadsEachKindAndRefusesWhatKubernetesWouldNotMean) {
  ContainerResources share{"a", {{"stoker.io/gpu-milli", "250"}}, {{"stoker.io/gpu-milli", "250"}}};
  ContainerResources whole{"b", {}, {{"stoker.io/gpu", "2"}}};
  ContainerResources mig{"c", {}, {{"stoker.io/mig-1g.10gb", "3"}}};
  ContainerResources cpu{"d", {{"cpu", "2"}}, {}};
  auto r = ReadPodGpuRequest("ml", "p", "u", {share, whole, mig, cpu}, {}, {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->containers.size(), 3u);
  EXPECT_EQ(r->containers[0].gpu_milli, 250);
  EXPECT_EQ(r->containers[1].whole_gpus, 2);
  EXPECT_EQ(r->containers[2].mig_profile, "1g.10gb");
  EXPECT_EQ(r->containers[2].mig_count, 3);

  auto fraction =
      ReadPodGpuRequest("ml", "p", "", {{"x", {}, {{"stoker.io/gpu", "500m"}}}}, {}, {});
  EXPECT_NE(fraction.status().message().find("spec.containers[0].resources.stoker.io/gpu"),
            std::string::npos)
      << fraction.status().ToString();
  auto both = ReadPodGpuRequest(
      "ml", "p", "", {{"x", {}, {{"stoker.io/gpu", "1"}, {"stoker.io/gpu-milli", "100"}}}}, {}, {});
  EXPECT_NE(both.status().message().find("more than one kind"), std::string::npos);
  auto big =
      ReadPodGpuRequest("ml", "p", "", {{"x", {}, {{"stoker.io/gpu-milli", "1500"}}}}, {}, {});
  EXPECT_NE(big.status().message().find("more than one GPU"), std::string::npos);
  auto differ = ReadPodGpuRequest(
      "ml", "p", "", {{"x", {{"stoker.io/gpu", "1"}}, {{"stoker.io/gpu", "2"}}}}, {}, {});
  EXPECT_NE(differ.status().message().find("requests and limits differ"), std::string::npos);
  auto mem = ReadPodGpuRequest("ml", "p", "", {share}, {}, {{"stoker.io/gpu-memory", "lots"}});
  EXPECT_NE(mem.status().message().find("metadata.annotations.stoker.io/gpu-memory"),
            std::string::npos);
  auto ok_mem = ReadPodGpuRequest("ml", "p", "", {share}, {}, {{"stoker.io/gpu-memory", "12Gi"}});
  EXPECT_EQ(ok_mem->gpu_memory_bytes, 12 * kGiB);
}

TEST(DeviceIds, RoundTrip) {
  auto share = ParseDeviceId(ShareDeviceId("GPU-abc", 917));
  ASSERT_TRUE(share);
  EXPECT_EQ(share->kind, DeviceId::Kind::kShare);
  EXPECT_EQ(share->uuid, "GPU-abc");
  EXPECT_EQ(share->share_index, 917);
  EXPECT_EQ(ParseDeviceId("GPU-abc")->kind, DeviceId::Kind::kWholeGpu);
  EXPECT_EQ(ParseDeviceId("MIG-1234")->kind, DeviceId::Kind::kMig);
  EXPECT_FALSE(ParseDeviceId("GPU-abc::1000"));
  EXPECT_FALSE(ParseDeviceId("GPU-abc::x"));
  EXPECT_FALSE(ParseDeviceId("nvidia0"));
}

// The request kube-scheduler sends with nodeCacheCapable: true, and the answer, byte for byte.
TEST(ExtenderGolden, FilterWithNodeNames) {
  const std::string body = Golden("filter_args_nodenames.json");
  auto args = ParseExtenderArgs(body);
  ASSERT_TRUE(args.ok()) << args.status().ToString();
  EXPECT_TRUE(args->node_names_mode);
  EXPECT_EQ(args->pod.FullName(), "ml/train-0");
  EXPECT_EQ(args->pod.uid, "6f0b2c1e-8d4a-4c57-9a52-3f1d2e7b9c10");
  ASSERT_EQ(args->pod.containers.size(), 1u);
  EXPECT_EQ(args->pod.containers[0].gpu_milli, 500);
  EXPECT_EQ(args->pod.gpu_memory_bytes, 20 * kGiB);
  const ClusterView view = GoldenView();
  const FilterOutcome out = FilterNodes(view, args->pod, args->node_names, {}, kNow);
  EXPECT_EQ(FilterResultJson(&*args, out), Golden("filter_result_nodenames.json"));
}

// The same with nodeCacheCapable: false: full Node objects in, the passing ones back as sent.
TEST(ExtenderGolden, FilterWithFullNodeObjects) {
  const std::string body = Golden("filter_args_nodes.json");
  auto args = ParseExtenderArgs(body);
  ASSERT_TRUE(args.ok()) << args.status().ToString();
  EXPECT_FALSE(args->node_names_mode);
  ASSERT_EQ(args->node_names, (std::vector<std::string>{"gpu-a", "gpu-b", "gpu-c", "gpu-z"}));
  const ClusterView view = GoldenView();
  const FilterOutcome out = FilterNodes(view, args->pod, args->node_names, {}, kNow);
  const std::string answer = FilterResultJson(&*args, out);
  const json got = json::parse(answer);
  const json want = json::parse(Golden("filter_result_nodes.json"));
  EXPECT_EQ(got, want) << answer;
  // The node handed back is the object kube-scheduler sent, untouched.
  EXPECT_EQ(got["Nodes"]["items"][0], json::parse(body)["Nodes"]["items"][0]);
  EXPECT_TRUE(got["NodeNames"].is_null());
  // What kube-scheduler reads back: Nodes (nodeCacheCapable false).
  std::vector<std::string> names;
  auto parsed = ParseFilterResult(answer, &names);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(names, std::vector<std::string>{"gpu-a"});
  EXPECT_EQ(parsed->unresolvable.count("gpu-z"), 1u);
}

TEST(ExtenderProtocol, EmptyNodeListsAnswerEmptyLists) {
  const std::string pod = json::parse(Golden("filter_args_nodenames.json"))["Pod"].dump();
  for (const std::string& body :
       {R"({"Pod":)" + pod + R"(,"Nodes":null,"NodeNames":[]})",
        R"({"Pod":)" + pod + R"(,"Nodes":{"metadata":{},"items":[]},"NodeNames":null})",
        R"({"Pod":)" + pod + R"(,"Nodes":null,"NodeNames":null})"}) {
    auto args = ParseExtenderArgs(body);
    ASSERT_TRUE(args.ok()) << args.status().ToString();
    EXPECT_TRUE(args->node_names.empty());
    const FilterOutcome out = FilterNodes(GoldenView(), args->pod, args->node_names, {}, kNow);
    const json got = json::parse(FilterResultJson(&*args, out));
    if (args->node_names_mode) {
      EXPECT_EQ(got["NodeNames"], json::array()) << body;
    } else {
      EXPECT_EQ(got["Nodes"]["items"], json::array()) << body;
    }
    EXPECT_EQ(got["FailedNodes"], json::object());
    EXPECT_EQ(got["Error"], "");
  }
}

TEST(ExtenderProtocol, AllNodesFailingIsAnEmptyListWithEveryReason) {
  auto args = ParseExtenderArgs(Golden("filter_args_nodenames.json"));
  ASSERT_TRUE(args.ok());
  args->node_names = {"gpu-b", "gpu-c", "gpu-z"};
  const FilterOutcome out = FilterNodes(GoldenView(), args->pod, args->node_names, {}, kNow);
  const json got = json::parse(FilterResultJson(&*args, out));
  // An empty list, not null: null would read as "no node passes" too, but [] says it plainly.
  EXPECT_EQ(got["NodeNames"], json::array());
  EXPECT_EQ(got["FailedNodes"].size() + got["FailedAndUnresolvableNodes"].size(), 3u);
  EXPECT_EQ(got["Error"], "");
}

TEST(ExtenderProtocol, MalformedBodiesNameTheField) {
  struct Case {
    std::string body, want;
  };
  for (
      const Case& c : std::vector<Case>{
          {"", "body: not valid JSON"},
          {"{", "body: not valid JSON"},
          {"[]", "must be a JSON object"},
          {R"({"NodeNames":["a"]})", "Pod: required"},
          {R"({"Pod":{"spec":{}},"NodeNames":["a"]})", "Pod.metadata: required"},
          {R"({"Pod":{"metadata":{"name":"p"}},"NodeNames":"a"})", "NodeNames: must be an array"},
          {R"({"Pod":{"metadata":{"name":"p"}},"NodeNames":[7]})", "NodeNames[0]"},
          {R"({"Pod":{"metadata":{"name":"p"}},"Nodes":{"items":[{"spec":{}}]}})",
           "Nodes.items[0].metadata: required"},
          {R"({"Pod":{"metadata":{"name":"p"},"spec":{"containers":[{"name":"c","resources":{"limits":{"stoker.io/gpu":"1.5"}}}]}},"NodeNames":[]})",
           "Pod: spec.containers[0].resources.stoker.io/gpu"},
          {R"({"Pod":{"metadata":{"name":"p"},"spec":{"containers":[{"name":"c","resources":{"limits":{"stoker.io/gpu":true}}}]}},"NodeNames":[]})",
           "Pod.spec.containers[0].resources.limits.stoker.io/gpu: a quantity must be"},
      }) {
    auto args = ParseExtenderArgs(c.body);
    ASSERT_FALSE(args.ok()) << c.body;
    EXPECT_NE(args.status().message().find(c.want), std::string::npos)
        << c.body << " -> " << args.status().message();
  }
  // The answer to a request that cannot be read: everything null, the reason in Error.
  FilterOutcome err;
  err.error = "body: not valid JSON";
  EXPECT_EQ(FilterResultJson(nullptr, err),
            R"({"Nodes":null,"NodeNames":null,"FailedNodes":null,)"
            R"("FailedAndUnresolvableNodes":null,"Error":"body: not valid JSON"})");
}

TEST(ExtenderProtocol, FieldNamesAreMatchedAsGoMatchesThem) {
  // Go's decoder ignores case; a client that writes "pod" and "nodeNames" is understood.
  auto args = ParseExtenderArgs(R"({"pod":{"metadata":{"name":"p"}},"nodeNames":["a"]})");
  ASSERT_TRUE(args.ok()) << args.status().ToString();
  EXPECT_EQ(args->node_names, std::vector<std::string>{"a"});
  EXPECT_FALSE(args->pod.any());
}

TEST(ExtenderProtocol, APodWithoutStokerResourcesPassesEveryNode) {
  auto args = ParseExtenderArgs(
      R"({"Pod":{"metadata":{"name":"web","namespace":"default"},"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"1"}}}]}},"NodeNames":["gpu-b","gpu-z"]})");
  ASSERT_TRUE(args.ok());
  const FilterOutcome out = FilterNodes(GoldenView(), args->pod, args->node_names, {}, kNow);
  EXPECT_EQ(out.passed.size(), 2u);
  Scorer scorer({});
  EXPECT_EQ(scorer.Score(GoldenView(), args->pod, args->node_names, kNow),
            (std::vector<int64_t>{0, 0}));
}

TEST(ExtenderProtocol, HostPriorityListIsShapedAsKubeSchedulerReadsIt) {
  EXPECT_EQ(HostPriorityListJson({{"n1", 7}, {"n\"2", 0}}),
            R"([{"Host":"n1","Score":7},{"Host":"n\"2","Score":0}])");
  EXPECT_EQ(HostPriorityListJson({}), "[]");
  auto back = ParseHostPriorityList(R"([{"Host":"n1","Score":7}])");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ((*back)[0].host, "n1");
  EXPECT_EQ((*back)[0].score, 7);
  EXPECT_EQ(WireScore(100), kMaxExtenderPriority);
  EXPECT_EQ(WireScore(0), 0);
  EXPECT_EQ(WireScore(44), 4);
  EXPECT_EQ(WireScore(45), 5);
}

PodGpuRequest SharePod(int32_t milli, uint64_t memory = 0) {
  PodGpuRequest p;
  p.namespace_name = "ml";
  p.name = "p";
  ContainerGpuRequest c;
  c.container = "main";
  c.gpu_milli = milli;
  p.containers.push_back(c);
  p.gpu_memory_bytes = memory;
  return p;
}

PodGpuRequest WholePod(int32_t n) {
  PodGpuRequest p;
  p.namespace_name = "ml";
  p.name = "w";
  ContainerGpuRequest c;
  c.container = "main";
  c.whole_gpus = n;
  p.containers.push_back(c);
  return p;
}

TEST(Fit, GhostMemoryKeepsSharesAndWholeGpusAway) {
  std::vector<GpuSample> s = IdleNode("n", 2, kNow);
  AddProcess(s[0], 1, 60 * kGiB);  // no pod owns it
  ClusterView v;
  v.Update("n", GpusFromSamples(s, nullptr), kNow);
  const ExtenderNode& n = *v.Find("n");
  // A 500-milli share needs 40 GiB by default: GPU 0 has 19.5 GiB free, GPU 1 fits.
  NodeFit fit = FitPod(n, SharePod(500), {}, kNow);
  ASSERT_TRUE(fit.fits) << fit.reason;
  EXPECT_EQ(fit.containers[0].gpus, std::vector<uint32_t>{1});
  // Two whole GPUs: GPU 0 is not free, and evicting pods would not change that.
  fit = FitPod(n, WholePod(2), {}, kNow);
  EXPECT_FALSE(fit.fits);
  EXPECT_FALSE(fit.resolvable);
  EXPECT_NE(fit.reason.find("60.0 GiB of it held by processes no pod owns"), std::string::npos)
      << fit.reason;
  // The same memory held by a pod that holds the GPU is the pod's: preemption could free it.
  s = IdleNode("n", 2, kNow);
  AddShareClaim(s[0], "ml/big", 900);
  AddProcess(s[0], 1, 60 * kGiB, testing::Pod("ml/big"));
  AddWholeClaim(s[1], "ml/other");
  v.Update("n", GpusFromSamples(s, nullptr), kNow);
  fit = FitPod(*v.Find("n"), SharePod(500), {}, kNow);
  EXPECT_FALSE(fit.fits);
  EXPECT_TRUE(fit.resolvable);
}

TEST(Fit, ClaimedButNotYetRunningSharesCount) {
  std::vector<GpuSample> s = IdleNode("n", 1, kNow);
  AddShareClaim(s[0], "ml/a", 300);
  AddShareClaim(s[0], "ml/b", 300);
  ClusterView v;
  v.Update("n", GpusFromSamples(s, nullptr), kNow);
  EXPECT_TRUE(FitPod(*v.Find("n"), SharePod(400), {}, kNow).fits);
  const NodeFit no = FitPod(*v.Find("n"), SharePod(401), {}, kNow);
  EXPECT_FALSE(no.fits);
  EXPECT_NE(no.reason.find("400 milli-GPU left unshared"), std::string::npos) << no.reason;
  // An explicit memory need beyond what the claims leave (80 - 48 GiB) does not fit either.
  EXPECT_FALSE(FitPod(*v.Find("n"), SharePod(100, 33 * kGiB), {}, kNow).fits);
  EXPECT_TRUE(FitPod(*v.Find("n"), SharePod(100, 31 * kGiB), {}, kNow).fits);
}

TEST(Fit, LostFaultedStaleDrainedAndMigNodes) {
  std::vector<GpuSample> s = IdleNode("n", 3, kNow);
  s[0].health = GpuHealth::kLost;
  s[1].remapping_failed = Field<bool>::Of(true);
  ClusterView v;
  v.Update("n", GpusFromSamples(s, nullptr), kNow);
  EXPECT_TRUE(FitPod(*v.Find("n"), WholePod(1), {}, kNow).fits);
  const NodeFit two = FitPod(*v.Find("n"), WholePod(2), {}, kNow);
  EXPECT_FALSE(two.fits);
  EXPECT_FALSE(two.resolvable);
  EXPECT_NE(two.reason.find("GPU 0: GPU lost"), std::string::npos) << two.reason;
  EXPECT_NE(two.reason.find("GPU 1: row remapping failed"), std::string::npos) << two.reason;

  const NodeFit stale = FitPod(*v.Find("n"), WholePod(1), {}, kNow + std::chrono::minutes(2));
  EXPECT_FALSE(stale.fits);
  EXPECT_NE(stale.reason.find("stale"), std::string::npos);
  v.SetState("n", /*drained=*/true, false);
  EXPECT_EQ(FitPod(*v.Find("n"), WholePod(1), {}, kNow).reason, "drained in Stoker");

  std::vector<GpuSample> m = IdleNode("m", 1, kNow);
  m[0].mig_enabled = Field<bool>::Of(true);
  for (uint32_t gi : {1u, 2u, 3u}) {
    MigInstance mi;
    mi.gpu_instance_id = gi;
    mi.profile = gi == 3 ? "3g.40gb" : "1g.10gb";
    mi.uuid = "MIG-" + std::to_string(gi);
    mi.memory_total_bytes = Field<uint64_t>::Of(10 * kGiB);
    mi.memory_used_bytes = Field<uint64_t>::Of(0);
    m[0].mig_instances.push_back(mi);
  }
  GpuClaim held;
  held.job = testing::Pod("ml/x");
  held.mig_uuid = "MIG-1";
  m[0].claims.push_back(held);
  v.Update("m", GpusFromSamples(m, nullptr), kNow);
  PodGpuRequest mig;
  mig.name = "mig";
  ContainerGpuRequest c;
  c.container = "main";
  c.mig_profile = "1g.10gb";
  c.mig_count = 1;
  mig.containers.push_back(c);
  NodeFit fit = FitPod(*v.Find("m"), mig, {}, kNow);
  ASSERT_TRUE(fit.fits) << fit.reason;
  EXPECT_EQ(fit.containers[0].mig_uuids, std::vector<std::string>{"MIG-2"});
  mig.containers[0].mig_count = 2;
  fit = FitPod(*v.Find("m"), mig, {}, kNow);
  EXPECT_FALSE(fit.fits);
  EXPECT_TRUE(fit.resolvable);                                       // MIG-1 is held by a pod
  EXPECT_FALSE(FitPod(*v.Find("m"), SharePod(100), {}, kNow).fits);  // MIG GPUs take no shares
}

TEST(Fit, InitContainersRunAloneBeforeTheApp) {
  std::vector<GpuSample> s = IdleNode("n", 2, kNow);
  ClusterView v;
  v.Update("n", GpusFromSamples(s, nullptr), kNow);
  PodGpuRequest p = WholePod(2);
  ContainerGpuRequest init;
  init.container = "warmup";
  init.whole_gpus = 2;
  p.init_containers.push_back(init);
  EXPECT_TRUE(FitPod(*v.Find("n"), p, {}, kNow).fits);  // not 4 GPUs: the init runs first
  p.init_containers[0].whole_gpus = 3;
  EXPECT_FALSE(FitPod(*v.Find("n"), p, {}, kNow).fits);
}

TEST(Prioritize, PacksSharesByStokersPolicyAndAvoidsHotGpus) {
  // n-half has a GPU half shared out; n-empty is idle: a share goes to n-half (packing).
  ClusterView v;
  std::vector<GpuSample> half = IdleNode("n-half", 2, kNow);
  AddShareClaim(half[0], "ml/a", 500);
  v.Update("n-half", GpusFromSamples(half, nullptr), kNow);
  v.Update("n-empty", GpusFromSamples(IdleNode("n-empty", 2, kNow), nullptr), kNow);
  Scorer scorer({});
  const std::vector<std::string> names = {"n-empty", "n-half", "unknown"};
  std::vector<int64_t> got = scorer.Score(v, SharePod(500), names, kNow);
  EXPECT_GT(got[1], got[0]);
  EXPECT_EQ(got[1], 100);
  EXPECT_EQ(got[2], 0);

  // The half-shared GPU runs hot: the zone term takes 20 points off the packed node.
  efficiency::ZoneConfig zc;
  zc.window = std::chrono::minutes(10);
  zc.min_coverage = std::chrono::minutes(1);
  efficiency::ZoneTracker zones(zc);
  for (int t = 0; t <= 120; ++t) {
    GpuSample hot = half[0];
    hot.timestamp = kNow - std::chrono::seconds(600 - 5 * t);
    hot.util_gpu_pct = Field<uint32_t>::Of(97);
    zones.Observe(hot, {});
  }
  v.Update("n-half", GpusFromSamples(half, &zones), kNow);
  ASSERT_EQ(v.Find("n-half")->gpus[0].zone, efficiency::Zone::kHot);
  got = scorer.Score(v, SharePod(500), names, kNow);
  EXPECT_EQ(got[1], 80);
  EXPECT_EQ(got[0], 20);  // the idle node: last by the policy, full marks by zone
}

}  // namespace
}  // namespace stoker::k8s
