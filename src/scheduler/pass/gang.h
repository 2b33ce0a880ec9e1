#pragma once
// Gangs in the scheduling pass: the parts a gang job asks for now (scheduler/gang.h holds the
// one notion of a gang: how a total splits, how parts are placed all or nothing).

#include <cstdint>
#include <string>
#include <vector>

#include "scheduler/cluster.h"
#include "scheduler/pass/pass.h"
#include "scheduler/resources.h"

namespace stoker::pass {

// The requests of a gang's parts on `cluster`, largest first: `nodes` parts shaped like `part`
// with `gpus` whole GPUs each, or `total_gpus` split into parts of as many GPUs as the largest
// node that could host one has. Empty with `why` set when no node could host a part.
std::vector<scheduler::Request> GangRequests(const JobView& j, const scheduler::Request& part,
                                             const scheduler::ClusterState& cluster,
                                             std::string* why);

// GPUs a job asks for in all (a gang: every part), as queue policies order by.
int64_t TotalGpus(const JobView& j);

}  // namespace stoker::pass
