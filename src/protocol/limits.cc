#include "protocol/limits.h"

namespace stoker::protocol::limits {

std::span<const NamedLimit> Named() {
  static constexpr NamedLimit kNamed[] = {
      {"job_name_bytes", kJobNameBytes},
      {"command_items", kCommandItems},
      {"argument_bytes", kArgumentBytes},
      {"env_variables", kEnvVariables},
      {"env_name_bytes", kEnvNameBytes},
      {"env_value_bytes", kEnvValueBytes},
      {"path_bytes", kPathBytes},
      {"gpus_per_job", kGpusPerJob},
      {"gpu_milli_max", kGpuMilliMax},
      {"gpu_memory_mib_max", kGpuMemoryMibMax},
      {"gpu_models", kGpuModels},
      {"gpu_model_bytes", kGpuModelBytes},
      {"mig_profile_bytes", kMigProfileBytes},
      {"cpu_milli_min", kCpuMilliMin},
      {"cpu_milli_max", kCpuMilliMax},
      {"job_memory_mib_max", kJobMemoryMibMax},
      {"job_class_bytes", kJobClassBytes},
      {"priority_min", kPriorityMin},
      {"priority_max", kPriorityMax},
      {"user_bytes", kUserBytes},
      {"on_node_loss_bytes", kOnNodeLossBytes},
      {"gang_parts_max", kGangPartsMax},
      {"gang_gpus_max", kGangGpusMax},
      {"node_name_bytes", kNodeNameBytes},
      {"node_text_bytes", kNodeTextBytes},
      {"node_address_bytes", kNodeAddressBytes},
      {"node_cpu_milli_max", kNodeCpuMilliMax},
      {"node_memory_mib_max", kNodeMemoryMibMax},
      {"gpus_per_node", kGpusPerNode},
      {"gpu_index_max", kGpuIndexMax},
      {"uuid_bytes", kUuidBytes},
      {"gpu_memory_mib_total_max", kGpuMemoryMibTotalMax},
      {"gpu_minor_max", kGpuMinorMax},
      {"mig_instances_per_gpu", kMigInstancesPerGpu},
      {"mig_slices_max", kMigSlicesMax},
      {"attempt_max", kAttemptMax},
      {"run_phase_bytes", kRunPhaseBytes},
      {"run_error_bytes", kRunErrorBytes},
      {"exit_code_min", kExitCodeMin},
      {"exit_code_max", kExitCodeMax},
      {"signal_min", kSignalMin},
      {"signal_max", kSignalMax},
      {"log_chunk_bytes", kLogChunkBytes},
      {"report_ticks_max", kReportTicksMax},
      {"report_keys_max", kReportKeysMax},
      {"report_interval_ms_min", kReportIntervalMsMin},
      {"report_interval_ms_max", kReportIntervalMsMax},
  };
  return kNamed;
}

}  // namespace stoker::protocol::limits
