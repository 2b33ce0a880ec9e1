// stoker-loadgen: an HTTP load generator for the Stoker server on loopback.
//
// Mode `agents`: registers N simulated nodes (an agent token each, 8 GPUs each), then every
// node reports on its own keep-alive connection with a real agent's samples (the "gpus" of
// `stoker smi --json`), while a few user connections list jobs and submit jobs at a fixed rate.
// In the compact form (the default) a node reports every interval its server's reply directs,
// with one tick of samples for every second since its previous report, as `stoker agent` does;
// in the full form (agents before it) it sends its latest samples every --period. Reports
// p50/p95/p99/max latency per request kind.
// Mode `submit`: C keep-alive connections submit jobs back to back (closed loop); reports the
// rate of acknowledged (201, durable) submissions and their latency.
//
// One thread drives every connection with epoll, so the generator takes little of the CPU the
// server needs when both share a small machine. Latency is measured from the moment a request
// was due (not when it was sent), so a generator or server that falls behind shows it.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <queue>
#include <sstream>
#include <string>
#include <vector>

#include "protocol/model.h"
#include "protocol/samples.h"

namespace {

using json = nlohmann::json;
using SteadyClock = std::chrono::steady_clock;
using TimePoint = SteadyClock::time_point;

struct Options {
  std::string mode = "agents";
  std::string host = "127.0.0.1";
  int port = 8470;
  std::string admin_token;
  std::string samples_file;
  int agents = 1000;
  double period_s = 1.0;
  std::string form = "compact";
  double duration_s = 60;
  double warmup_s = 10;
  int user_conns = 4;
  double user_rate = 20;  // user requests per second over all user connections
  int submit_conns = 32;
  std::string node_prefix = "load-node-";
  bool json_out = false;
  bool timeline = false;
  int server_pid = 0;  // > 0: the server's CPU over the measured window is reported
};

[[noreturn]] void Die(const std::string& msg) {
  std::fprintf(stderr, "stoker-loadgen: %s\n", msg.c_str());
  std::exit(2);
}

// Latencies in microseconds of one request kind.
struct Series {
  std::vector<uint32_t> us;
  int64_t errors = 0;
  std::map<int, int64_t> statuses;

  double Pct(double p) const {
    if (us.empty()) return 0;
    std::vector<uint32_t> s = us;
    const size_t k = std::min(s.size() - 1, static_cast<size_t>(p * static_cast<double>(s.size())));
    std::nth_element(s.begin(), s.begin() + static_cast<ptrdiff_t>(k), s.end());
    return s[k] / 1000.0;
  }
  double Max() const { return us.empty() ? 0 : *std::max_element(us.begin(), us.end()) / 1000.0; }
};

struct Response {
  int status = 0;
  std::string body;
};

// One keep-alive HTTP/1.1 connection, driven by the event loop.
struct Conn {
  int fd = -1;
  bool connected = false;
  std::string out;
  size_t out_off = 0;
  std::string in;
  bool busy = false;
  TimePoint due{};  // when the current request was due (latency origin)
  std::function<void(const Response&, double ms)> on_done;
  std::function<void()> on_error;
};

class Loop {
 public:
  Loop(std::string host, int port) : host_(std::move(host)), port_(port) {
    ep_ = epoll_create1(EPOLL_CLOEXEC);
    if (ep_ < 0) Die(std::string("epoll_create1: ") + std::strerror(errno));
  }

  size_t NewConn() {
    conns_.emplace_back();
    return conns_.size() - 1;
  }
  Conn& conn(size_t i) { return conns_[i]; }

  // Sends a request on connection `i` (connecting first if needed). `due`: latency origin.
  void Send(size_t i, const std::string& method, const std::string& path, const std::string& token,
            const std::string& body, TimePoint due,
            std::function<void(const Response&, double)> done, std::function<void()> error) {
    Conn& c = conns_[i];
    c.out.clear();
    c.out += method + " " + path + " HTTP/1.1\r\nHost: " + host_ +
             "\r\nConnection: keep-alive\r\nContent-Type: application/json\r\n";
    if (!token.empty()) c.out += "Authorization: Bearer " + token + "\r\n";
    c.out += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n";
    c.out += body;
    c.out_off = 0;
    c.in.clear();
    c.busy = true;
    c.due = due;
    c.on_done = std::move(done);
    c.on_error = std::move(error);
    if (c.fd < 0) {
      Connect(i);
    } else {
      Flush(i);
    }
  }

  // Runs timers and I/O until `until` or until `stop()` returns true.
  void Run(TimePoint until, const std::function<bool()>& stop = nullptr) {
    epoll_event evs[256];
    while (SteadyClock::now() < until && !(stop && stop())) {
      // Sleep until the next timer, to the microsecond: a timeout in whole milliseconds,
      // rounded down, spins whenever the next report is due within the millisecond (at 1,000
      // reports a second, nearly always), and the generator takes the core the server needs.
      SteadyClock::duration wait = std::chrono::milliseconds(50);
      if (!timers_.empty()) {
        wait = std::clamp<SteadyClock::duration>(timers_.top().at - SteadyClock::now(),
                                                 SteadyClock::duration::zero(), wait);
      }
      const auto us = std::chrono::duration_cast<std::chrono::microseconds>(wait).count();
      const timespec timeout{.tv_sec = 0, .tv_nsec = static_cast<long>(us) * 1000};
      int n = epoll_pwait2(ep_, evs, 256, &timeout, nullptr);
      if (n < 0 && errno == ENOSYS) {  // a kernel before 5.11: whole milliseconds, rounded up
        n = epoll_wait(ep_, evs, 256, static_cast<int>((us + 999) / 1000));
      }
      for (int k = 0; k < n; ++k) {
        const size_t i = evs[k].data.u64;
        if (evs[k].events & (EPOLLERR | EPOLLHUP)) {
          Fail(i);
          continue;
        }
        if (evs[k].events & EPOLLOUT) OnWritable(i);
        if (evs[k].events & EPOLLIN) OnReadable(i);
      }
      const TimePoint now = SteadyClock::now();
      while (!timers_.empty() && timers_.top().at <= now) {
        Timer t = timers_.top();
        timers_.pop();
        t.fn();
      }
    }
  }

  void At(TimePoint at, std::function<void()> fn) {
    timers_.push(Timer{at, seq_++, std::move(fn)});
  }

 private:
  struct Timer {
    TimePoint at;
    uint64_t seq;
    std::function<void()> fn;
    bool operator<(const Timer& o) const { return at != o.at ? at > o.at : seq > o.seq; }
  };

  void Connect(size_t i) {
    Conn& c = conns_[i];
    c.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c.fd < 0) Die(std::string("socket: ") + std::strerror(errno) + " (raise ulimit -n?)");
    int one = 1;
    ::setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port_));
    if (::inet_pton(AF_INET, host_.c_str(), &addr.sin_addr) != 1)
      Die("host: not an IPv4 address: " + host_);
    c.connected = false;
    const int r = ::connect(c.fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    if (r != 0 && errno != EINPROGRESS) {
      Fail(i);
      return;
    }
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLOUT;
    ev.data.u64 = i;
    epoll_ctl(ep_, EPOLL_CTL_ADD, c.fd, &ev);
  }

  void Close(size_t i) {
    Conn& c = conns_[i];
    if (c.fd >= 0) {
      epoll_ctl(ep_, EPOLL_CTL_DEL, c.fd, nullptr);
      ::close(c.fd);
    }
    c.fd = -1;
    c.connected = false;
  }

  void Fail(size_t i) {
    Conn& c = conns_[i];
    const bool busy = c.busy;
    Close(i);
    c.busy = false;
    if (busy && c.on_error) {
      auto cb = std::move(c.on_error);
      cb();
    }
  }

  void OnWritable(size_t i) {
    Conn& c = conns_[i];
    if (!c.connected) {
      int err = 0;
      socklen_t len = sizeof(err);
      getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) {
        Fail(i);
        return;
      }
      c.connected = true;
    }
    Flush(i);
  }

  void Flush(size_t i) {
    Conn& c = conns_[i];
    if (!c.connected) return;
    while (c.out_off < c.out.size()) {
      const ssize_t w =
          ::send(c.fd, c.out.data() + c.out_off, c.out.size() - c.out_off, MSG_NOSIGNAL);
      if (w < 0) {
        if (errno == EAGAIN) break;
        Fail(i);
        return;
      }
      c.out_off += static_cast<size_t>(w);
    }
    epoll_event ev{};
    ev.events = EPOLLIN | (c.out_off < c.out.size() ? EPOLLOUT : 0u);
    ev.data.u64 = i;
    epoll_ctl(ep_, EPOLL_CTL_MOD, c.fd, &ev);
  }

  void OnReadable(size_t i) {
    Conn& c = conns_[i];
    char buf[16384];
    while (true) {
      const ssize_t r = ::recv(c.fd, buf, sizeof(buf), 0);
      if (r > 0) {
        c.in.append(buf, static_cast<size_t>(r));
        continue;
      }
      if (r == 0) {  // closed by the server (keep-alive limit or error)
        Fail(i);
        return;
      }
      if (errno == EAGAIN) break;
      Fail(i);
      return;
    }
    if (!c.busy) return;
    const size_t hdr_end = c.in.find("\r\n\r\n");
    if (hdr_end == std::string::npos) return;
    std::string head = c.in.substr(0, hdr_end);
    std::string lower = head;
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char ch) { return std::tolower(ch); });
    size_t length = 0;
    if (auto p = lower.find("content-length:"); p != std::string::npos) {
      length = std::strtoul(lower.c_str() + p + 15, nullptr, 10);
    }
    if (c.in.size() < hdr_end + 4 + length) return;
    Response resp;
    if (head.size() > 12) resp.status = std::atoi(head.c_str() + 9);
    resp.body = c.in.substr(hdr_end + 4, length);
    const bool close = lower.find("connection: close") != std::string::npos;
    const double ms = std::chrono::duration<double, std::milli>(SteadyClock::now() - c.due).count();
    c.busy = false;
    c.in.clear();
    if (close) Close(i);
    auto cb = std::move(c.on_done);
    cb(resp, ms);
  }

  std::string host_;
  int port_;
  int ep_;
  std::deque<Conn> conns_;
  std::priority_queue<Timer> timers_;
  uint64_t seq_ = 0;
};

// A one-shot request (setup): runs the loop until done.
Response Call(Loop& loop, size_t conn, const std::string& method, const std::string& path,
              const std::string& token, const std::string& body) {
  Response out;
  bool done = false;
  // The server closes a keep-alive connection after a number of requests: retry on a new one.
  for (int attempt = 0; attempt < 3 && out.status == 0; ++attempt) {
    done = false;
    loop.Send(
        conn, method, path, token, body, SteadyClock::now(),
        [&](const Response& r, double) {
          out = r;
          done = true;
        },
        [&] { done = true; });
    loop.Run(SteadyClock::now() + std::chrono::seconds(30), [&] { return done; });
  }
  if (out.status == 0) Die(method + " " + path + ": no answer from the server");
  return out;
}

json Inventory(const std::string& name) {
  json gpus = json::array();
  for (int g = 0; g < 8; ++g) {
    gpus.push_back({{"index", g},
                    {"uuid", "GPU-" + name + "-" + std::to_string(g)},
                    {"model", "NVIDIA H100 80GB HBM3"},
                    {"memory_mib", 81559},
                    {"mig_enabled", false},
                    {"mig", json::array()}});
  }
  return {{"name", name},        {"simulated", true},     {"source", "stoker-loadgen"},
          {"cpu_milli", 192000}, {"memory_mib", 2 << 20}, {"gpus", gpus}};
}

std::string SubmitBody(int i) {
  // Mixed shapes like a real queue: CPU-only, shares and whole GPUs. Long sleeps: the load
  // generator's nodes never run them; they only have to be accepted durably.
  json spec = {{"command", {"sleep", "3600"}}, {"name", "load-" + std::to_string(i)}};
  switch (i % 4) {
    case 0:
      spec["gpus"] = 1;
      break;
    case 1:
      spec["gpu_milli"] = 250;
      break;
    case 2:
      spec["gpus"] = 2;
      break;
    default:
      break;
  }
  return spec.dump();
}

void Report(const std::string& title, const std::map<std::string, Series>& series, double seconds,
            bool as_json) {
  json out = {{"run", title}, {"seconds", seconds}, {"kinds", json::object()}};
  for (const auto& [kind, s] : series) {
    json st = json::object();
    for (const auto& [code, n] : s.statuses) st[std::to_string(code)] = n;
    out["kinds"][kind] = {
        {"requests", s.us.size()}, {"per_second", static_cast<double>(s.us.size()) / seconds},
        {"errors", s.errors},      {"status", st},
        {"p50_ms", s.Pct(0.50)},   {"p95_ms", s.Pct(0.95)},
        {"p99_ms", s.Pct(0.99)},   {"max_ms", s.Max()}};
  }
  if (as_json) {
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  std::printf("%s over %.1f s\n", title.c_str(), seconds);
  std::printf("%-12s %9s %9s %7s %9s %9s %9s %9s\n", "kind", "requests", "per_s", "errors",
              "p50_ms", "p95_ms", "p99_ms", "max_ms");
  for (const auto& [kind, s] : series) {
    std::string codes;
    for (const auto& [code, n] : s.statuses)
      codes += " " + std::to_string(code) + "x" + std::to_string(n);
    std::printf("%-12s %9zu %9.1f %7lld %9.2f %9.2f %9.2f %9.2f  HTTP%s\n", kind.c_str(),
                s.us.size(), static_cast<double>(s.us.size()) / seconds,
                static_cast<long long>(s.errors), s.Pct(0.50), s.Pct(0.95), s.Pct(0.99), s.Max(),
                codes.c_str());
  }
}

std::string CreateToken(Loop& loop, size_t conn, const Options& o, const std::string& role,
                        const std::string& name) {
  Response r = Call(loop, conn, "POST", "/api/v1/tokens", o.admin_token,
                    json{{"role", role}, {"name", name}}.dump());
  if (r.status != 201)
    Die("create " + role + " token " + name + ": HTTP " + std::to_string(r.status) + " " + r.body);
  return json::parse(r.body).at("token").get<std::string>();
}

// CPU seconds (user + system) a process has used: /proc/PID/stat's utime and stime; -1 when it
// cannot be read.
double ProcessCpuSeconds(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream fields(text.substr(close + 2));
  std::string f;
  unsigned long long utime = 0, stime = 0;
  // After "(comm) ": state is field 3; utime and stime are fields 14 and 15.
  for (int i = 3; i <= 15 && fields >> f; ++i) {
    if (i == 14) utime = std::stoull(f);
    if (i == 15) stime = std::stoull(f);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// CPU over the measured window: the generator's own and, with --server-pid, the server's.
struct WindowCpu {
  double self_s = 0, server_s = -1;
};

// Runs the loop through the warm-up (from `start`), then sets *measuring and runs the measured
// window; returns its length in seconds.
double WarmUpThenMeasure(Loop& loop, TimePoint start, const Options& o, bool* measuring,
                         WindowCpu* cpu = nullptr) {
  const auto seconds = [](double s) {
    return std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(s));
  };
  loop.Run(start + seconds(o.warmup_s));
  *measuring = true;
  const double self0 = ProcessCpuSeconds(::getpid());
  const double server0 = o.server_pid > 0 ? ProcessCpuSeconds(o.server_pid) : -1;
  const TimePoint m0 = SteadyClock::now();
  loop.Run(m0 + seconds(o.duration_s));
  if (cpu != nullptr) {
    cpu->self_s = ProcessCpuSeconds(::getpid()) - self0;
    if (server0 >= 0) cpu->server_s = ProcessCpuSeconds(o.server_pid) - server0;
  }
  return std::chrono::duration<double>(SteadyClock::now() - m0).count();
}

// Per second of the measured window (by due time): heartbeats due, their p99 and slowest
// latency, and how many took over 20 ms.
void PrintTimeline(std::vector<std::pair<TimePoint, uint32_t>> beats) {
  if (beats.empty()) return;
  std::sort(beats.begin(), beats.end());
  const TimePoint first = beats.front().first;
  const auto second_of = [&](size_t i) {
    return std::chrono::duration_cast<std::chrono::seconds>(beats[i].first - first).count();
  };
  std::printf("%6s %8s %9s %9s %9s\n", "second", "due", "p99_ms", "max_ms", "over_20ms");
  for (size_t i = 0; i < beats.size();) {
    const int64_t second = second_of(i);
    Series s;
    for (; i < beats.size() && second_of(i) == second; ++i) s.us.push_back(beats[i].second);
    const auto over =
        std::count_if(s.us.begin(), s.us.end(), [](uint32_t us) { return us > 20000; });
    std::printf("%6lld %8zu %9.1f %9.1f %9lld\n", static_cast<long long>(second), s.us.size(),
                s.Pct(0.99), s.Max(), static_cast<long long>(over));
  }
}

int RunAgents(const Options& o) {
  std::ifstream in(o.samples_file);
  if (!in) Die("--samples: cannot read " + o.samples_file);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  json snap = json::parse(text, nullptr, false);
  if (snap.is_discarded() || !snap.contains("gpus")) {
    Die("--samples " + o.samples_file +
        ": expected `stoker smi --json` output with a \"gpus\" array");
  }
  const bool compact = o.form == "compact";
  const std::string hb_body = json{{"jobs", json::array()}, {"samples", snap["gpus"]}}.dump();
  // The compact form: one second of the 8 GPUs, written by the agent's codec, without identity
  // (the registered GPUs are the node's; the server fills their UUIDs in from the registration).
  auto parsed = stoker::protocol::ParseAgentSnapshot(text);
  if (!parsed.ok()) Die("--samples " + o.samples_file + ": " + parsed.status().ToString());
  const std::string tick_gpus = stoker::protocol::CompactGpusJson(parsed->gpus, false);
  // A report of `ticks` seconds ending now.
  auto compact_body = [&](int64_t ticks) {
    const auto now =
        std::chrono::time_point_cast<stoker::Duration>(std::chrono::system_clock::now());
    stoker::protocol::Heartbeat h;
    h.ticks_json = "[";
    for (int64_t k = ticks - 1; k >= 0; --k) {
      if (h.ticks_json.size() > 1) h.ticks_json += ',';
      h.ticks_json += stoker::protocol::CompactTickJson(
          stoker::WallTime(now.time_since_epoch() - std::chrono::seconds(k)), tick_gpus);
    }
    h.ticks_json += ']';
    return stoker::protocol::HeartbeatBody(h);
  };
  if (compact) {
    std::printf("compact form: %zu bytes a second of 8 GPUs (the full form's latest: %zu)\n",
                compact_body(1).size(), hb_body.size());
  }

  Loop loop(o.host, o.port);
  const size_t setup = loop.NewConn();
  std::printf("setup: %d agent tokens and registrations (heartbeat body %zu bytes)\n", o.agents,
              hb_body.size());
  std::fflush(stdout);
  std::vector<std::string> names, tokens;
  for (int i = 0; i < o.agents; ++i) {
    names.push_back(o.node_prefix + std::to_string(i));
    tokens.push_back(CreateToken(loop, setup, o, "agent", names.back()));
    Response r = Call(loop, setup, "POST", "/api/v1/nodes/register", tokens.back(),
                      Inventory(names.back()).dump());
    if (r.status != 200)
      Die("register " + names.back() + ": HTTP " + std::to_string(r.status) + " " + r.body);
  }
  const std::string user_token = CreateToken(loop, setup, o, "user", "loaduser");

  std::map<std::string, Series> series;
  bool measuring = false;
  int64_t late = 0;
  // --timeline: each measured heartbeat's due time and latency, to see when slow ones happen.
  std::vector<std::pair<TimePoint, uint32_t>> beats_timed;
  auto record = [&](const std::string& kind, const Response& r, double ms) {
    if (!measuring) return;
    if (o.timeline && kind == "heartbeat") {
      beats_timed.emplace_back(
          SteadyClock::now() - std::chrono::microseconds(static_cast<int64_t>(ms * 1000)),
          static_cast<uint32_t>(ms * 1000));
    }
    Series& s = series[kind];
    s.us.push_back(static_cast<uint32_t>(ms * 1000));
    s.statuses[r.status]++;
  };
  auto error = [&](const std::string& kind) {
    if (measuring) series[kind].errors++;
  };

  const auto period =
      std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(o.period_s));
  const TimePoint t0 = SteadyClock::now();
  // Agents: spread evenly over the period, each on its own connection, on an absolute schedule.
  // The compact form: each node reports in its own slot of the interval its last reply directed
  // (report_interval_ms), anchored on the generator's start, as `stoker agent` anchors its slot
  // on the wall clock by its name's hash: agent a's slots are t0 + a/N of the interval + k
  // intervals. A report carries a second of samples for each second since the node's previous one.
  std::vector<size_t> agent_conn(o.agents);
  std::vector<SteadyClock::duration> interval(o.agents, period);
  std::vector<TimePoint> last_sent(o.agents);  // set with each agent's first report below
  const auto next_slot = [&](int a, TimePoint after) {
    const SteadyClock::duration every = interval[a];
    const TimePoint base = t0 + every * a / std::max(1, o.agents);
    if (after < base) return base;
    return base + every * ((after - base) / every + 1);
  };
  int64_t ticks_sent = 0;
  std::map<int64_t, int64_t> intervals_told;  // ms -> replies
  std::function<void(int, TimePoint)> beat = [&](int a, TimePoint due) {
    const size_t c = agent_conn[a];
    const TimePoint next = compact ? next_slot(a, due) : due + interval[a];
    loop.At(next, [&, a, next] { beat(a, next); });
    if (loop.conn(c).busy) {  // the previous heartbeat has not been answered: one is skipped
      if (measuring) ++late;
      return;
    }
    std::string body = hb_body;
    if (compact) {
      const auto ticks = std::max<int64_t>(
          1, std::llround(std::chrono::duration<double>(due - last_sent[a]).count()));
      last_sent[a] = due;
      body = compact_body(ticks);
      if (measuring) ticks_sent += ticks;
    }
    loop.Send(
        c, "POST", "/api/v1/nodes/" + names[a] + "/heartbeat", tokens[a], body, due,
        [&, a](const Response& r, double ms) {
          record("heartbeat", r, ms);
          if (!compact) return;
          // The reply's report_interval_ms (the server's direction), read without a JSON tree.
          const size_t at = r.body.find("\"report_interval_ms\":");
          if (at == std::string::npos) return;
          const int64_t told = std::atoll(r.body.c_str() + at + 21);
          if (told <= 0) return;
          if (measuring) intervals_told[told]++;
          // The reports after the one already scheduled fall in the new interval's slots.
          interval[a] = std::chrono::milliseconds(told);
        },
        [&] { error("heartbeat"); });
  };
  for (int a = 0; a < o.agents; ++a) {
    agent_conn[a] = loop.NewConn();
    const TimePoint first = t0 + period * a / std::max(1, o.agents);
    last_sent[a] = first - period;
    loop.At(first, [&, a, first] { beat(a, first); });
  }
  // Users: alternate GET /jobs (newest 50) and a submission, at user_rate in total.
  const auto user_gap = std::chrono::duration_cast<SteadyClock::duration>(
      std::chrono::duration<double>(o.user_conns / std::max(0.001, o.user_rate)));
  int submitted = 0;
  std::vector<size_t> user_conn(o.user_conns);
  for (size_t& c : user_conn) c = loop.NewConn();
  std::function<void(int, TimePoint, int)> user = [&](int u, TimePoint due, int k) {
    const size_t c = user_conn[u];
    loop.At(due + user_gap, [&, u, due, k] { user(u, due + user_gap, k + 1); });
    if (loop.conn(c).busy) {
      if (measuring) ++late;
      return;
    }
    if (k % 2 == 0) {
      loop.Send(
          c, "GET", "/api/v1/jobs?limit=50", user_token, "", due,
          [&](const Response& r, double ms) { record("list_jobs", r, ms); },
          [&] { error("list_jobs"); });
    } else {
      loop.Send(
          c, "POST", "/api/v1/jobs", user_token, SubmitBody(submitted++), due,
          [&](const Response& r, double ms) { record("submit", r, ms); }, [&] { error("submit"); });
    }
  };
  for (int u = 0; u < o.user_conns; ++u) {
    const TimePoint first = t0 + user_gap * u / std::max(1, o.user_conns);
    loop.At(first, [&, u, first] { user(u, first, u); });
  }
  std::printf(
      "warm-up %.0f s, then measuring %.0f s: %d agents (%s form) every %.2f s%s, users %.0f "
      "req/s\n",
      o.warmup_s, o.duration_s, o.agents, o.form.c_str(), o.period_s,
      compact ? " until the server directs otherwise" : "", o.user_rate);
  std::fflush(stdout);
  WindowCpu cpu;
  const double secs = WarmUpThenMeasure(loop, t0, o, &measuring, &cpu);
  std::string told;
  for (const auto& [ms, n] : intervals_told) {
    told += " " + std::to_string(ms) + "ms:" + std::to_string(n);
  }
  Report("agents=" + std::to_string(o.agents) + " form=" + o.form +
             " skipped_heartbeats=" + std::to_string(late) +
             (compact ? " seconds_of_samples=" + std::to_string(ticks_sent) +
                            " report_interval_told=" + (told.empty() ? " none" : told)
                      : ""),
         series, secs, o.json_out);
  if (o.timeline) PrintTimeline(beats_timed);
  const size_t answered = series["heartbeat"].us.size();
  std::printf("CPU over the measured window: generator %.1f s (%.0f %% of a core)", cpu.self_s,
              100 * cpu.self_s / secs);
  if (cpu.server_s >= 0) {
    std::printf(", server %.1f s (%.0f %% of a core; %.0f us per heartbeat answered)", cpu.server_s,
                100 * cpu.server_s / secs,
                answered > 0 ? 1e6 * cpu.server_s / static_cast<double>(answered) : 0.0);
  }
  std::printf("\n");
  return 0;
}

int RunSubmit(const Options& o) {
  Loop loop(o.host, o.port);
  const size_t setup = loop.NewConn();
  const std::string user_token = CreateToken(loop, setup, o, "user", "loadsubmitter");
  std::map<std::string, Series> series;
  bool measuring = false;
  int next = 0;
  std::function<void(size_t)> submit = [&](size_t c) {
    loop.Send(
        c, "POST", "/api/v1/jobs", user_token, SubmitBody(next++), SteadyClock::now(),
        [&, c](const Response& r, double ms) {
          if (measuring) {
            Series& s = series["submit"];
            s.us.push_back(static_cast<uint32_t>(ms * 1000));
            s.statuses[r.status]++;
          }
          submit(c);
        },
        [&, c] {
          if (measuring) series["submit"].errors++;
          loop.At(SteadyClock::now() + std::chrono::milliseconds(10), [&, c] { submit(c); });
        });
  };
  for (int i = 0; i < o.submit_conns; ++i) submit(loop.NewConn());
  const double secs = WarmUpThenMeasure(loop, SteadyClock::now(), o, &measuring);
  int64_t ok = series["submit"].statuses[201];
  Report("submit connections=" + std::to_string(o.submit_conns) +
             " acknowledged=" + std::to_string(ok) + " (" +
             std::to_string(static_cast<int64_t>(static_cast<double>(ok) / secs)) + "/s)",
         series, secs, o.json_out);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  std::string server = "127.0.0.1:8470", token_file;
  CLI::App app{
      "HTTP load on a running `stoker server`: simulated agents heartbeating with "
      "samples plus users (agents), or durable submissions (submit).",
      "stoker-loadgen"};
  const auto non_negative = CLI::NonNegativeNumber;
  app.add_option("--mode", o.mode, "agents or submit")
      ->check(CLI::IsMember({"agents", "submit"}))
      ->capture_default_str();
  app.add_option("--server", server, "HOST:PORT of the server")->capture_default_str();
  app.add_option("--admin-token-file", token_file, "DATA_DIR/admin.token of the server")
      ->required();
  app.add_option("--samples", o.samples_file,
                 "agents: `stoker smi --json` output whose \"gpus\" each heartbeat carries");
  app.add_option("--agents", o.agents, "agents: simulated nodes")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--period", o.period_s,
                 "agents: heartbeat period in seconds (compact: until the server's first reply)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--form", o.form,
                 "agents: compact (every second's samples, at the interval the server directs) "
                 "or full (the latest samples as full field objects, every --period)")
      ->check(CLI::IsMember({"compact", "full"}))
      ->capture_default_str();
  app.add_option("--user-conns", o.user_conns, "agents: user connections")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--user-rate", o.user_rate,
                 "agents: user requests/s in total, half GET /jobs, half submit")
      ->check(non_negative)
      ->capture_default_str();
  app.add_option("--node-prefix", o.node_prefix, "agents: node names P0, P1, ...")
      ->capture_default_str();
  app.add_option("--conns", o.submit_conns, "submit: concurrent connections")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--duration", o.duration_s, "measured seconds")
      ->check(non_negative)
      ->capture_default_str();
  app.add_option("--warmup", o.warmup_s, "seconds before measuring")
      ->check(non_negative)
      ->capture_default_str();
  app.add_flag("--json", o.json_out, "print the report as JSON");
  app.add_flag("--timeline", o.timeline,
               "agents: print each measured second's heartbeat p99, slowest and count over 20 ms")
      ->excludes("--json");
  app.add_option("--server-pid", o.server_pid,
                 "agents: also report this process's CPU over the measured window (the server)");
  CLI11_PARSE(app, argc, argv);
  if (auto p = server.find("://"); p != std::string::npos) server = server.substr(p + 3);
  const size_t colon = server.rfind(':');
  if (colon == std::string::npos) Die("--server: expected HOST:PORT, got '" + server + "'");
  o.host = server.substr(0, colon);
  o.port = std::atoi(server.c_str() + colon + 1);
  if (o.port <= 0 || o.port > 65535) Die("--server: bad port in '" + server + "'");
  std::ifstream tf(token_file);
  if (!(tf >> o.admin_token)) Die("--admin-token-file: cannot read a token from " + token_file);
  if (o.mode == "agents") {
    if (o.samples_file.empty()) Die("--samples: required in agents mode");
    return RunAgents(o);
  }
  return RunSubmit(o);  // --mode is checked by CLI11: agents or submit
}
