#pragma once
// The YAML field readers of Stoker's configuration files: the efficiency engine's, and those of
// the engines that reuse its rules (the Slurm engine's idle reclaim). yaml-cpp throws; these do
// not, and every error names the field path ("slurm.reclaim.idle.warn_after: ...").

#include <yaml-cpp/yaml.h>

#include <set>
#include <string>
#include <vector>

#include "core/duration.h"
#include "core/status.h"
#include "efficiency/config.h"

namespace stoker::efficiency::yaml {

Result<std::string> Scalar(const YAML::Node& n, const std::string& path);
// A finite number.
Result<double> Number(const YAML::Node& n, const std::string& path);
// true/false, yes/no, on/off (any case).
Result<bool> Bool(const YAML::Node& n, const std::string& path);
// The duration grammar of core/duration.h ("90s", "15m", "2h").
Result<Duration> Dur(const YAML::Node& n, const std::string& path);
Result<std::vector<std::string>> StringList(const YAML::Node& n, const std::string& path);
// `n` is a mapping whose keys are all in `allowed` (else "path.key: unknown field").
Status CheckKeys(const YAML::Node& n, const std::string& path, std::set<std::string> allowed);
// The text of a configuration file (at most 1 MiB); NotFound or InvalidArgument naming it.
Result<std::string> ReadConfigFile(const std::string& path);

// An idle-reclaim policy (the keys of the efficiency configuration's idle_reclaim section, and
// `extra_keys`, which the caller reads itself) over the values already in `p`.
Status LoadIdleReclaim(const YAML::Node& n, const std::string& path, IdleReclaimPolicy& p,
                       const std::set<std::string>& extra_keys = {});

}  // namespace stoker::efficiency::yaml
