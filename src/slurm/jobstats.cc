#include "slurm/jobstats.h"

#include <openssl/evp.h>
#include <spdlog/spdlog.h>
#include <zlib.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/integer.h"

namespace stoker::slurm {
namespace {

constexpr std::string_view kPrefix = "JS1:";
constexpr size_t kMaxDecoded = size_t{1} << 20;

Result<std::string> Gzip(std::string_view in) {
  z_stream z{};
  // windowBits 15 + 16: a gzip wrapper, as the format wants.
  if (deflateInit2(&z, Z_BEST_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    return Internal("deflateInit2 failed");
  }
  std::string out(deflateBound(&z, in.size()) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  const size_t n = z.total_out;
  deflateEnd(&z);
  if (rc != Z_STREAM_END) return Internal("deflate did not finish");
  out.resize(n);
  return out;
}

Result<std::string> Gunzip(std::string_view in) {
  z_stream z{};
  if (inflateInit2(&z, 15 + 16) != Z_OK) return Internal("inflateInit2 failed");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  std::string out;
  char buf[16384];
  int rc = Z_OK;
  while (rc == Z_OK) {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    rc = inflate(&z, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) break;
    out.append(buf, sizeof buf - z.avail_out);
    if (out.size() > kMaxDecoded) {
      inflateEnd(&z);
      return InvalidArgument("JS1: decompressed summary exceeds 1 MiB");
    }
    if (rc == Z_OK && z.avail_in == 0 && z.avail_out != 0) break;  // truncated input
  }
  inflateEnd(&z);
  if (rc != Z_STREAM_END) return InvalidArgument("JS1: not a complete gzip stream");
  return out;
}

std::optional<std::string> Env(std::string_view block, std::string_view name) {
  size_t pos = 0;
  while (pos < block.size()) {
    size_t end = block.find('\0', pos);
    if (end == std::string_view::npos) end = block.size();
    std::string_view kv = block.substr(pos, end - pos);
    if (kv.size() > name.size() && kv.substr(0, name.size()) == name && kv[name.size()] == '=') {
      return std::string(kv.substr(name.size() + 1));
    }
    pos = end + 1;
  }
  return std::nullopt;
}

double Round(double v, int digits) {
  const double f = std::pow(10.0, digits);
  return std::round(v * f) / f;
}

}  // namespace

Result<std::string> EncodeJS1(const nlohmann::json& summary) {
  STOKER_ASSIGN_OR_RETURN(std::string gz, Gzip(summary.dump()));
  std::string b64(4 * ((gz.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(b64.data()),
                                reinterpret_cast<const unsigned char*>(gz.data()),
                                static_cast<int>(gz.size()));
  b64.resize(static_cast<size_t>(n));
  return std::string(kPrefix) + b64;
}

Result<nlohmann::json> DecodeJS1(std::string_view text) {
  if (!text.starts_with(kPrefix)) return InvalidArgument("JS1: missing the \"JS1:\" prefix");
  std::string_view b64 = text.substr(kPrefix.size());
  if (b64.size() % 4 != 0 || b64.size() > 4 * kMaxDecoded) {
    return InvalidArgument("JS1: base64 length " + std::to_string(b64.size()) + " is invalid");
  }
  std::string raw(b64.size() / 4 * 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(raw.data()),
                                reinterpret_cast<const unsigned char*>(b64.data()),
                                static_cast<int>(b64.size()));
  if (n < 0) return InvalidArgument("JS1: invalid base64");
  size_t len = static_cast<size_t>(n);
  // EVP_DecodeBlock counts padding as zero bytes.
  if (!b64.empty() && b64.back() == '=') --len;
  if (b64.size() >= 2 && b64[b64.size() - 2] == '=') --len;
  raw.resize(len);
  STOKER_ASSIGN_OR_RETURN(std::string json_text, Gunzip(raw));
  nlohmann::json j = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return InvalidArgument("JS1: payload is not a JSON object");
  return j;
}

void JobStatsCollector::Observe(const std::string& host, const GpuSample& s,
                                const std::vector<std::string>& holders) {
  std::vector<std::string> ids;
  for (const std::string& h : holders) {
    if (std::find(ids.begin(), ids.end(), h) == ids.end()) ids.push_back(h);
  }
  for (const GpuProcess& p : s.processes) {
    if (p.job.kind == JobRef::Kind::kSlurm && !p.job.id.empty() &&
        std::find(ids.begin(), ids.end(), p.job.id) == ids.end()) {
      ids.push_back(p.job.id);
    }
  }
  for (const std::string& id : ids) {
    Gpu& g = jobs_[id].hosts[host][s.id.index];
    if (s.memory_total_bytes.has_value()) g.total_memory = s.memory_total_bytes.value();
    if (s.memory_used_bytes.has_value()) {
      g.peak_memory = std::max(g.peak_memory, s.memory_used_bytes.value());
    }
    if (s.util_gpu_pct.has_value()) {
      g.util_sum += s.util_gpu_pct.value();
      ++g.util_n;
    }
    if (s.gpm.sm_active.has_value()) {
      g.sm_sum += s.gpm.sm_active.value();
      g.tensor_sum += s.gpm.tensor_active.value_or(0.0);
      ++g.gpm_n;
    }
    if (s.energy_mj.has_value()) {
      if (!g.energy_seen) g.energy_first_mj = s.energy_mj.value();
      g.energy_seen = true;
      g.energy_last_mj = std::max(g.energy_last_mj, s.energy_mj.value());
    }
  }
}

nlohmann::json JobStatsCollector::Summary(const SlurmJob& job, int64_t now_unix) const {
  nlohmann::json out = nlohmann::json::object();
  auto it = jobs_.find(std::to_string(job.id));
  if (it == jobs_.end()) return out;
  const int64_t end = job.end_time > 0 && job.end_time < now_unix ? job.end_time : now_unix;
  const int64_t elapsed = job.start_time > 0 && end > job.start_time ? end - job.start_time : 0;
  int gpus = 0;
  nlohmann::json nodes = nlohmann::json::object();
  for (const auto& [host, by_index] : it->second.hosts) {
    nlohmann::json n;
    n["cpus"] = job.cpus / std::max<int64_t>(1, static_cast<int64_t>(job.nodes.size()));
    for (const auto& [idx, g] : by_index) {
      const std::string k = std::to_string(idx);
      ++gpus;
      n["gpu_total_memory"][k] = g.total_memory;
      n["gpu_used_memory"][k] = g.peak_memory;
      n["gpu_utilization"][k] =
          g.util_n > 0 ? Round(static_cast<double>(g.util_sum) / static_cast<double>(g.util_n), 1)
                       : 0.0;
      if (g.gpm_n > 0) {
        n["gpu_sm_active"][k] = Round(100.0 * g.sm_sum / static_cast<double>(g.gpm_n), 1);
        n["gpu_tensor_active"][k] = Round(100.0 * g.tensor_sum / static_cast<double>(g.gpm_n), 1);
      }
      if (g.energy_seen) {
        n["gpu_energy_joules"][k] = (g.energy_last_mj - g.energy_first_mj) / 1000;
      }
    }
    nodes[host] = std::move(n);
  }
  out["gpus"] = gpus;
  out["total_time"] = elapsed;
  out["nodes"] = std::move(nodes);
  if (options_.price_per_gpu_hour > 0) {
    out["cost"] = Round(static_cast<double>(gpus) * static_cast<double>(elapsed) / 3600.0 *
                            options_.price_per_gpu_hour,
                        4);
    out["cost_currency"] = options_.currency;
  }
  return out;
}

int JobStatsCollector::Publish(SlurmClient& client, const std::vector<SlurmJob>& jobs,
                               int64_t now_unix) {
  int written = 0;
  std::map<std::string, Job> kept;
  for (const SlurmJob& j : jobs) {
    auto it = jobs_.find(std::to_string(j.id));
    if (it == jobs_.end()) continue;
    if (j.Running() && now_unix - it->second.last_published >= options_.publish_every_s) {
      auto text = EncodeJS1(Summary(j, now_unix));
      Status s = text.ok() ? client.SetAdminComment(j.id, *text) : text.status();
      if (s.ok()) {
        it->second.last_published = now_unix;
        ++written;
      } else {
        ++publish_errors_;
        spdlog::warn("slurm jobstats: summary of job {} not written: {}", j.id, s.ToString());
      }
    }
    if (j.Running() || j.state == "COMPLETING") kept[it->first] = std::move(it->second);
  }
  jobs_ = std::move(kept);
  return written;
}

Result<JobCompRecord> ParseJobCompEnv(std::string_view block) {
  JobCompRecord r;
  auto need = [&](std::string_view name) -> Result<std::string> {
    auto v = Env(block, name);
    if (!v) return InvalidArgument("jobcomp: " + std::string(name) + " is missing");
    return *v;
  };
  auto number = [&](std::string_view name, int64_t lo, int64_t hi) -> Result<int64_t> {
    STOKER_ASSIGN_OR_RETURN(std::string v, need(name));
    auto n = ParseInt(v, lo, hi);
    if (!n.ok())
      return InvalidArgument("jobcomp: " + std::string(name) + ": " + n.status().message());
    return n;
  };
  STOKER_ASSIGN_OR_RETURN(int64_t id, number("JOBID", 1, UINT32_MAX));
  r.job = static_cast<uint32_t>(id);
  STOKER_ASSIGN_OR_RETURN(int64_t uid, number("UID", 0, UINT32_MAX));
  r.uid = static_cast<uint32_t>(uid);
  STOKER_ASSIGN_OR_RETURN(r.start, number("START", 0, INT64_MAX));
  STOKER_ASSIGN_OR_RETURN(r.end, number("END", 0, INT64_MAX));
  STOKER_ASSIGN_OR_RETURN(r.state, need("JOBSTATE"));
  r.user = Env(block, "USERNAME").value_or("");
  r.partition = Env(block, "PARTITION").value_or("");
  auto hosts = ExpandHostList(Env(block, "NODES").value_or(""));
  if (!hosts.ok()) return hosts.status().WithContext("jobcomp: NODES");
  r.nodes = std::move(hosts).value();
  return r;
}

std::vector<JobCompRecord> ReadJobCompSpool(const std::string& dir, int* bad) {
  std::vector<JobCompRecord> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::filesystem::path& p = entry.path();
    if (p.extension() != ".env" || !entry.is_regular_file(ec)) continue;
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string block = ss.str();
    auto r = block.size() > (1 << 20) ? Result<JobCompRecord>(InvalidArgument("jobcomp: too large"))
                                      : ParseJobCompEnv(block);
    if (r.ok()) {
      out.push_back(std::move(r).value());
      std::filesystem::remove(p, ec);
    } else {
      if (bad != nullptr) ++*bad;
      spdlog::error("slurm jobcomp: {}: {}", p.string(), r.status().ToString());
      std::filesystem::rename(p, p.string() + ".bad", ec);
    }
  }
  std::sort(out.begin(), out.end(),
            [](const JobCompRecord& a, const JobCompRecord& b) { return a.job < b.job; });
  return out;
}

double JobCost(const JobCompRecord& r, int32_t gpus, double price_per_gpu_hour) {
  return static_cast<double>(gpus) * static_cast<double>(r.elapsed_s()) / 3600.0 *
         price_per_gpu_hour;
}

}  // namespace stoker::slurm
