// Reproduction of the published static packing results (FGD paper, ATC'23): every baseline must
// land within 0.5 percentage points of the published mean GPU allocation at every arrived step
// 50..130 % (1 point for random and clustering), on `default` and one GPU-sharing workload
// (gpushare80). Runs fewer seeds than the paper (4 instead of 10) to stay within CI time (about 40
// s on two cores with the guarantee tests below); the 10-seed tables are in docs/scheduling.md.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "scheduler/policy.h"
#include "sim/packing.h"
#include "sim/packing_trace.h"
#include "sim/packing_workload.h"
#include "support/trace_test.h"

namespace stoker::sim {
namespace {

// reference_results.csv: workload,policy,metric,n_seeds,arr_0..arr_130 -> values by step.
std::map<std::string, std::vector<double>> LoadReference(const std::string& path) {
  std::map<std::string, std::vector<double>> out;
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) {
    std::stringstream ss(line);
    std::string workload, policy, metric, n, v;
    std::getline(ss, workload, ',');
    std::getline(ss, policy, ',');
    std::getline(ss, metric, ',');
    std::getline(ss, n, ',');
    std::vector<double> values;
    while (std::getline(ss, v, ',')) values.push_back(std::stod(v));
    out[workload + "/" + policy + "/" + metric] = values;
  }
  return out;
}

struct Case {
  std::string policy, published;
  double tolerance;
};

class PackingReproTest : public ::testing::TestWithParam<std::string> {};

TEST_P(PackingReproTest, BaselinesMatchPublishedAllocation) {
  const std::string workload = GetParam();
  STOKER_TRACE_OR_SKIP(ref_path, "openb/reference_results.csv");
  STOKER_TRACE_OR_SKIP(nodes_path, "openb/openb_node_list_gpu_node.csv");
  STOKER_TRACE_OR_SKIP(pods_path, "openb/openb_pod_list_" + workload + ".csv");
  auto reference = LoadReference(ref_path);
  ASSERT_FALSE(reference.empty()) << "empty " << ref_path;
  auto cluster = LoadOpenbNodes(nodes_path);
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  auto pods = LoadOpenbPods(pods_path, cluster->models());
  ASSERT_TRUE(pods.ok()) << pods.status().ToString();
  const scheduler::TypicalShapes typical = scheduler::ComputeTypicalShapes(pods->pods, 95);
  const std::vector<Case> cases = {{"random", "01-Random", 1.0},
                                   {"dotprod", "02-DotProd", 0.5},
                                   {"clustering", "03-GpuClustering", 1.0},
                                   {"packing", "04-GpuPacking", 0.5},
                                   {"bestfit", "05-BestFit", 0.5},
                                   {"fgd", "06-FGD", 0.5},
                                   // Not a reproduction: Stoker's policy must allocate more than
                                   // the published FGD at 100 % and 130 % arrived.
                                   {"stoker", "06-FGD", -1.0}};
  const std::vector<uint64_t> seeds = {42, 43, 44, 45};
  std::vector<PackingCurve> curves(cases.size() * seeds.size());
  std::vector<std::thread> pool;
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t j = next++; j < curves.size(); j = next++) {
      auto r = RunPacking(*cluster, pods->pods, typical,
                          {cases[j / seeds.size()].policy, seeds[j % seeds.size()], 1300});
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      curves[j] = *r;
    }
  };
  for (int t = 0; t < 2; ++t) pool.emplace_back(work);
  for (auto& t : pool) t.join();
  for (size_t c = 0; c < cases.size(); ++c) {
    std::vector<PackingCurve> runs(curves.begin() + static_cast<long>(c * seeds.size()),
                                   curves.begin() + static_cast<long>((c + 1) * seeds.size()));
    PackingCurve mean = MeanCurve(runs);
    const auto& pub =
        reference["openb_pod_list_" + workload + "/" + cases[c].published + "/gpu_alloc_pct"];
    ASSERT_EQ(pub.size(), 14u);
    std::string line = cases[c].policy + ":";
    if (cases[c].tolerance < 0) {
      for (int step : {100, 130}) {
        EXPECT_GT(mean.alloc_pct[step], pub[step / 10])
            << workload << " stoker at " << step << "% does not beat published FGD";
        line += " " + std::to_string(step) + ":" +
                std::to_string(mean.alloc_pct[step] - pub[step / 10]);
      }
      std::printf("%s %s (vs published FGD)\n", workload.c_str(), line.c_str());
      continue;
    }
    for (int step = 50; step <= 130; step += 10) {
      ASSERT_TRUE(mean.present[step]);
      const double diff = mean.alloc_pct[step] - pub[step / 10];
      char buf[64];
      std::snprintf(buf, sizeof buf, " %d:%+.2f", step, diff);
      line += buf;
      EXPECT_LE(std::abs(diff), cases[c].tolerance)
          << workload << " " << cases[c].policy << " at " << step << "%: ours "
          << mean.alloc_pct[step] << ", published " << pub[step / 10];
    }
    std::printf("%s %s\n", workload.c_str(), line.c_str());
  }
}

INSTANTIATE_TEST_SUITE_P(Openb, PackingReproTest, ::testing::Values("default", "gpushare80"));

// Stoker against the published FGD on one more GPU-sharing workload (the parameterised test above
// covers default and gpushare80; gpushare40 is not among its baselines because packing sits at
// exactly the 0.5 tolerance there).
TEST(StokerVsPublishedFgd, Gpushare40) {
  STOKER_TRACE_OR_SKIP(ref_path, "openb/reference_results.csv");
  STOKER_TRACE_OR_SKIP(nodes_path, "openb/openb_node_list_gpu_node.csv");
  STOKER_TRACE_OR_SKIP(pods_path, "openb/openb_pod_list_gpushare40.csv");
  auto reference = LoadReference(ref_path);
  const auto& fgd = reference["openb_pod_list_gpushare40/06-FGD/gpu_alloc_pct"];
  ASSERT_EQ(fgd.size(), 14u) << "no gpushare40 FGD row in " << ref_path;
  auto cluster = LoadOpenbNodes(nodes_path);
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  auto pods = LoadOpenbPods(pods_path, cluster->models());
  ASSERT_TRUE(pods.ok()) << pods.status().ToString();
  const scheduler::TypicalShapes typical = scheduler::ComputeTypicalShapes(pods->pods, 95);
  std::vector<PackingCurve> runs;
  for (uint64_t seed : {42, 43}) {
    auto run = RunPacking(*cluster, pods->pods, typical, {"stoker", seed, 1300});
    ASSERT_TRUE(run.ok()) << run.status().ToString();
    runs.push_back(*run);
  }
  const PackingCurve mean = MeanCurve(runs);
  for (int step : {100, 130}) {
    EXPECT_GT(mean.alloc_pct[step], fgd[step / 10]) << "gpushare40 at " << step << " % arrived";
  }
}

// The guarantee of issue 17 (docs/scheduling.md, "Results"): at every arrival step from 50 % to
// 130 %, `stoker` allocates at least what FGD does, within 0.05 points (the tolerance the issue
// measures with; below saturation both place nearly everything that arrives), against our `fgd`
// on the same arrivals and, where the paper published figures, against those too. On a
// published workload, a generated GPU-model-constrained one and a generated multi-GPU-heavy one,
// four seeds (the docs' tables use ten). `default+mgpu70` on seeds 44-47: on seed 46 the 8-GPU
// pods of 120 CPUs come late, and without the reserve's hedge stoker refused five of them before
// 91 % arrived where fgd refused none (0.16 points behind at 90 % in the mean of the four), as on
// FGD's `multigpu50` (not in every copy of the traces).
struct GuaranteeCase {
  std::string workload;  // pod list
  WorkloadVariant variant;
  std::vector<uint64_t> seeds = {42, 43, 44, 45};
};

class StokerGuaranteeTest : public ::testing::TestWithParam<GuaranteeCase> {};

TEST_P(StokerGuaranteeTest, AtOrAboveFgdAtEveryStep) {
  const GuaranteeCase& g = GetParam();
  STOKER_TRACE_OR_SKIP(ref_path, "openb/reference_results.csv");
  STOKER_TRACE_OR_SKIP(nodes_path, "openb/openb_node_list_gpu_node.csv");
  STOKER_TRACE_OR_SKIP(pods_path, "openb/openb_pod_list_" + g.workload + ".csv");
  auto cluster = LoadOpenbNodes(nodes_path);
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  auto pods = LoadOpenbPods(pods_path, cluster->models());
  ASSERT_TRUE(pods.ok()) << pods.status().ToString();
  const std::vector<std::string> policies = {"fgd", "stoker"};
  const std::vector<uint64_t>& seeds = g.seeds;
  std::vector<PackingCurve> curves(policies.size() * seeds.size());
  std::vector<std::thread> pool;
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t j = next++; j < curves.size(); j = next++) {
      auto r = RunPackingVariant(*cluster, pods->pods, g.variant, std::nullopt,
                                 {policies[j / seeds.size()], seeds[j % seeds.size()], 1300});
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      curves[j] = *r;
    }
  };
  for (int t = 0; t < 2; ++t) pool.emplace_back(work);
  for (auto& t : pool) t.join();
  auto mean = [&](size_t p) {
    return MeanCurve(
        std::vector<PackingCurve>(curves.begin() + static_cast<long>(p * seeds.size()),
                                  curves.begin() + static_cast<long>((p + 1) * seeds.size())));
  };
  const PackingCurve fgd = mean(0), stoker = mean(1);
  auto reference = LoadReference(ref_path);
  const auto& published = reference["openb_pod_list_" + g.workload + "/06-FGD/gpu_alloc_pct"];
  const bool has_published = g.variant.empty() && published.size() == 14;
  const std::string name = g.variant.Name(g.workload);
  std::string line = name + " stoker - max(fgd, published):";
  for (int step = 50; step <= 130; step += 10) {
    ASSERT_TRUE(stoker.present[step] && fgd.present[step]) << name << " " << step;
    double bar = fgd.alloc_pct[step];
    if (has_published) bar = std::max(bar, published[step / 10]);
    char buf[32];
    std::snprintf(buf, sizeof buf, " %d:%+.2f", step, stoker.alloc_pct[step] - bar);
    line += buf;
    EXPECT_GE(stoker.alloc_pct[step], fgd.alloc_pct[step] - 0.05)
        << name << " at " << step << " % arrived: stoker " << stoker.alloc_pct[step] << ", our fgd "
        << fgd.alloc_pct[step];
    // Below saturation the published curve differs from ours by the seed stream (its arrivals,
    // not its placements): there our own fgd on the same arrivals is the bar.
    if (has_published && step >= 100) {
      EXPECT_GT(stoker.alloc_pct[step], published[step / 10])
          << name << " at " << step << " % arrived: stoker " << stoker.alloc_pct[step]
          << ", published FGD " << published[step / 10];
    }
  }
  std::printf("%s\n", line.c_str());
}

INSTANTIATE_TEST_SUITE_P(
    Openb, StokerGuaranteeTest,
    ::testing::Values(GuaranteeCase{"cpu250", {}}, GuaranteeCase{"default", {.constrain_pct = 5}},
                      GuaranteeCase{"default", {.constrain_pct = 20}},
                      GuaranteeCase{"default", {.multi_gpu_pct = 40}},
                      GuaranteeCase{"default", {.multi_gpu_pct = 70}, {44, 45, 46, 47}}),
    [](const ::testing::TestParamInfo<GuaranteeCase>& info) {
      std::string n = info.param.variant.Name(info.param.workload);
      for (char& ch : n) {
        if (ch == '+') ch = '_';
      }
      return n;
    });

}  // namespace
}  // namespace stoker::sim
