#pragma once
// Scripting entry points exported by the fake NVML library (libstoker-fakenvml*.so) besides the
// NVML subset. Callers look them up with dlsym on the same dlopen handle the NVML adapter uses;
// the adapter itself never does (it cannot tell the fake from the driver).
//
// Variants, built from one source (STOKER_FAKE_NVML_VARIANT):
//   0 "full"   : newest symbols (memory _v2, RunningProcessDetailList, GPM, TemperatureV, ...)
//   1 "legacy" : an R470-era library: no _v2/_v3/GPM/detail list/TemperatureV/event-reason names;
//                plain nvmlDeviceGetComputeRunningProcesses writing 16-byte entries
//   2 "r535"   : _v3 writing 32-byte entries plus nvmlDeviceGetConfComputeMemSizeInfo and no
//                detail list (the 535.104 driver shape, §2.11.1)

extern "C" {

// Sets the scenario YAML played by the next nvmlInit (when no NVML user is active). Returns 0 on
// success, else writes the parse error into err (NUL-terminated, truncated to err_len).
typedef int (*stokerFakeNvmlSetScenario_fn)(const char* text, const char* source_name, char* err,
                                            unsigned err_len);
// Same, from a stoker::fakenvml::Scenario already parsed by the host (built from the same tree;
// `abi_tag` must equal kScenarioAbiTag). This is how `--simulate` configures the embedded copy,
// which portable builds compile without yaml-cpp. Returns 0 on success.
typedef int (*stokerFakeNvmlSetScenarioObject_fn)(const void* scenario, unsigned long long abi_tag);
// Switches to manual time and sets scenario time (seconds since init) / advances it.
typedef void (*stokerFakeNvmlSetTime_fn)(double seconds);
typedef void (*stokerFakeNvmlAdvance_fn)(double seconds);
// Current scenario time in seconds (manual or since nvmlInit).
typedef double (*stokerFakeNvmlNow_fn)(void);

}  // extern "C"

// Environment variable naming a scenario file, read at nvmlInit when no scenario was set.
#define STOKER_FAKE_NVML_SCENARIO_ENV "STOKER_FAKE_NVML_SCENARIO"
