#include "scheduler/cluster.h"

#include <algorithm>
#include <atomic>
#include <string>
#include <utility>

#include "core/huge_pages.h"

namespace stoker::scheduler {
namespace {

std::atomic<uint64_t> g_next_version{1};
uint64_t NextVersion() { return g_next_version.fetch_add(1, std::memory_order_relaxed); }

}  // namespace

ClusterState::HistoryId::HistoryId() : id(NextVersion()) {}
ClusterState::HistoryId& ClusterState::HistoryId::operator=(const HistoryId&) {
  id = NextVersion();
  return *this;
}

void ClusterState::Journal(int32_t node) {
  // Bounded: drop the older half when full (readers that far behind rebuild their index).
  if (journal_.size() >= 2 * kJournalKeep) {
    journal_.erase(journal_.begin(), journal_.begin() + static_cast<std::ptrdiff_t>(kJournalKeep));
    journal_base_ += kJournalKeep;
  }
  journal_.push_back(node);
}

int32_t ClusterState::Adopt(const ClusterState& fresh) {
  bool same = specs_ == fresh.specs_ && be_cap_permille_ == fresh.be_cap_permille_ &&
              models_.size() == fresh.models_.size();
  for (int m = 0; same && m < models_.size(); ++m) {
    const auto id = static_cast<GpuModelId>(m);
    same = models_.Name(id) == fresh.models_.Name(id);
  }
  if (!same) {
    *this = fresh;  // a new history (HistoryId's assignment)
    return num_nodes();
  }
  // The same specs give the same totals, maxima and shapes; only the free state differs.
  int32_t copied = 0;
  for (int32_t i = 0; i < num_nodes(); ++i) {
    NodeState want = fresh.nodes_[i];
    want.version = nodes_[i].version;
    if (want == nodes_[i]) continue;
    nodes_[i] = fresh.nodes_[i];  // fresh's version: drawn once, so no cached score matches it
    Journal(i);
    ++copied;
  }
  allocated_cpu_milli_ = fresh.allocated_cpu_milli_;
  allocated_memory_mib_ = fresh.allocated_memory_mib_;
  allocated_gpu_milli_ = fresh.allocated_gpu_milli_;
  return copied;
}

void ClusterState::Swap(ClusterState& other) noexcept {
  using std::swap;
  swap(models_, other.models_);
  swap(specs_, other.specs_);
  swap(nodes_, other.nodes_);
  swap(shapes_, other.shapes_);
  swap(be_cap_permille_, other.be_cap_permille_);
  swap(total_cpu_milli_, other.total_cpu_milli_);
  swap(total_memory_mib_, other.total_memory_mib_);
  swap(total_gpu_milli_, other.total_gpu_milli_);
  swap(total_gpus_, other.total_gpus_);
  swap(allocated_cpu_milli_, other.allocated_cpu_milli_);
  swap(allocated_memory_mib_, other.allocated_memory_mib_);
  swap(allocated_gpu_milli_, other.allocated_gpu_milli_);
  swap(max_cpu_milli_, other.max_cpu_milli_);
  swap(max_memory_mib_, other.max_memory_mib_);
  swap(max_gpus_, other.max_gpus_);
  swap(history_.id, other.history_.id);
  swap(journal_, other.journal_);
  swap(journal_base_, other.journal_base_);
}

int GpuClassOf(const Placement& p) {
  if (p.num_gpus == 0) return -1;
  if (p.num_gpus == 1 && p.gpus[0].milli < kMilliPerGpu) return 0;
  return p.num_gpus;
}

int GpuClassOf(const Request& r) {
  if (r.num_gpu == 0) return -1;
  if (r.IsMig() || r.IsGpuShare()) return 0;
  return r.num_gpu;
}

int64_t Placement::TotalGpuMilli() const {
  int64_t sum = 0;
  for (int i = 0; i < num_gpus; ++i) sum += gpus[i].milli + MigSlicesToMilli(gpus[i].mig_slices);
  return sum;
}

void ClusterState::Reserve(size_t nodes) {
  specs_.reserve(nodes);
  nodes_.reserve(nodes);
  AdviseHugePagesFor(specs_);
  AdviseHugePagesFor(nodes_);
}

Result<int32_t> ClusterState::AddNode(const NodeSpec& s) {
  auto bad = [&](const std::string& what) {
    return InvalidArgument("node '" + s.name + "': " + what);
  };
  if (s.cpu_milli < 0) return bad("cpu_milli: negative");
  if (s.memory_mib < 0) return bad("memory_mib: negative");
  if (s.num_gpus < 0 || s.num_gpus > kMaxGpusPerNode) {
    return bad("gpus: must be 0.." + std::to_string(kMaxGpusPerNode));
  }
  if (s.num_gpus > 0 && s.gpu_model >= models_.size()) return bad("gpu model id not interned");
  if (s.gpu_memory_mib < 0) return bad("gpu_memory_mib: negative");
  NodeState n;
  n.free_cpu_milli = s.cpu_milli;
  n.free_memory_mib = s.memory_mib;
  n.num_gpus = static_cast<uint8_t>(s.num_gpus);
  n.full_free_gpus = n.num_gpus;
  n.gpu_model = s.gpu_model;
  for (int g = 0; g < s.num_gpus; ++g) {
    n.gpu_free_milli[g] = kMilliPerGpu;
    n.gpu_free_slices[g] = s.mig_enabled ? kMigSlicesPerGpu : 0;
  }
  n.free_gpu_milli = s.num_gpus * kMilliPerGpu;
  n.version = NextVersion();
  specs_.push_back(s);
  nodes_.push_back(n);
  history_ = HistoryId();
  total_cpu_milli_ += s.cpu_milli;
  total_memory_mib_ += s.memory_mib;
  total_gpu_milli_ += static_cast<int64_t>(s.num_gpus) * kMilliPerGpu;
  total_gpus_ += s.num_gpus;
  max_cpu_milli_ = std::max(max_cpu_milli_, s.cpu_milli);
  max_memory_mib_ = std::max(max_memory_mib_, s.memory_mib);
  max_gpus_ = std::max(max_gpus_, s.num_gpus);
  Shape shape{s.cpu_milli,
              s.memory_mib,
              s.gpu_memory_mib,
              s.num_gpus,
              s.num_gpus > 0 ? s.gpu_model : GpuModelId{0},
              s.mig_enabled};
  if (std::find(shapes_.begin(), shapes_.end(), shape) == shapes_.end()) shapes_.push_back(shape);
  return static_cast<int32_t>(specs_.size() - 1);
}

Status ClusterState::SetBestEffortOversubscription(int32_t cap_permille) {
  if (cap_permille < 1000 || cap_permille > 1500) {
    return InvalidArgument(
        "best-effort oversubscription must be 1000..1500 permille (1:1..1.5:1), got " +
        std::to_string(cap_permille));
  }
  be_cap_permille_ = cap_permille;
  history_ = HistoryId();  // Fits() changes for best-effort requests everywhere
  return Status::Ok();
}

bool ClusterState::CouldEverFit(int32_t node, const Request& r) const {
  const NodeSpec& s = specs_[node];
  if (r.cpu_milli > CpuLimit(node, r.best_effort)) return false;
  if (r.memory_mib > MemoryLimit(node, r.best_effort)) return false;
  return detail::StaticGpuMatch(s.num_gpus, s.gpu_model, s.gpu_memory_mib, s.mig_enabled, r);
}

bool ClusterState::AnyNodeCouldEverFit(const Request& r) const {
  const int64_t permille = r.best_effort ? be_cap_permille_ : 1000;
  for (const Shape& s : shapes_) {
    if (r.cpu_milli > s.cpu_milli * permille / 1000) continue;
    if (r.memory_mib > s.memory_mib * permille / 1000) continue;
    if (detail::StaticGpuMatch(s.num_gpus, s.model, s.gpu_memory_mib, s.mig, r)) return true;
  }
  return false;
}

Status ClusterState::SetMeasuredBusy(int32_t node, int gpu, int32_t busy_milli) {
  if (node < 0 || node >= num_nodes()) {
    return InvalidArgument("measured use: node " + std::to_string(node) + " does not exist");
  }
  NodeState& n = nodes_[node];
  if (gpu < 0 || gpu >= n.num_gpus) return InvalidArgument("measured use: GPU out of range");
  if (specs_[node].mig_enabled) return InvalidArgument("measured use: MIG GPUs are not measured");
  if (busy_milli < 0 || busy_milli > kMilliPerGpu) {
    return InvalidArgument("measured use: must be 0..1000 milli, got " +
                           std::to_string(busy_milli));
  }
  n.measured_gpus = static_cast<uint8_t>(n.measured_gpus | (1u << gpu));
  n.gpu_busy_milli[gpu] = static_cast<int16_t>(busy_milli);
  n.gpu_busy_base_milli[gpu] = static_cast<int16_t>(kMilliPerGpu - n.gpu_free_milli[gpu]);
  n.version = NextVersion();
  Journal(node);
  return Status::Ok();
}

Status ClusterState::Allocate(const Placement& p) {
  if (p.node < 0 || p.node >= num_nodes()) {
    return InvalidArgument("placement: node " + std::to_string(p.node) + " does not exist");
  }
  if (p.cpu_milli < 0 || p.memory_mib < 0) return InvalidArgument("placement: negative amount");
  NodeState& n = nodes_[p.node];
  const NodeSpec& s = specs_[p.node];
  if (s.cpu_milli - n.free_cpu_milli + p.cpu_milli > CpuLimit(p.node, p.best_effort)) {
    return FailedPrecondition("placement: not enough CPU on node " + s.name);
  }
  if (s.memory_mib - n.free_memory_mib + p.memory_mib > MemoryLimit(p.node, p.best_effort)) {
    return FailedPrecondition("placement: not enough memory on node " + s.name);
  }
  if (p.num_gpus > n.num_gpus) return FailedPrecondition("placement: too many GPUs on " + s.name);
  // Validate every GPU before touching anything, so a failed Allocate changes nothing.
  std::array<int32_t, kMaxGpusPerNode> take_milli{};
  std::array<int32_t, kMaxGpusPerNode> take_slices{};
  for (int i = 0; i < p.num_gpus; ++i) {
    const GpuShare& g = p.gpus[i];
    if (g.gpu >= n.num_gpus) return InvalidArgument("placement: GPU index out of range");
    if (g.milli < 0 || g.milli > kMilliPerGpu) return InvalidArgument("placement: bad GPU milli");
    if ((g.mig_slices > 0) != s.mig_enabled || (s.mig_enabled && g.milli != 0)) {
      return InvalidArgument("placement: MIG use does not match node " + s.name);
    }
    take_milli[g.gpu] += g.milli;
    take_slices[g.gpu] += g.mig_slices;
  }
  for (int g = 0; g < n.num_gpus; ++g) {
    if (s.mig_enabled ? take_slices[g] > n.gpu_free_slices[g]
                      : take_milli[g] > n.gpu_free_milli[g]) {
      return FailedPrecondition("placement: GPU " + std::to_string(g) + " of node " + s.name +
                                " has not enough free capacity");
    }
  }
  for (int g = 0; g < n.num_gpus; ++g) {
    if (take_milli[g] == 0 && take_slices[g] == 0) continue;
    const int32_t before = n.gpu_free_milli[g];
    if (before == kMilliPerGpu) --n.full_free_gpus;
    if (s.mig_enabled) {
      n.gpu_free_slices[g] = static_cast<uint8_t>(n.gpu_free_slices[g] - take_slices[g]);
      n.gpu_free_milli[g] = static_cast<int16_t>(MigSlicesToMilli(n.gpu_free_slices[g]));
    } else {
      n.gpu_free_milli[g] = static_cast<int16_t>(before - take_milli[g]);
    }
    const int32_t delta = before - n.gpu_free_milli[g];
    n.free_gpu_milli -= delta;
    allocated_gpu_milli_ += delta;
  }
  n.free_cpu_milli -= p.cpu_milli;
  n.free_memory_mib -= p.memory_mib;
  allocated_cpu_milli_ += p.cpu_milli;
  allocated_memory_mib_ += p.memory_mib;
  if (n.pods < 255) ++n.pods;
  if (const int c = GpuClassOf(p); c >= 0) ++n.class_pods[c];
  n.version = NextVersion();
  Journal(p.node);
  return Status::Ok();
}

Status ClusterState::Release(const Placement& p) {
  if (p.node < 0 || p.node >= num_nodes()) {
    return InvalidArgument("release: node " + std::to_string(p.node) + " does not exist");
  }
  NodeState& n = nodes_[p.node];
  const NodeSpec& s = specs_[p.node];
  if (n.free_cpu_milli + p.cpu_milli > s.cpu_milli ||
      n.free_memory_mib + p.memory_mib > s.memory_mib) {
    return FailedPrecondition("release: more CPU/memory than allocated on node " + s.name);
  }
  std::array<int32_t, kMaxGpusPerNode> give_milli{};
  std::array<int32_t, kMaxGpusPerNode> give_slices{};
  for (int i = 0; i < p.num_gpus; ++i) {
    const GpuShare& g = p.gpus[i];
    if (g.gpu >= n.num_gpus) return InvalidArgument("release: GPU index out of range");
    give_milli[g.gpu] += g.milli;
    give_slices[g.gpu] += g.mig_slices;
  }
  for (int g = 0; g < n.num_gpus; ++g) {
    if (s.mig_enabled ? n.gpu_free_slices[g] + give_slices[g] > kMigSlicesPerGpu
                      : n.gpu_free_milli[g] + give_milli[g] > kMilliPerGpu) {
      return FailedPrecondition("release: GPU " + std::to_string(g) + " of node " + s.name +
                                " would exceed its capacity (double release?)");
    }
  }
  for (int g = 0; g < n.num_gpus; ++g) {
    if (give_milli[g] == 0 && give_slices[g] == 0) continue;
    const int32_t before = n.gpu_free_milli[g];
    if (s.mig_enabled) {
      n.gpu_free_slices[g] = static_cast<uint8_t>(n.gpu_free_slices[g] + give_slices[g]);
      n.gpu_free_milli[g] = static_cast<int16_t>(MigSlicesToMilli(n.gpu_free_slices[g]));
    } else {
      n.gpu_free_milli[g] = static_cast<int16_t>(before + give_milli[g]);
    }
    if (n.gpu_free_milli[g] == kMilliPerGpu) ++n.full_free_gpus;
    const int32_t delta = n.gpu_free_milli[g] - before;
    n.free_gpu_milli += delta;
    allocated_gpu_milli_ -= delta;
  }
  n.free_cpu_milli += p.cpu_milli;
  n.free_memory_mib += p.memory_mib;
  allocated_cpu_milli_ -= p.cpu_milli;
  allocated_memory_mib_ -= p.memory_mib;
  if (n.pods > 0 && n.pods < 255) --n.pods;
  if (const int c = GpuClassOf(p); c >= 0 && n.class_pods[c] > 0) --n.class_pods[c];
  n.version = NextVersion();
  Journal(p.node);
  return Status::Ok();
}

}  // namespace stoker::scheduler
