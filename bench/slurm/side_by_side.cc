// The same stream of GPU jobs through a real Slurm, once placed by Slurm alone and once
// steered by Stoker (held with the steer marker, released by SlurmController onto the stoker
// policy's node, weights managed). Prints one table row per mode.
//
// Usage: slurm_side_by_side SLURM_CONF OPENB_POD_CSV [JOBS=60] [ARRIVAL_MS=1000]
//   Bring a cluster up first: scripts/slurm-cluster.sh up DIR (4 nodes x 8 GPUs).
// Stream: openb's whole-GPU pods in creation order, 1-GPU pods thinned to every 40th (the trace
// is 98 % 1-GPU pods); one job submitted every ARRIVAL_MS; run time = trace lifetime at 1 trace
// hour per second, clamped to 5..40 s.
// Measures, sampling every 0.5 s:
//   stranded GPU-samples: free GPUs on partly used nodes while some pending job fits no node;
//   waited-while-free jobs: pending jobs that at some sample had enough free GPUs in the
//     cluster in total but no node with enough;
//   mean queue wait: start - submit (steered jobs: the hold counts as waiting).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "slurm/client.h"
#include "slurm/controller.h"

using namespace stoker;
using namespace stoker::slurm;

namespace {

struct StreamJob {
  int gpus = 1;
  int seconds = 5;
};

std::vector<StreamJob> LoadStream(const std::string& csv, size_t n) {
  std::ifstream in(csv);
  std::string line;
  std::getline(in, line);
  std::vector<StreamJob> out;
  int singles = 0;
  while (out.size() < n && std::getline(in, line)) {
    std::vector<std::string> f;
    std::stringstream ss(line);
    for (std::string x; std::getline(ss, x, ',');) f.push_back(x);
    if (f.size() < 10) continue;
    const int gpus = std::atoi(f[3].c_str());
    if (gpus < 1 || gpus > 8 || std::atoi(f[4].c_str()) != 1000) continue;
    if (gpus == 1 && (singles++ % 40) != 0) continue;
    const double life_s = (std::atof(f[9].c_str()) - std::atof(f[8].c_str()));
    StreamJob j;
    j.gpus = gpus;
    j.seconds = std::clamp(static_cast<int>(life_s / 3600.0), 5, 40);
    out.push_back(j);
  }
  return out;
}

struct Row {
  double stranded_gpu_samples = 0;
  int waited_while_free = 0;
  double mean_wait_s = 0;
  double makespan_s = 0;
};

Row Run(CommandSlurmClient& client, const std::vector<StreamJob>& stream, bool steered,
        const std::string& conf, std::chrono::milliseconds arrival) {
  const std::string dir = conf.substr(0, conf.rfind('/'));
  std::unique_ptr<SlurmController> controller;
  if (steered) controller = SlurmController::Create(&client, {}).value();
  // Start from equal weights.
  if (auto nodes = client.Nodes(); nodes.ok()) {
    for (const SlurmNode& n : *nodes) (void)client.SetNodeWeight(n.name, 1);
  }
  std::set<uint32_t> waited;
  std::mutex mu;
  std::set<uint32_t> ours;  // guarded by mu
  std::atomic<bool> submitted_all{false};
  Row row;
  const auto t0 = std::chrono::steady_clock::now();
  // Submissions on their own thread, on a fixed schedule, so both modes see the same arrivals
  // however long a controller cycle takes.
  std::thread submitter([&] {
    for (size_t k = 0; k < stream.size(); ++k) {
      std::this_thread::sleep_until(t0 + arrival * static_cast<int64_t>(k));
      const StreamJob& j = stream[k];
      const std::string cmd =
          "cd " + dir + " && SLURM_CONF=" + conf + " sbatch --parsable -o /dev/null " +
          (steered ? "-H --comment=stoker:steer " : "") + "--gres=gpu:" + std::to_string(j.gpus) +
          " --wrap 'sleep " + std::to_string(j.seconds) + "'";
      auto r = RunCommand({"/bin/sh", "-c", cmd}, {}, std::chrono::seconds(30), 4096);
      if (r.ok() && r->exit_code == 0) {
        std::lock_guard<std::mutex> lock(mu);
        ours.insert(static_cast<uint32_t>(std::stoul(r->out)));
      }
    }
    submitted_all = true;
  });
  int64_t samples = 0;
  while (true) {
    if (controller) (void)controller->Cycle();
    auto nodes = client.Nodes();
    auto jobs = client.Jobs();
    if (nodes.ok() && jobs.ok()) {
      ++samples;
      int total_free = 0, max_free = 0, partly_free = 0;
      for (const SlurmNode& n : *nodes) {
        const int free = n.gpus - n.gpus_used;
        total_free += free;
        max_free = std::max(max_free, free);
        if (n.gpus_used > 0 && free > 0) partly_free += free;
      }
      bool blocked = false;
      int active = 0;
      std::lock_guard<std::mutex> lock(mu);
      for (const SlurmJob& j : *jobs) {
        if (!ours.count(j.id)) continue;
        if (j.Pending() || j.Running() || j.state == "COMPLETING") ++active;
        if (!j.Pending()) continue;
        const int want = j.GpusWanted();
        if (want > max_free) {
          blocked = true;
          if (want <= total_free) waited.insert(j.id);
        }
      }
      if (blocked) row.stranded_gpu_samples += partly_free;
      if (submitted_all && active == 0) break;
    }
    std::this_thread::sleep_for(std::min(arrival, std::chrono::milliseconds(500)));
  }
  submitter.join();
  row.makespan_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  row.stranded_gpu_samples /= static_cast<double>(std::max<int64_t>(samples, 1));
  row.waited_while_free = static_cast<int>(waited.size());
  double wait = 0;
  int n = 0;
  auto final_jobs = client.Jobs();
  for (const SlurmJob& j : final_jobs.ok() ? *final_jobs : std::vector<SlurmJob>{}) {
    if (!ours.count(j.id) || j.start_time == 0) continue;
    wait += static_cast<double>(j.start_time - j.submit_time);
    ++n;
  }
  row.mean_wait_s = n ? wait / n : 0;
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s SLURM_CONF OPENB_POD_CSV [JOBS]\n", argv[0]);
    return 2;
  }
  const std::string conf = argv[1];
  const auto stream = LoadStream(argv[2], argc > 3 ? std::stoul(argv[3]) : 60);
  std::map<int, int> sizes;
  for (const auto& j : stream) ++sizes[j.gpus];
  std::printf("stream: %zu jobs; sizes", stream.size());
  for (auto [g, c] : sizes) std::printf(" %dx%d-GPU", c, g);
  std::printf("\n");
  std::fflush(stdout);
  CommandSlurmClient client({conf, "", std::chrono::seconds(30)});
  std::printf(
      "| placement | mean stranded GPUs (while a job is blocked) | jobs that waited while enough "
      "GPUs were free | mean queue wait | makespan |\n|---|---|---|---|---|\n");
  for (bool steered : {false, true}) {
    const Row r = Run(client, stream, steered, conf,
                      std::chrono::milliseconds(argc > 4 ? std::stoul(argv[4]) : 1000));
    std::printf("| %s | %.2f | %d | %.1f s | %.0f s |\n",
                steered ? "steered by Stoker" : "Slurm alone", r.stranded_gpu_samples,
                r.waited_while_free, r.mean_wait_s, r.makespan_s);
    std::fflush(stdout);
  }
  return 0;
}
