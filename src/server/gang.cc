// Gangs in the server: the state machine of a job that runs as several parts, each on a node of
// its own (server.h, "Gangs").

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <set>

#include "server/server.h"

namespace stoker::server {
namespace {

bool Succeeded(const GangPart& p) {
  return p.phase == PartPhase::kExited && p.error.empty() && !p.signal && p.exit_code &&
         *p.exit_code == 0;
}

// How a part ended, in words.
std::string Outcome(const GangPart& p) {
  if (!p.error.empty()) return p.error;
  if (p.signal) return "killed by signal " + std::to_string(*p.signal);
  return "exit code " + std::to_string(p.exit_code.value_or(-1));
}

constexpr char kNotStarted[] = "not started";

}  // namespace

void Server::OnPartReport(Job& j, GangPart& part, const RunReport& r, const std::string& node,
                          HeartbeatReply& reply, store::WriteBatch& b, bool* changed) {
  const size_t rank = static_cast<size_t>(&part - j.parts.data());
  if (r.phase == protocol::RunPhase::kExited) {
    if (!part.Ended()) {
      part.phase = PartPhase::kExited;
      part.exit_code = r.exit_code;
      part.signal = r.signal;
      part.error = r.error;
      Event(&b, j, "part exited",
            "part " + std::to_string(rank) + " on " + node + ": " + Outcome(part));
      GangStep(j, b);
      *changed = true;
    }
    // Its exit is recorded (and, once the gang ended or was requeued, so is the gang's).
    if (r.logs_complete) reply.forget.push_back(j.id);
    return;
  }
  if (r.phase == protocol::RunPhase::kRunning && part.phase == PartPhase::kAssigned) {
    part.phase = PartPhase::kRunning;
    if (j.state == JobState::kAssigned) {
      j.state = JobState::kRunning;
      j.start_ms = NowMs();
    }
    Event(&b, j, "running", "part " + std::to_string(rank) + " on " + node);
    *changed = true;
  }
  if (j.state == JobState::kCancelling) TellToCancel(j, reply);
}

void Server::OnPartMissing(Job& j, GangPart& part, const std::string& node, store::WriteBatch& b) {
  const size_t rank = static_cast<size_t>(&part - j.parts.data());
  part.error = part.phase == PartPhase::kRunning ? "node " + node + " no longer knows this part"
                                                 : kNotStarted;
  part.phase = PartPhase::kExited;
  Event(&b, j, "part exited", "part " + std::to_string(rank) + " on " + node + ": " + part.error);
  GangStep(j, b);
}

void Server::OnPartLost(Job& j, GangPart& part, const std::string& node, store::WriteBatch& b) {
  if (part.Ended()) return;
  const size_t rank = static_cast<size_t>(&part - j.parts.data());
  part.phase = PartPhase::kLost;
  part.error = "node " + node + " lost";
  Event(&b, j, "part lost", "part " + std::to_string(rank) + ": " + part.error);
  GangStep(j, b);
}

void Server::GangStep(Job& j, store::WriteBatch& b) {
  if (!IsActive(j.state) || j.parts.empty()) return;
  const bool all_ended =
      std::all_of(j.parts.begin(), j.parts.end(), [](const GangPart& p) { return p.Ended(); });
  // The first part that failed or was lost (a part stopped because the gang is stopping does not
  // count: the gang is cancelling by then).
  const GangPart* failed = nullptr;
  for (const GangPart& p : j.parts) {
    if (p.phase == PartPhase::kLost || (p.phase == PartPhase::kExited && !Succeeded(p))) {
      failed = &p;
      break;
    }
  }
  if (j.state == JobState::kAssigned || j.state == JobState::kRunning) {
    if (failed != nullptr) {
      const std::string what = "part " + std::to_string(failed - j.parts.data()) + " on " +
                               failed->assignment.node + ": " + Outcome(*failed);
      j.state = JobState::kCancelling;
      if (failed->phase == PartPhase::kLost &&
          j.spec.on_node_loss == protocol::OnNodeLoss::kRequeue) {
        j.stop_to_requeue = what;
        j.reason = what + " (stopping the gang to requeue it)";
        Event(&b, j, "requeue", j.reason);
      } else {
        // The job's exit is that of the part that failed, kept now that it is known.
        j.stop_to_fail = what;
        j.exit_code = failed->exit_code;
        j.signal = failed->signal;
        j.reason = what + " (stopping the gang)";
        Event(&b, j, "stopping", j.reason);
      }
      spdlog::info("job {}: {}", j.id, j.reason);
    } else if (all_ended) {
      EndJob(j, JobState::kSucceeded, "");
      j.exit_code = 0;
      if (j.start_ms == 0) j.start_ms = j.end_ms;
      Event(&b, j, JobStateName(j.state), "every part exited 0");
      return;
    }
  }
  if (j.state != JobState::kCancelling || !all_ended) return;
  // Every part has stopped: the gang ends, or goes back to the queue as a whole.
  if (StoppingToRequeue(j)) {
    const std::string why = RequeueStopped(j);
    Event(&b, j, "requeued", why + ", every part stopped");
    return;
  }
  if (!j.stop_to_fail.empty()) {
    const std::string why = j.stop_to_fail;
    j.stop_to_fail.clear();
    EndJob(j, JobState::kFailed, why);
  } else {
    EndJob(j, JobState::kCancelled, j.reason);
  }
  if (j.start_ms == 0) j.start_ms = j.end_ms;
  Event(&b, j, JobStateName(j.state), j.reason + " (every part stopped)");
}

Status Server::AssignGang(Job& j, const std::vector<pass::Grant>& parts) {
  if (parts.empty()) return InvalidArgument("a gang needs at least one part");
  std::vector<std::string> addresses;
  for (const pass::Grant& p : parts) {
    auto it = nodes_.find(p.placement.node);
    addresses.push_back(it != nodes_.end() && !it->second.inv.address.empty()
                            ? it->second.inv.address
                            : p.placement.node);
  }
  // The master port: the lowest of the range that no other active gang with rank 0 on the same
  // node holds (the server does not probe the port; see docs/scheduling.md).
  const std::string& master = parts.front().placement.node;
  std::set<int32_t> used;
  if (auto it = node_jobs_.find(master); it != node_jobs_.end()) {
    for (int64_t id : it->second) {
      const Job& other = jobs_.at(id);
      if (other.id == j.id || other.parts.empty() || other.parts[0].assignment.node != master) {
        continue;
      }
      auto port = other.parts[0].assignment.env.find("MASTER_PORT");
      if (port != other.parts[0].assignment.env.end()) used.insert(std::atoi(port->second.c_str()));
    }
  }
  int32_t port = -1;
  for (int32_t p = options_.gang_port_base; p < options_.gang_port_base + options_.gang_ports;
       ++p) {
    if (!used.count(p)) {
      port = p;
      break;
    }
  }
  if (port < 0) {
    return FailedPrecondition("no free gang master port on " + master + " (ports " +
                              std::to_string(options_.gang_port_base) + ".." +
                              std::to_string(options_.gang_port_base + options_.gang_ports - 1) +
                              " are held by other gangs)");
  }
  j.parts.clear();
  j.stop_to_fail.clear();
  for (size_t rank = 0; rank < parts.size(); ++rank) {
    const pass::Grant& pa = parts[rank];
    GangPart part;
    part.assignment = FromPass(pa);
    Assignment& a = part.assignment;
    for (const auto& [k, v] :
         protocol::GangEnv(static_cast<int32_t>(rank), addresses,
                           static_cast<int32_t>(pa.gpu_indices.size()), port)) {
      a.env[k] = v;
    }
    j.parts.push_back(std::move(part));
  }
  return Status::Ok();
}

}  // namespace stoker::server
