#include "web/history.h"

#include <algorithm>
#include <cmath>

#include "efficiency/records.h"
#include "efficiency/report.h"
#include "protocol/limits.h"

namespace stoker::web {
namespace {
using http::QueryParam;
using http::RouteCall;
using http::Scope;
using server::Role;

int64_t Ms(Duration d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); }
int64_t MsOf(WallTime t) { return Ms(t.time_since_epoch()); }

constexpr size_t kFragCapacity = 24 * 60 + 1;  // one a minute at most, a day
constexpr int kMaxPoints = 2000;

uint16_t Pct(double v) { return static_cast<uint16_t>(std::clamp(std::lround(v), 0L, 100L)); }

}  // namespace

History::History(const Clock* clock, HistoryOptions options) : clock_(clock), opt_(options) {
  if (opt_.bucket < std::chrono::seconds(1)) opt_.bucket = std::chrono::seconds(1);
  if (opt_.span < opt_.bucket) opt_.span = opt_.bucket;
  capacity_ = static_cast<size_t>(opt_.span / opt_.bucket) + 1;
  prune_at_ = JobsBound();
}

int64_t History::BucketOf(WallTime t) const {
  const int64_t b = Ms(opt_.bucket);
  const int64_t ms = MsOf(t);
  return ms >= 0 ? ms / b : (ms - b + 1) / b;
}

const History::Point* History::Ring::Last() const {
  if (points.empty()) return nullptr;
  return full ? &points[(head + points.size() - 1) % points.size()] : &points.back();
}

History::Ring* History::RingLocked(const std::string& key) {
  auto it = rings_.find(key);
  if (it != rings_.end()) return &it->second;
  if (rings_.size() >= opt_.max_gpus) {
    ++dropped_gpus_;
    return nullptr;
  }
  return &rings_.emplace(key, Ring{}).first->second;
}

void History::RecordLocked(Ring& r, WallTime t, std::optional<double> util,
                           std::optional<double> sm, double mem, int64_t job) {
  const int64_t bucket = BucketOf(t);
  const Point* last = r.Last();
  if (last != nullptr && bucket < last->bucket) return;  // late sample: its bucket is written
  Point* p = nullptr;
  if (last != nullptr && last->bucket == bucket) {
    p = const_cast<Point*>(last);
  } else if (r.points.size() < capacity_) {
    r.points.push_back(Point{.bucket = bucket});
    p = &r.points.back();
  } else {
    r.full = true;
    p = &r.points[r.head];
    *p = Point{.bucket = bucket};
    r.head = (r.head + 1) % r.points.size();
  }
  if (p->count == 255) return;  // the bucket's mean is settled
  p->util_sum = static_cast<uint16_t>(p->util_sum + Pct(util.value_or(0)));
  p->mem_sum = static_cast<uint16_t>(p->mem_sum + Pct(mem));
  if (sm) {
    p->sm_sum = static_cast<uint16_t>(p->sm_sum + Pct(*sm));
    ++p->sm_count;
  }
  ++p->count;
  if (job != 0) {
    p->job = job;
    auto j = jobs_.find(job);
    if (j != jobs_.end()) j->second.last_bucket = bucket;
  }
}

void History::OnHeartbeat(const std::string& node, const std::vector<GpuSample>& gpus,
                          WallTime /*at*/) {
  const std::vector<GpuSample>* one[] = {&gpus};
  std::lock_guard lock(mu_);
  RecordSecondsLocked(node, one);
}

void History::OnReport(const std::string& node, std::span<const server::SampleTick> ticks) {
  std::vector<const std::vector<GpuSample>*> seconds;
  seconds.reserve(ticks.size());
  for (const server::SampleTick& t : ticks) seconds.push_back(&t.gpus);
  std::lock_guard lock(mu_);
  RecordSecondsLocked(node, seconds);
}

void History::RecordSecondsLocked(const std::string& node,
                                  std::span<const std::vector<GpuSample>* const> seconds) {
  auto percent = [](const Field<uint64_t>& used, const Field<uint64_t>& total) {
    if (total.value_or(0) == 0) return 0.0;
    return 100.0 * static_cast<double>(used.value_or(0)) / static_cast<double>(total.value());
  };
  auto sm_of = [](const GpmMetrics& g) -> std::optional<double> {
    if (!g.sm_active.has_value()) return std::nullopt;
    return g.sm_active.value() * 100;
  };
  // Rows are found (and made, in the order the samples name them) once per call, and the holders
  // looked up once: neither changes while the lock is held. A row's labels and estimate are
  // written from its latest sample, after every second is recorded (each second overwrote them).
  struct SliceRow {
    std::string id;
    Ring* ring = nullptr;
    int64_t job = 0;
    const MigInstance* latest = nullptr;
    const GpuSample* gpu = nullptr;  // the GPU sample `latest` came with
  };
  struct GpuRow {
    uint32_t index = 0;
    std::string key;  // "node/index"
    Ring* ring = nullptr;
    int64_t job = 0;
    const GpuSample* latest = nullptr;
    std::vector<SliceRow> slices;
  };
  std::vector<GpuRow> rows;
  auto row_of = [&](uint32_t index) -> GpuRow& {
    for (GpuRow& r : rows) {
      if (r.index == index) return r;
    }
    GpuRow& r = rows.emplace_back();
    r.index = index;
    r.key = node + "/" + std::to_string(index);
    r.ring = RingLocked(r.key);
    if (r.ring != nullptr) {
      r.job = HolderLocked(node, index);
    }
    return r;
  };
  for (const std::vector<GpuSample>* gpus : seconds) {
    for (const GpuSample& s : *gpus) {
      GpuRow& row = row_of(s.id.index);
      if (row.ring == nullptr) {
        // Every sample of a row beyond max_gpus counts; RingLocked counted the first.
        if (row.latest != nullptr) ++dropped_gpus_;
        row.latest = &s;
        continue;
      }
      row.latest = &s;
      RecordLocked(*row.ring, s.timestamp, s.util_gpu_pct.value_or(0), sm_of(s.gpm),
                   percent(s.memory_used_bytes, s.memory_total_bytes), row.job);
      for (const MigInstance& m : s.mig_instances) {
        // A slice is named by its UUID, or "GI.CI" without one.
        std::string numbered;
        if (m.uuid.empty()) {
          numbered =
              std::to_string(m.gpu_instance_id) + "." + std::to_string(m.compute_instance_id);
        }
        const std::string& id = m.uuid.empty() ? numbered : m.uuid;
        SliceRow* slice = nullptr;
        for (SliceRow& x : row.slices) {
          if (x.id == id) slice = &x;
        }
        if (slice == nullptr) {
          slice = &row.slices.emplace_back();
          slice->ring = RingLocked(row.key + "/" + id);
          slice->id = id;
          const int64_t* mh = mig_holder_.Find({node, m.uuid});
          slice->job = mh == nullptr ? 0 : *mh;
        } else if (slice->ring == nullptr) {
          ++dropped_gpus_;
        }
        slice->latest = &m;
        slice->gpu = &s;
        if (slice->ring == nullptr) continue;
        RecordLocked(*slice->ring, s.timestamp, std::nullopt, sm_of(m.gpm),
                     percent(m.memory_used_bytes, m.memory_total_bytes), slice->job);
      }
    }
  }
  for (GpuRow& row : rows) {
    if (row.ring == nullptr) continue;
    const GpuSample& s = *row.latest;
    Ring* r = row.ring;
    r->node = node;
    r->index = s.id.index;
    r->name = s.id.name;
    r->uuid = s.id.uuid;
    r->mig = s.mig_enabled.value_or(false) || !s.mig_instances.empty();
    const efficiency::SampleEstimate e =
        efficiency::EstimateSample(efficiency::FromGpuSample(s, node, ""));
    r->tflops = e.tflops;
    r->tflops_per_watt = e.tflops_per_watt;
    r->estimated_at = s.timestamp;
    for (SliceRow& x : row.slices) {
      if (x.ring == nullptr) continue;
      x.ring->node = node;
      x.ring->index = x.gpu->id.index;
      x.ring->name = x.gpu->id.name;
      x.ring->uuid = x.gpu->id.uuid;
      x.ring->mig = true;
      x.ring->mig_uuid = x.id;
      x.ring->mig_profile = x.latest->profile;
      x.ring->mig_slices = x.latest->slices;
    }
  }
}

void History::OnJobChanged(const server::Job& job) {
  std::lock_guard lock(mu_);
  OnJobChangedLocked(job);
}

void History::OnJobsChanged(std::span<const server::Job> jobs) {
  std::lock_guard lock(mu_);
  for (const server::Job& job : jobs) OnJobChangedLocked(job);
}

void History::OnJobChangedLocked(const server::Job& job) {
  const auto where = protocol::Assignments(job);  // a gang: every part
  const bool holds = !where.empty() && (job.state == server::JobState::kRunning ||
                                        job.state == server::JobState::kAssigned ||
                                        job.state == server::JobState::kCancelling);
  JobInfo& info = jobs_[job.id];
  // Forget what it held before (a requeued job may come back elsewhere); a GPU another job was
  // set on since is that job's.
  ForgetHeld(info.gpus, job.id, [&](const std::pair<std::string, uint32_t>& key) -> int64_t* {
    auto n = holder_.find(key.first);
    return n == holder_.end() || key.second >= n->second.size() ? nullptr : &n->second[key.second];
  });
  mig_holder_.Forget(job.id);
  info.user = job.user;
  info.active = holds;
  if (holds) {
    for (const server::Assignment* a : where) {
      std::vector<int64_t>* on_node = nullptr;
      for (uint32_t g : a->gpu_indices) {
        if (g > protocol::limits::kGpuIndexMax) continue;  // past what an inventory may list
        if (on_node == nullptr) on_node = &holder_[a->node];
        if (on_node->size() <= g) on_node->resize(g + 1, 0);
        (*on_node)[g] = job.id;
        info.gpus.emplace_back(a->node, g);
      }
      if (!a->mig_uuid.empty()) mig_holder_.Set({a->node, a->mig_uuid}, job.id);
    }
  }
  // Jobs no longer seen are pruned when the table has grown past its bound, and then only once
  // it has doubled again: while every job in it is recent (100,000 queued), pruning on every
  // change walked the whole table each time.
  if (jobs_.size() > prune_at_) {
    int64_t newest = 0;
    for (const auto& [k, r] : rings_) {
      if (const Point* p = r.Last()) newest = std::max(newest, p->bucket);
    }
    PruneJobsLocked(newest - static_cast<int64_t>(capacity_));
    prune_at_ = std::max(JobsBound(), 2 * jobs_.size());
  }
}

int64_t History::HolderLocked(const std::string& node, uint32_t index) const {
  auto n = holder_.find(node);
  return n == holder_.end() || index >= n->second.size() ? 0 : n->second[index];
}

void History::PruneJobsLocked(int64_t oldest_bucket) {
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    const bool old = !it->second.active && it->second.last_bucket < oldest_bucket;
    it = old ? jobs_.erase(it) : std::next(it);
  }
}

void History::OnFragmentation(const server::Fragmentation& f, WallTime at) {
  std::lock_guard lock(mu_);
  FragPoint p{MsOf(at), f.fragmented_gpu_milli, f.free_gpu_milli, f.total_gpu_milli,
              f.typical_shapes};
  if (frag_.size() < kFragCapacity) {
    frag_.push_back(p);
  } else {
    frag_[frag_head_] = p;
    frag_head_ = (frag_head_ + 1) % frag_.size();
  }
}

json History::Gpus(const server::Principal& who, Duration window, int points,
                   const std::string& node, WallTime now) const {
  points = std::clamp(points, 1, kMaxPoints);
  const int64_t bucket_ms = Ms(opt_.bucket);
  const int64_t end_bucket = BucketOf(now);
  int64_t buckets = std::max<int64_t>(1, Ms(window) / bucket_ms);
  buckets = std::min<int64_t>(buckets, static_cast<int64_t>(capacity_));
  // Each column spans `per` buckets (at least one), so at most `points` columns come back.
  const int64_t per = (buckets + points - 1) / points;
  const int64_t columns = (buckets + per - 1) / per;
  const int64_t first_bucket = end_bucket - columns * per + 1;
  json out = {{"start_ms", first_bucket * bucket_ms},
              {"step_ms", per * bucket_ms},
              {"bucket_ms", bucket_ms},
              {"columns", columns},
              {"now_ms", MsOf(now)}};
  json gpus = json::array();
  std::lock_guard lock(mu_);
  out["dropped_gpus"] = dropped_gpus_;
  for (const auto& [key, r] : rings_) {
    if (!node.empty() && r.node != node) continue;
    struct Acc {
      int64_t util = 0, sm = 0, mem = 0, n = 0, sm_n = 0, job = 0;
    };
    std::vector<Acc> acc(static_cast<size_t>(columns));
    for (const Point& p : r.points) {
      if (p.bucket < first_bucket || p.bucket > end_bucket || p.count == 0) continue;
      Acc& a = acc[static_cast<size_t>((p.bucket - first_bucket) / per)];
      a.util += p.util_sum;
      a.mem += p.mem_sum;
      a.n += p.count;
      a.sm += p.sm_sum;
      a.sm_n += p.sm_count;
      if (p.job != 0) a.job = p.job;
    }
    json util = json::array(), sm = json::array(), mem = json::array(), job = json::array();
    for (const Acc& a : acc) {
      if (a.n == 0) {
        util.push_back(nullptr);
        sm.push_back(nullptr);
        mem.push_back(nullptr);
        job.push_back(0);
        continue;
      }
      util.push_back(static_cast<int>(std::lround(static_cast<double>(a.util) / a.n)));
      mem.push_back(static_cast<int>(std::lround(static_cast<double>(a.mem) / a.n)));
      if (a.sm_n > 0) {
        sm.push_back(static_cast<int>(std::lround(static_cast<double>(a.sm) / a.sm_n)));
      } else {
        sm.push_back(nullptr);
      }
      int64_t shown = a.job;
      if (shown != 0 && who.role != Role::kAdmin) {
        auto j = jobs_.find(shown);
        if (j == jobs_.end() || j->second.user != who.name) shown = -1;
      }
      job.push_back(shown);
    }
    json g = {{"node", r.node},        {"index", r.index},        {"name", r.name},
              {"mig", r.mig},          {"util", std::move(util)}, {"sm", std::move(sm)},
              {"mem", std::move(mem)}, {"job", std::move(job)}};
    if (r.mig_uuid.empty()) {
      const bool recent = BucketOf(r.estimated_at) >= first_bucket;
      auto opt = [&](const std::optional<double>& v) { return recent && v ? json(*v) : json(); };
      g["tflops_estimate"] = opt(r.tflops);
      g["tflops_per_watt_estimate"] = opt(r.tflops_per_watt);
    } else {
      g["util"] = g["sm"];  // NVML has no utilization per MIG instance
      g["mig_instance"] = {
          {"uuid", r.mig_uuid}, {"profile", r.mig_profile}, {"slices", r.mig_slices}};
    }
    gpus.push_back(std::move(g));
  }
  // Users learn the owner of their own jobs only; the jobs' users for admins.
  json owners = json::object();
  for (const auto& g : gpus) {
    for (const auto& j : g["job"]) {
      const int64_t id = j.get<int64_t>();
      if (id <= 0) continue;
      auto it = jobs_.find(id);
      if (it != jobs_.end()) owners[std::to_string(id)] = it->second.user;
    }
  }
  out["gpus"] = std::move(gpus);
  out["job_users"] = std::move(owners);
  return out;
}

json History::FragmentationSeries(Duration window, WallTime now) const {
  const int64_t from = MsOf(now) - Ms(window);
  std::lock_guard lock(mu_);
  json out = json::array();
  for (size_t i = 0; i < frag_.size(); ++i) {
    const FragPoint& p = frag_[(frag_head_ + i) % frag_.size()];
    if (p.ts_ms < from) continue;
    out.push_back({{"ts_ms", p.ts_ms},
                   {"fragmented_gpu_milli", p.fragmented_gpu_milli},
                   {"free_gpu_milli", p.free_gpu_milli},
                   {"total_gpu_milli", p.total_gpu_milli},
                   {"typical_shapes", p.typical_shapes}});
  }
  return out;
}

void History::AddRoutes(http::Router* router) {
  const std::set<Role> people = {Role::kAdmin, Role::kUser};
  router->Add(
      {"GET",
       "/history/gpus",
       people,
       Scope::kOwnJob,
       {QueryParam::DurationIn("window", std::chrono::minutes(1), std::chrono::hours(24),
                               "how far back from now (default 1h; cut to what is kept)"),
        QueryParam::Int("points", 1, kMaxPoints, "at most this many time columns (default 240)"),
        QueryParam::String("node", 128, "only this node's GPUs")},
       "Every GPU's (and MIG instance's) utilization, SM activity and memory use over time, in "
       "columns of equal length, with the job that held it (a user sees their own jobs; others' "
       "are -1)",
       [this](const RouteCall& c) {
         const Duration window = c.QueryDuration("window").value_or(std::chrono::hours(1));
         const std::string* node = c.Query("node");
         const WallTime now = clock_->WallNow();
         return http::JsonResponse(200,
                                   Gpus(c.who, window, static_cast<int>(c.QueryInt("points", 240)),
                                        node ? *node : "", now));
       }});
  router->Add({"GET",
               "/history/fragmentation",
               people,
               Scope::kNone,
               {QueryParam::DurationIn("window", std::chrono::minutes(1), std::chrono::hours(24),
                                       "how far back from now (default 24h)")},
               "The scheduler's fragmentation samples (FGD's measure, at most one a minute)",
               [this](const RouteCall& c) {
                 const Duration window = c.QueryDuration("window").value_or(std::chrono::hours(24));
                 return http::JsonResponse(200, FragmentationSeries(window, clock_->WallNow()));
               }});
}

json History::OpenApiPaths() const {
  const json gpu_series = {
      {"type", "object"},
      {"properties",
       {{"start_ms", {{"type", "integer"}}},
        {"step_ms", {{"type", "integer"}}},
        {"columns", {{"type", "integer"}}},
        {"gpus",
         {{"type", "array"},
          {"items",
           {{"type", "object"},
            {"properties",
             {{"node", {{"type", "string"}}},
              {"index", {{"type", "integer"}}},
              {"mig_instance",
               {{"type", "object"},
                {"description",
                 "a MIG instance's row (util is its SM activity): uuid, profile, slices"}}},
              {"util", {{"type", "array"}, {"items", {{"type", "integer"}, {"nullable", true}}}}},
              {"sm", {{"type", "array"}, {"items", {{"type", "integer"}, {"nullable", true}}}}},
              {"mem", {{"type", "array"}, {"items", {{"type", "integer"}, {"nullable", true}}}}},
              {"job", {{"type", "array"}, {"items", {{"type", "integer"}}}}}}}}}}},
        {"job_users", {{"type", "object"}}}}}};
  return {
      {"/history/gpus",
       {{"get",
         {{"responses",
           {{"200",
             {{"description", "GPU series"},
              {"content", {{"application/json", {{"schema", gpu_series}}}}}}}}}}}}},
      {"/history/fragmentation",
       {{"get",
         {{"responses", {{"200", {{"description", "fragmentation samples, oldest first"}}}}}}}}}};
}

}  // namespace stoker::web
