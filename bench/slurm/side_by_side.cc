// The same stream of GPU jobs through a real Slurm, once placed by Slurm alone and once steered
// by Stoker (held with the steer marker, released by a SlurmController, the shared scheduling
// pass, onto the stoker policy's node; weights managed). Prints one table row per mode and run.
//
// Usage: slurm_side_by_side SLURM_CONF OPENB_POD_CSV [--jobs 60] [--arrival-ms 300]
//          [--seeds 1,2,3] [--shards-per-gpu 0] [--shard-every 20] [--cycle-ms 500]
//          [--time-scale 3600] [--run-s 5,40]
//          [--modes slurm,steered,steered-strict,steered-shared,submit] [--jobs-csv FILE]
//   Bring a cluster up first: scripts/slurm-cluster.sh up DIR (4 nodes x 8 GPUs), with
//   SLURM_SHARDS_PER_GPU=N for shard jobs (--shards-per-gpu N to match), and for the submit
//   mode SLURM_JOB_SUBMIT_LUA=deploy/slurm/job_submit.lua.
// Modes: slurm (Slurm alone); steered (held with the marker, released by the controller: the
// pass with backfill, as stoker server's default); steered-strict (strict queue order);
// steered-shared (backfill, whole-GPU and shard jobs not kept apart); submit (marked, not held:
// the job_submit script places each job from the plan the controller writes, DIR/stoker-submit-
// plan, and holds only those with no allowed node).
// Stream (per seed): openb pods in creation order from a start offset the seed picks; whole-GPU
// pods with the 1-GPU ones thinned to every 40th (the trace is mostly 1-GPU and shared pods);
// with shards, every --shard-every'th shared pod (gpu_milli < 1000) as a job asking for
// ceil(gpu_milli x shards-per-gpu / 1000) shards of one GPU. Arrivals are Poisson with mean
// --arrival-ms (seeded: both modes get the same times). Run time = trace lifetime divided by
// --time-scale (3600: one trace hour per second), clamped to --run-s (5..40 s).
// Measures, sampling every 0.5 s on its own thread (the controller cycles on another):
//   stranded GPUs: free GPUs on partly used nodes while some pending whole-GPU job fits no node
//     (mean over samples);
//   waited-while-free: pending whole-GPU jobs that at some sample had enough free GPUs in the
//     cluster in total but no node with enough;
//   shared GPUs: GPUs held whole by one job while shard jobs also run on them (mean over
//     samples; Slurm 22.05 allows it, Stoker's steering avoids it);
//   queue wait: start - submit (steered jobs: the hold counts as waiting), overall and by size.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
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
  int gpus = 0;    // whole GPUs, or
  int shards = 0;  // shards of one GPU
  int seconds = 5;
  double arrival_s = 0;
  std::string Class() const {
    if (shards > 0) return "shard";
    if (gpus == 1) return "1 GPU";
    if (gpus < 8) return "2-4 GPUs";
    return "8 GPUs";
  }
};

struct Options {
  std::string conf, csv;
  size_t jobs = 60;
  int arrival_ms = 300;
  std::vector<uint64_t> seeds = {1};
  int shards_per_gpu = 0;
  int shard_every = 20;
  int cycle_ms = 500;
  double time_scale = 3600;  // trace seconds per second of the run
  int min_run_s = 5, max_run_s = 40;
  std::vector<std::string> modes = {"slurm", "steered"};
  std::string jobs_csv;
};

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, sep);) out.push_back(x);
  return out;
}

std::vector<StreamJob> LoadStream(const Options& o, uint64_t seed) {
  std::ifstream in(o.csv);
  std::string line;
  std::getline(in, line);
  std::vector<std::vector<std::string>> pods;
  while (std::getline(in, line)) {
    auto f = Split(line, ',');
    if (f.size() >= 10) pods.push_back(std::move(f));
  }
  std::mt19937_64 rng(seed);
  // Seed 1 starts at the trace's beginning (the earlier single run); others at a random pod.
  size_t start = seed == 1 ? 0 : std::uniform_int_distribution<size_t>(0, pods.size() / 2)(rng);
  std::exponential_distribution<double> gap(1000.0 / std::max(1, o.arrival_ms));
  std::vector<StreamJob> out;
  int singles = 0, shared = 0;
  double t = 0;
  for (size_t k = 0; out.size() < o.jobs && k < pods.size(); ++k) {
    const auto& f = pods[(start + k) % pods.size()];
    const int gpus = std::atoi(f[3].c_str());
    const int milli = std::atoi(f[4].c_str());
    StreamJob j;
    if (gpus >= 1 && gpus <= 8 && milli == 1000) {
      if (gpus == 1 && (singles++ % 40) != 0) continue;
      j.gpus = gpus;
    } else if (gpus == 1 && milli > 0 && milli < 1000 && o.shards_per_gpu > 0) {
      if ((shared++ % o.shard_every) != 0) continue;
      j.shards = std::max(1, static_cast<int>(std::ceil(milli * o.shards_per_gpu / 1000.0)));
    } else {
      continue;
    }
    const double life_s = std::atof(f[9].c_str()) - std::atof(f[8].c_str());
    j.seconds = std::clamp(static_cast<int>(life_s / o.time_scale), o.min_run_s, o.max_run_s);
    j.arrival_s = out.empty() ? 0 : t;
    t += gap(rng);
    out.push_back(j);
  }
  return out;
}

struct Row {
  double stranded = 0;
  int waited_while_free = 0;
  double shared_gpus = 0;
  double mean_wait_s = 0;
  std::map<std::string, std::pair<double, int>> wait_by_class;  // sum, count
  double makespan_s = 0;
  int started = 0;
  ControllerMetrics controller;  // steered modes
};

// mode: see the modes at the top.
Row Run(CommandSlurmClient& client, const std::vector<StreamJob>& stream, const std::string& mode,
        const Options& o, std::ofstream* jobs_csv, uint64_t seed) {
  const bool steered = mode != "slurm";
  const bool at_submit = mode == "submit";
  const std::string dir = o.conf.substr(0, o.conf.rfind('/'));
  const std::string plan = dir + "/stoker-submit-plan";
  // Start from equal weights.
  if (auto nodes = client.Nodes(); nodes.ok()) {
    for (const SlurmNode& n : *nodes) (void)client.SetNodeWeight(n.name, 1);
  }
  std::mutex mu;
  std::map<uint32_t, size_t> ours;  // guarded by mu: Slurm id -> stream index
  std::atomic<bool> submitted_all{false}, done{false};
  const auto t0 = std::chrono::steady_clock::now();
  // Submissions on their own thread, on the stream's schedule, so both modes see the same
  // arrivals however long a controller cycle takes.
  std::thread submitter([&] {
    for (size_t k = 0; k < stream.size(); ++k) {
      const StreamJob& j = stream[k];
      std::this_thread::sleep_until(
          t0 + std::chrono::milliseconds(static_cast<int64_t>(j.arrival_s * 1000)));
      const std::string gres =
          j.shards > 0 ? "shard:" + std::to_string(j.shards) : "gpu:" + std::to_string(j.gpus);
      const std::string cmd =
          "cd " + dir + " && SLURM_CONF=" + o.conf + " sbatch --parsable -o /dev/null " +
          (at_submit ? "--comment=stoker:steer "
           : steered ? "-H --comment=stoker:steer "
                     : "") +
          "--gres=" + gres + " --wrap 'sleep " + std::to_string(j.seconds) + "'";
      auto r = RunCommand({"/bin/sh", "-c", cmd}, {}, std::chrono::seconds(30), 4096);
      if (r.ok() && r->exit_code == 0) {
        std::lock_guard<std::mutex> lock(mu);
        ours[static_cast<uint32_t>(std::stoul(r->out))] = k;
      } else {
        std::fprintf(stderr, "sbatch failed: %s\n", r.ok() ? r->err.c_str() : "");
      }
    }
    submitted_all = true;
  });
  Row row;
  std::mutex controller_mu;  // guards row.controller while the controller runs
  // The controller on its own thread, as the server's loop runs it.
  std::thread controller_thread;
  if (steered) {
    controller_thread = std::thread([&] {
      CommandSlurmClient own({o.conf, "", std::chrono::seconds(30)});
      ControllerOptions co;
      co.backfill = mode != "steered-strict";
      co.keep_shards_apart = mode != "steered-shared";
      if (at_submit) co.submit_plan = plan;
      auto c = SlurmController::Create(&own, co).value();
      while (!done) {
        const auto next = std::chrono::steady_clock::now() + std::chrono::milliseconds(o.cycle_ms);
        (void)c->Cycle();
        {
          std::lock_guard<std::mutex> lock(controller_mu);
          row.controller = c->metrics();
        }
        std::this_thread::sleep_until(next);
      }
    });
  }
  std::set<uint32_t> waited;
  std::map<uint32_t, SlurmJob> last_seen;
  int64_t samples = 0;
  while (true) {
    const auto next = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
    auto nodes = client.Nodes();
    auto jobs = client.Jobs();
    if (nodes.ok() && jobs.ok()) {
      ++samples;
      const SlurmSnapshot snap{*nodes, *jobs};
      const auto uses = NodeUses(snap);
      int total_free = 0, max_free = 0, partly_free = 0, shared = 0;
      for (const auto& [name, u] : uses) {
        const int used = static_cast<int>(std::count(u.whole.begin(), u.whole.end(), true));
        const int free = static_cast<int>(u.whole.size()) - used;
        total_free += free;
        max_free = std::max(max_free, free);
        if (used > 0 && free > 0) partly_free += free;
        for (size_t g = 0; g < u.whole.size(); ++g) shared += u.whole[g] && u.shards[g] > 0;
      }
      bool blocked = false;
      int active = 0;
      std::lock_guard<std::mutex> lock(mu);
      for (const SlurmJob& j : *jobs) {
        if (!ours.count(j.id)) continue;
        last_seen[j.id] = j;
        if (j.Pending() || j.Holding()) ++active;
        if (!j.Pending()) continue;
        const int want = j.GpusWanted();
        if (want > max_free) {
          blocked = true;
          if (want <= total_free) waited.insert(j.id);
        }
      }
      if (blocked) row.stranded += partly_free;
      row.shared_gpus += shared;
      if (submitted_all && active == 0 && ours.size() == stream.size()) break;
    }
    std::this_thread::sleep_until(next);
  }
  done = true;
  submitter.join();
  if (controller_thread.joinable()) controller_thread.join();
  if (at_submit) std::remove(plan.c_str());
  row.makespan_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  row.stranded /= static_cast<double>(std::max<int64_t>(samples, 1));
  row.shared_gpus /= static_cast<double>(std::max<int64_t>(samples, 1));
  row.waited_while_free = static_cast<int>(waited.size());
  double wait = 0;
  for (const auto& [id, j] : last_seen) {
    if (j.start_time == 0) continue;
    const StreamJob& s = stream[ours[id]];
    const double w = static_cast<double>(j.start_time - j.submit_time);
    wait += w;
    ++row.started;
    auto& c = row.wait_by_class[s.Class()];
    c.first += w;
    ++c.second;
    if (jobs_csv != nullptr) {
      *jobs_csv << seed << "," << mode << "," << id << "," << s.Class() << "," << s.gpus << ","
                << s.shards << "," << s.seconds << "," << w << ","
                << (j.nodes.empty() ? "" : j.nodes[0]) << "\n";
    }
  }
  row.mean_wait_s = row.started ? wait / row.started : 0;
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: %s SLURM_CONF OPENB_POD_CSV [--jobs N] [--arrival-ms M] [--seeds 1,2] "
                 "[--shards-per-gpu K] [--shard-every E] [--cycle-ms C] [--time-scale T] "
                 "[--run-s MIN,MAX] [--modes slurm,steered,steered-strict,steered-shared,submit] "
                 "[--jobs-csv FILE]\n",
                 argv[0]);
    return 2;
  }
  spdlog::set_level(spdlog::level::warn);  // the controller's per-job lines
  Options o;
  o.conf = argv[1];
  o.csv = argv[2];
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--jobs") {
      o.jobs = std::stoul(v);
    } else if (k == "--arrival-ms") {
      o.arrival_ms = std::stoi(v);
    } else if (k == "--seeds") {
      o.seeds.clear();
      for (const auto& s : Split(v, ',')) o.seeds.push_back(std::stoull(s));
    } else if (k == "--shards-per-gpu") {
      o.shards_per_gpu = std::stoi(v);
    } else if (k == "--shard-every") {
      o.shard_every = std::max(1, std::stoi(v));
    } else if (k == "--time-scale") {
      o.time_scale = std::stod(v);
    } else if (k == "--run-s") {  // MIN,MAX
      const auto mm = Split(v, ',');
      o.min_run_s = std::stoi(mm.at(0));
      o.max_run_s = std::stoi(mm.at(1));
    } else if (k == "--cycle-ms") {
      o.cycle_ms = std::stoi(v);
    } else if (k == "--modes") {
      o.modes = Split(v, ',');
    } else if (k == "--jobs-csv") {
      o.jobs_csv = v;
    } else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  std::ofstream jobs_csv;
  if (!o.jobs_csv.empty()) {
    jobs_csv.open(o.jobs_csv);
    jobs_csv << "seed,mode,job,class,gpus,shards,seconds,wait_s,node\n";
  }
  // The submit mode needs the cluster's job_submit/lua (the plan's script): without it every
  // job would run as plain Slurm, silently.
  if (std::find(o.modes.begin(), o.modes.end(), "submit") != o.modes.end()) {
    auto r = RunCommand({"scontrol", "show", "config"}, {{"SLURM_CONF", o.conf}},
                        std::chrono::seconds(30), 1 << 20);
    bool lua = false;
    if (r.ok() && r->exit_code == 0) {
      std::istringstream lines(r->out);
      for (std::string line; std::getline(lines, line);) {
        if (line.rfind("JobSubmitPlugins", 0) == 0 && line.find("lua") != std::string::npos) {
          lua = true;
        }
      }
    }
    if (!lua) {
      std::fprintf(stderr,
                   "submit mode needs JobSubmitPlugins=lua in the cluster (start it with "
                   "SLURM_JOB_SUBMIT_LUA=deploy/slurm/job_submit.lua scripts/slurm-cluster.sh "
                   "up); `scontrol show config` %s\n",
                   r.ok() && r->exit_code == 0 ? "shows none" : "failed");
      return 2;
    }
  }
  CommandSlurmClient client({o.conf, "", std::chrono::seconds(30)});
  std::printf(
      "| seed | placement | mean stranded GPUs | waited while enough GPUs free | mean GPUs shared "
      "by whole and shard jobs | mean wait | wait 1 GPU / 2-4 / 8 / shard | makespan |\n"
      "|---|---|---|---|---|---|---|---|\n");
  for (uint64_t seed : o.seeds) {
    const auto stream = LoadStream(o, seed);
    std::map<std::string, int> sizes;
    for (const auto& j : stream) ++sizes[j.Class()];
    std::fprintf(stderr, "seed %llu: %zu jobs;", static_cast<unsigned long long>(seed),
                 stream.size());
    for (const auto& [c, n] : sizes) std::fprintf(stderr, " %d x %s", n, c.c_str());
    std::fprintf(stderr, "\n");
    for (const std::string& mode : o.modes) {
      const Row r = Run(client, stream, mode, o, o.jobs_csv.empty() ? nullptr : &jobs_csv, seed);
      auto cls = [&](const char* c) {
        auto it = r.wait_by_class.find(c);
        if (it == r.wait_by_class.end()) return std::string("-");
        char b[32];
        std::snprintf(b, sizeof b, "%.1f", it->second.first / it->second.second);
        return std::string(b);
      };
      if (mode != "slurm") {
        std::fprintf(stderr,
                     "  controller: %lld cycles, last %.2f s; %lld steered, %lld moved or held to "
                     "keep whole and shard jobs apart, %lld weight updates\n",
                     static_cast<long long>(r.controller.cycles), r.controller.last_cycle_seconds,
                     static_cast<long long>(r.controller.jobs_steered),
                     static_cast<long long>(r.controller.kept_off_shared_gpus),
                     static_cast<long long>(r.controller.weight_updates));
      }
      std::printf(
          "| %llu | %s | %.2f | %d | %.2f | %.1f s | %s / %s / %s / %s s | %.0f s |\n",
          static_cast<unsigned long long>(seed),
          mode == "slurm"            ? "Slurm alone"
          : mode == "submit"         ? "placed by Stoker at submission"
          : mode == "steered"        ? "steered by Stoker (backfill)"
          : mode == "steered-shared" ? "steered by Stoker (backfill, GPUs shared as Slurm does)"
                                     : "steered by Stoker (strict order)",
          r.stranded, r.waited_while_free, r.shared_gpus, r.mean_wait_s, cls("1 GPU").c_str(),
          cls("2-4 GPUs").c_str(), cls("8 GPUs").c_str(), cls("shard").c_str(), r.makespan_s);
      std::fflush(stdout);
    }
  }
  return 0;
}
