#pragma once
// The protocol: the types that cross the wire between the CLI, the server and the nodes, and
// their JSON codecs. Jobs and job specs (protocol/job.h, included here), nodes, roles, and the
// node <-> server heartbeat messages. The server, the node loop and the CLI all use these, so
// all three agree on one wire format. GPU samples have their own codec (protocol/samples.h).

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/enum_table.h"
#include "core/gpu.h"
#include "core/status.h"
#include "protocol/job.h"

namespace stoker::protocol {

using json = nlohmann::json;

// admin: everything; user: their own jobs and the cluster views; agent: the node named like
// its token; scheduler: the scheduler-extender routes only (kube-scheduler, by its client
// certificate).
enum class Role { kAdmin, kAgent, kUser, kScheduler };
inline constexpr EnumTable<Role, 4> kRoleNames{"role",
                                               {{{Role::kAdmin, "admin"},
                                                 {Role::kAgent, "agent"},
                                                 {Role::kUser, "user"},
                                                 {Role::kScheduler, "scheduler"}}}};
constexpr const auto& NamesOf(Role) { return kRoleNames; }
inline const char* RoleName(Role v) { return kRoleNames.CName(v); }
inline std::optional<Role> ParseRole(std::string_view s) { return kRoleNames.Find(s); }

// The phase of a run a node reports (RunReport::phase, a string on the wire).
enum class RunPhase { kStarting, kRunning, kExited };
inline constexpr EnumTable<RunPhase, 3> kRunPhaseNames{"phase",
                                                       {{{RunPhase::kStarting, "starting"},
                                                         {RunPhase::kRunning, "running"},
                                                         {RunPhase::kExited, "exited"}}}};
constexpr const auto& NamesOf(RunPhase) { return kRunPhaseNames; }

// Who is asking: a token's name (the admin's, the user's, the node's) and its role.
struct Principal {
  std::string name;
  Role role = Role::kUser;
};

struct MigInfo {
  std::string uuid;
  std::string profile;
  uint32_t slices = 0;
};

struct GpuInfo {
  uint32_t index = 0;
  std::string uuid;
  std::string model;
  int64_t memory_mib = 0;
  bool mig_enabled = false;
  std::vector<MigInfo> mig;
  std::optional<uint32_t> minor;  // /dev/nvidia<minor>; unknown: the index
};

// What a node registers.
struct NodeInventory {
  std::string name;
  bool simulated = false;
  std::string source;  // where GPU data comes from (NVML version, or the simulated scenario)
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  std::vector<GpuInfo> gpus;
  // What the node enforces for jobs (runner/cgroup.h CgroupSupport::Describe()).
  std::string isolation;
  // Where the other parts of a gang reach this node (host name or IP address): MASTER_ADDR when
  // the node runs rank 0. Empty: the node's name.
  std::string address;
};
// Validates a registration: names, ranges and types of every field (unknown fields of the GPU
// objects are refused, as is a MIG list that is not an array), unique GPU indexes and UUIDs.
Result<NodeInventory> ParseNodeInventory(const json& body);
json NodeInventoryToJson(const NodeInventory& n);

// A node as the server holds it: its inventory, its state and, in GET /nodes/{name}, its latest
// GPU samples.
enum class NodeState { kReady, kDrained, kLost };
inline constexpr EnumTable<NodeState, 3> kNodeStateNames{
    "node state",
    {{{NodeState::kReady, "ready"}, {NodeState::kDrained, "drained"}, {NodeState::kLost, "lost"}}}};
constexpr const auto& NamesOf(NodeState) { return kNodeStateNames; }
inline const char* NodeStateName(NodeState v) { return kNodeStateNames.CName(v); }
struct NodeStatus {
  NodeInventory inventory;
  NodeState state = NodeState::kReady;
  bool drained = false;  // also while lost: it stays drained when it comes back
  int64_t last_heartbeat_ms = 0;
  int64_t registered_ms = 0;
  int64_t active_jobs = 0;  // assigned, running or cancelling here
  // The agent's latest samples as it sent them (a JSON array, the heartbeat's full form), or
  // null: not asked for, or ...
  std::shared_ptr<const std::string> samples_json;
  // ... its latest second of the compact form, written in the full form when asked for.
  std::shared_ptr<const std::vector<GpuSample>> samples;
};
json NodeStatusToJson(const NodeStatus& n);

// What an active job holds (GET /allocations).
struct Allocation {
  int64_t job = 0;
  std::string user;
  JobState state = JobState::kAssigned;
  std::string node;
  std::vector<uint32_t> gpu_indices;
  int32_t gpu_milli = 0;
  std::string mig_uuid;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  std::optional<int32_t> part;  // a gang: the part (rank) this row is; one row per part
};
json AllocationToJson(const Allocation& a);

// The scheduling policy (GET/PUT /policy).
struct PolicySettings {
  std::string placement;  // empty: the library's default
  std::string queue;
  bool backfill = true;
};
json PolicySettingsToJson(const PolicySettings& p);

// One run of a job as a node reports it in a heartbeat.
struct RunReport {
  int64_t id = 0;
  int64_t attempt = 0;  // LaunchOrder::attempt of the run this is about
  RunPhase phase = RunPhase::kStarting;
  std::optional<int> exit_code;
  std::optional<int> signal;
  std::string error;
  // New log bytes: appended by the server at `*_offset` (idempotent on resend).
  int64_t stdout_offset = 0;
  std::string stdout_data;
  int64_t stderr_offset = 0;
  std::string stderr_data;
  bool logs_complete = false;  // the job exited and every byte was sent
};

// One second of a node: every GPU's sample, taken at `at` (the compact heartbeat form's "ticks",
// protocol/samples.h).
struct SampleTick {
  WallTime at{};
  std::vector<GpuSample> gpus;
};

// A heartbeat comes in two forms. The full form (agents before the compact one): "samples", the
// node's latest sample of each GPU as full field objects. The compact form (protocol/samples.h):
// "format": 2, "keys" and "ticks", every second's samples since the node's previous report.
struct Heartbeat {
  std::vector<RunReport> jobs;
  // The full form: the agent's latest GPU samples as JSON text (an array of telemetry's
  // SampleToJson objects), kept as text for GET /nodes/{name}, which is rare, ...
  std::string samples_json = "[]";
  // ... and read once into the typed readings the observers (efficiency engine) use.
  std::vector<GpuSample> gpus;
  // The compact form: true when the body had "ticks", read into `ticks` (oldest first).
  bool compact = false;
  std::vector<SampleTick> ticks;
  // Sending the compact form: the "ticks" array as JSON text (CompactTicksJson); empty sends the
  // full form with samples_json.
  std::string ticks_json;
};
// Parses a heartbeat request body, either form. The samples are read with simdjson straight into
// `gpus` or `ticks` (no JSON tree: at 1,000 nodes a second the nlohmann tree of 20 KB per
// heartbeat cost more CPU than everything else the server does).
Result<Heartbeat> ParseHeartbeat(std::string_view body);
// The request body an agent sends: the compact form when ticks_json is set, else the full form.
std::string HeartbeatBody(const Heartbeat& h);
// The elements of a samples array (JSON text) whose `keep` entry is true, as JSON text.
std::string SelectSamples(std::string_view samples_json, const std::vector<bool>& keep);

// What the server answers a heartbeat with.
struct LaunchOrder {
  int64_t id = 0;
  int64_t attempt = 0;  // Job::attempt(): reported back with every report of this run
  std::string user;
  std::vector<std::string> command;
  std::map<std::string, std::string> env;
  std::string workdir;
  std::string cuda_visible_devices;  // empty when no GPU
  bool has_gpu = false;
  std::vector<uint32_t> gpu_indices;  // the node's GPUs (NVML indices) the job may open
  int64_t cpu_milli = 0;              // limits, where the node enforces them (cgroups)
  int64_t memory_mib = 0;
};
struct HeartbeatReply {
  std::vector<LaunchOrder> start;
  std::vector<int64_t> cancel;
  // Per cancelled job, the SIGTERM-to-SIGKILL grace the node should give it (preemptions);
  // jobs not named get the node's own cancel grace.
  std::map<int64_t, int64_t> cancel_grace_ms;
  std::vector<int64_t> forget;  // exited jobs the server recorded (with all their logs)
  std::map<int64_t, std::pair<int64_t, int64_t>> log_offsets;  // id -> (stdout, stderr) bytes held
  // How often the node should report (the compact form; it still samples every second), within
  // limits::kReportIntervalMsMin..kReportIntervalMsMax. 0: not said (an older server): 1 s.
  int64_t report_interval_ms = 0;
};
json HeartbeatReplyToJson(const HeartbeatReply& r);
Result<HeartbeatReply> ParseHeartbeatReply(const json& j);

}  // namespace stoker::protocol
