#pragma once
// The jobs on the wire: a job spec (what a submission asks for, validated field by field), a
// job (its state, where it runs, how its run went) and their JSON codecs. The server stores and
// serves these, and the CLI writes and reads them; this part of the protocol is a library of
// its own (stoker::protocol_job: core and nlohmann only), so the small `stoker` program reads and
// writes jobs with the same code as the server without linking the rest of the protocol.

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/enum_table.h"
#include "core/status.h"

namespace stoker::protocol {

using json = nlohmann::json;

enum class JobState { kQueued, kAssigned, kRunning, kCancelling, kSucceeded, kFailed, kCancelled };
inline constexpr EnumTable<JobState, 7> kJobStateNames{"job state",
                                                       {{{JobState::kQueued, "queued"},
                                                         {JobState::kAssigned, "assigned"},
                                                         {JobState::kRunning, "running"},
                                                         {JobState::kCancelling, "cancelling"},
                                                         {JobState::kSucceeded, "succeeded"},
                                                         {JobState::kFailed, "failed"},
                                                         {JobState::kCancelled, "cancelled"}}}};
constexpr const auto& NamesOf(JobState) { return kJobStateNames; }
inline const char* JobStateName(JobState v) { return kJobStateNames.CName(v); }
inline std::optional<JobState> ParseJobState(std::string_view s) { return kJobStateNames.Find(s); }
bool IsTerminal(JobState s);
// Assigned, running or cancelling: the job holds resources on a node.
bool IsActive(JobState s);

// What happens to a job whose node is lost (JobSpec::on_node_loss; its name on the wire).
enum class OnNodeLoss { kRequeue, kFail };
inline constexpr EnumTable<OnNodeLoss, 2> kOnNodeLossNames{
    "on_node_loss", {{{OnNodeLoss::kRequeue, "requeue"}, {OnNodeLoss::kFail, "fail"}}}};
constexpr const auto& NamesOf(OnNodeLoss) { return kOnNodeLossNames; }

// What a job asks for. Exactly one GPU shape: none, whole GPUs (gpus >= 1), a share of one GPU
// (gpu_milli in 1..999) or a MIG instance (mig = "1g.10gb" ...).
//
// A gang (IsGang) runs as several parts at once, each on a node of its own, all placed or none
// (scheduler/gang.h): `nodes` parts of `gpus` whole GPUs each (or no GPU), or `total_gpus` GPUs
// split into parts of as many GPUs as the largest node that could host one has, whole nodes
// first. CPU and memory are per part. Every part starts with the environment a distributed
// launcher reads (GangEnv).
struct JobSpec {
  std::string name;
  std::vector<std::string> command;
  std::map<std::string, std::string> env;
  std::string workdir;
  int32_t gpus = 0;        // per node (per part of a gang)
  int32_t min_gpus = 0;    // elastic: start with fewer (>= min_gpus) when `gpus` do not fit now
  int32_t nodes = 0;       // > 0: a gang of this many parts (0: an ordinary one-node job)
  int32_t total_gpus = 0;  // > 0: a gang of this many GPUs in all, split by the nodes' sizes
  int32_t gpu_milli = 0;
  int64_t gpu_memory_mib = 0;
  std::vector<std::string> gpu_models;  // any of these (substring match on the node's model)
  std::string mig;
  int64_t cpu_milli = 1000;
  int64_t memory_mib = 512;
  std::string job_class;
  int32_t priority = 0;
  bool preemptible = false;
  // Checkpointable: the system may stop and restart it at any time (to consolidate it onto a
  // shared GPU now rather than at its next start).
  bool movable = false;
  OnNodeLoss on_node_loss = OnNodeLoss::kRequeue;
  std::string user;  // admins may submit on behalf of a user
};

inline bool IsGang(const JobSpec& s) { return s.nodes > 0 || s.total_gpus > 0; }
// GPUs a job asks for in all (a gang: every part), as queue policies order by.
inline int32_t TotalGpus(const JobSpec& s) {
  return s.total_gpus > 0 ? s.total_gpus : s.nodes > 0 ? s.nodes * s.gpus : s.gpus;
}
// What a reader does with a field it does not know. A submission and a stored job refuse it (a
// misspelt option must not be dropped silently); a client reading a server's answer ignores it,
// so a newer server, whose jobs carry fields this version does not know, stays readable.
enum class UnknownFields { kRefuse, kIgnore };
// Validates a job spec document (a submission's body, or a stored job's). Errors are
// InvalidArgument "<field>: <what is wrong>".
Result<JobSpec> ParseJobSpec(const json& body, UnknownFields unknown = UnknownFields::kRefuse);
// What a new submission must also meet (stored jobs accepted by older rules still load): no
// NUL byte in any string (it would cut a path or an argument short where the node uses it),
// and none of the variables Stoker sets itself (IsReservedEnvName) in `env`.
Status CheckSubmission(const JobSpec& spec);
// CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_DEVICES, STOKER_*, CUDA_MPS_*: set from the assignment.
bool IsReservedEnvName(std::string_view name);
json JobSpecToJson(const JobSpec& s);

// The environment every part of a gang starts with, as PyTorch's env:// initialisation and
// torchrun read it. Stoker starts one process per part:
//   RANK = NODE_RANK = GROUP_RANK = the part's rank (0 .. parts-1), LOCAL_RANK = 0,
//   WORLD_SIZE = the number of parts, LOCAL_WORLD_SIZE = 1,
//   MASTER_ADDR / MASTER_PORT = rank 0's node address and the port chosen for the gang;
// and for torchrun started as the part's command (one worker per GPU; torchrun reads PET_*
// for its flags and sets RANK, LOCAL_RANK and WORLD_SIZE of its workers itself):
//   PET_NNODES, PET_NODE_RANK, PET_NPROC_PER_NODE (the part's GPUs, at least 1),
//   PET_MASTER_ADDR, PET_MASTER_PORT;
// and STOKER_GANG_RANK, STOKER_GANG_SIZE, STOKER_GANG_NODES (every part's node address, in
// rank order, comma-separated).
std::map<std::string, std::string> GangEnv(int32_t rank, const std::vector<std::string>& addresses,
                                           int32_t part_gpus, int32_t master_port);
// The names GangEnv sets that a submission may not set in a gang's `env` (the STOKER_ ones are
// reserved for every job).
bool IsGangEnvName(std::string_view name);

// Where a job runs.
struct Assignment {
  std::string node;
  std::vector<uint32_t> gpu_indices;  // NVML indices on the node
  int32_t gpu_milli = 0;              // per GPU (1000 = whole)
  uint8_t mig_slices = 0;
  std::string mig_uuid;
  std::string cuda_visible_devices;        // what the job sees
  std::map<std::string, std::string> env;  // limits for shared GPUs (MPS variables)
  // Scheduler bookkeeping: which of the node's GPUs (position in the node's GPU list) and how
  // much of each, so the scheduler can rebuild the cluster's free capacity.
  std::vector<std::pair<uint8_t, int16_t>> shares;  // (gpu position, milli)
};
json AssignmentToJson(const Assignment& a);

// How the run of one part of a gang went.
enum class PartPhase { kAssigned, kRunning, kExited, kLost };
inline constexpr EnumTable<PartPhase, 4> kPartPhaseNames{"part phase",
                                                         {{{PartPhase::kAssigned, "assigned"},
                                                           {PartPhase::kRunning, "running"},
                                                           {PartPhase::kExited, "exited"},
                                                           {PartPhase::kLost, "lost"}}}};
constexpr const auto& NamesOf(PartPhase) { return kPartPhaseNames; }
inline const char* PartPhaseName(PartPhase v) { return kPartPhaseNames.CName(v); }

// One part of a gang: where it runs (its node, GPUs and launcher environment) and how its run
// went. kExited: its node reported its exit (or it never started); kLost: its node was lost.
struct GangPart {
  Assignment assignment;
  PartPhase phase = PartPhase::kAssigned;
  std::optional<int> exit_code;
  std::optional<int> signal;
  std::string error;
  bool Ended() const { return phase == PartPhase::kExited || phase == PartPhase::kLost; }
};

struct Job {
  int64_t id = 0;
  std::string user;
  JobSpec spec;
  JobState state = JobState::kQueued;
  std::optional<Assignment> assignment;  // a one-node job (a gang has `parts` instead)
  // A placed gang: every part in rank order (empty while queued). The job runs while any part
  // does; it succeeds when every part exited 0; a part that fails or is lost stops the others
  // and, once every part has stopped, fails or requeues the whole gang.
  std::vector<GangPart> parts;
  std::optional<int> exit_code;
  std::optional<int> signal;
  std::string reason;  // why queued/failed/cancelled
  int64_t submit_ms = 0, start_ms = 0, end_ms = 0;
  int32_t requeues = 0;
  int32_t preemptions = 0;
  // Set while a preemptible job is being stopped (state cancelling) to make room for this job:
  // when the node reports its exit it goes back to the queue instead of ending.
  int64_t preempted_by = 0;
  // Set while a running job is being stopped to go back to the queue for another reason (idle
  // reclaim with action requeue): the reason, recorded when its exit requeues it.
  std::string stop_to_requeue;
  // Set by the efficiency engine's consolidation plan for a one-GPU job that uses little of
  // it: from its next start the job runs as this share of a GPU (milli-GPU), beside others.
  int32_t consolidate_milli = 0;
  // Set while a gang is being stopped because one of its parts failed: once every part has
  // stopped, the job fails with this reason.
  std::string stop_to_fail;
  // The run a node's reports are about is `requeues` at the time the job was placed: every way
  // back to the queue counts a requeue, so a node still reporting an earlier run (a node that
  // was lost and came back, a job requeued meanwhile) is told to stop it instead of changing
  // this run's state or logs.
  int64_t attempt() const { return requeues; }
};

json JobToJson(const Job& j);
Result<Job> JobFromJson(const json& j, UnknownFields unknown = UnknownFields::kRefuse);
// The keys of JobToJson's document that never change after submission; JobStatusToJson writes
// every other one. The server stores the whole document once, at submission, and from then on
// only the status (a placement, a state change), so a write is proportional to what changed.
inline constexpr const char* kJobFixedKeys[] = {"id", "user", "name", "spec"};
json JobStatusToJson(const Job& j);
// A job from the document stored at submission with its newest status over it: the fixed keys
// from `doc`, every other one from `status` (null: `doc` alone, a job never changed since or
// stored whole).
Result<Job> JobFromJson(const json& doc, const json& status);
// Where a job runs: its assignment, or every part of a gang (empty while queued).
std::vector<const Assignment*> Assignments(const Job& j);
// The part of gang `j` on `node`, or null (each part is on a node of its own).
GangPart* PartOn(Job& j, const std::string& node);
const GangPart* PartOn(const Job& j, const std::string& node);

// A queued job in scheduling order, with why it waits (GET /queue).
struct QueueEntry {
  int64_t position = 0;  // 1-based, among every queued job (also those the caller cannot see)
  int64_t job = 0;
  std::string user;
  std::string name;
  int32_t priority = 0;
  std::string reason;
};
json QueueEntryToJson(const QueueEntry& e);
// One entry of GET /queue as a client reads it: `position` and `job` are required, the other
// fields default when absent; keys a newer server adds are ignored. Errors name the field.
Result<QueueEntry> QueueEntryFromJson(const json& j);

}  // namespace stoker::protocol
