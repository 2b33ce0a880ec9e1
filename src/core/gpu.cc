#include "core/gpu.h"

namespace stoker {

const char* JobKindName(JobRef::Kind kind) {
  switch (kind) {
    case JobRef::Kind::kNone:
      return "none";
    case JobRef::Kind::kStoker:
      return "stoker";
    case JobRef::Kind::kSlurm:
      return "slurm";
    case JobRef::Kind::kKubernetes:
      return "kubernetes";
  }
  return "unknown";
}

const char* GpuHealthName(GpuHealth h) {
  switch (h) {
    case GpuHealth::kOk:
      return "ok";
    case GpuHealth::kLost:
      return "lost";
    case GpuHealth::kUnreachable:
      return "unreachable";
  }
  return "unknown";
}

}  // namespace stoker
