#pragma once
// The subset of the NVML C ABI Stoker uses, declared independently from the facts in
// shared/reference/telemetry.md §2 (no NVIDIA header text is copied, see §2.12). Everything is
// resolved with dlsym at run time (nvml_library.h), so these are types and function-pointer
// typedefs only. The fake NVML library (src/fakenvml) implements the same declarations, which keeps
// both sides of the dlopen boundary honest about layouts.
//
// Layouts are for x86-64 LP64; the static_asserts pin the sizes the reference lists, because a
// wrong size here silently corrupts data returned by the driver.

#include <cstddef>
#include <cstdint>

extern "C" {

// int-sized return code (§2.2).
typedef enum nvmlReturn_enum {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NO_PERMISSION = 4,
  NVML_ERROR_ALREADY_INITIALIZED = 5,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_INSUFFICIENT_POWER = 8,
  NVML_ERROR_DRIVER_NOT_LOADED = 9,
  NVML_ERROR_TIMEOUT = 10,
  NVML_ERROR_IRQ_ISSUE = 11,
  NVML_ERROR_LIBRARY_NOT_FOUND = 12,
  NVML_ERROR_FUNCTION_NOT_FOUND = 13,
  NVML_ERROR_CORRUPTED_INFOROM = 14,
  NVML_ERROR_GPU_IS_LOST = 15,
  NVML_ERROR_RESET_REQUIRED = 16,
  NVML_ERROR_OPERATING_SYSTEM = 17,
  NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
  NVML_ERROR_IN_USE = 19,
  NVML_ERROR_MEMORY = 20,
  NVML_ERROR_NO_DATA = 21,
  NVML_ERROR_VGPU_ECC_NOT_SUPPORTED = 22,
  NVML_ERROR_INSUFFICIENT_RESOURCES = 23,
  NVML_ERROR_FREQ_NOT_SUPPORTED = 24,
  NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
  NVML_ERROR_DEPRECATED = 26,
  NVML_ERROR_NOT_READY = 27,
  NVML_ERROR_GPU_NOT_FOUND = 28,
  NVML_ERROR_INVALID_STATE = 29,
  NVML_ERROR_RESET_TYPE_NOT_SUPPORTED = 30,
  NVML_ERROR_UNKNOWN = 999,
} nvmlReturn_t;

// Opaque handles (pointer-sized).
typedef struct nvmlDevice_st* nvmlDevice_t;
typedef struct nvmlEventSet_st* nvmlEventSet_t;
typedef struct nvmlGpmSample_st* nvmlGpmSample_t;

// Buffer sizes (§2.3).
#define STOKER_NVML_UUID_BUFFER_SIZE 96
#define STOKER_NVML_NAME_BUFFER_SIZE 96
#define STOKER_NVML_DRIVER_VERSION_BUFFER_SIZE 80
#define STOKER_NVML_PCI_BUS_ID_BUFFER_SIZE 32
#define STOKER_NVML_PROCESS_NAME_BUFFER_SIZE 256

// Versioned structs carry sizeof | (version << 24).
#define STOKER_NVML_STRUCT_VERSION(type, ver) \
  (static_cast<unsigned int>(sizeof(type)) | (static_cast<unsigned int>(ver) << 24U))

typedef struct {
  unsigned int gpu;
  unsigned int memory;
} nvmlUtilization_t;

typedef struct {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;  // v1: includes reserved memory (§2.11.2)
} nvmlMemory_t;

typedef struct {
  unsigned int version;
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_v2_t;
#define STOKER_NVML_MEMORY_V2_VERSION STOKER_NVML_STRUCT_VERSION(nvmlMemory_v2_t, 2)

typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;

typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlProcessInfo_v2_t;

// The 32-byte layout some 535 drivers write through `_v3` (§2.11.1).
typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
  unsigned long long usedGpuCcProtectedMemory;
} nvmlProcessDetail_v1_t;

typedef struct {
  unsigned int version;
  unsigned int mode;  // 0 compute, 1 graphics, 2 MPS compute
  unsigned int numProcArrayEntries;
  nvmlProcessDetail_v1_t* procArray;
} nvmlProcessDetailList_v1_t;
#define STOKER_NVML_PROCESS_DETAIL_LIST_V1_VERSION \
  STOKER_NVML_STRUCT_VERSION(nvmlProcessDetailList_v1_t, 1)

typedef struct {
  unsigned int pid;
  unsigned long long timeStamp;  // µs, CPU clock
  unsigned int smUtil;
  unsigned int memUtil;
  unsigned int encUtil;
  unsigned int decUtil;
} nvmlProcessUtilizationSample_t;

typedef struct {
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];
} nvmlPciInfo_t;

typedef struct {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;  // the XID for XidCriticalError (999 = unknown)
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlEventData_t;

typedef struct {
  unsigned int version;
  int sensorType;  // 0 = GPU
  int temperature;
} nvmlTemperature_v1_t;
#define STOKER_NVML_TEMPERATURE_V1_VERSION STOKER_NVML_STRUCT_VERSION(nvmlTemperature_v1_t, 1)

typedef union {
  double dVal;
  int siVal;
  unsigned int uiVal;
  unsigned long ulVal;
  unsigned long long ullVal;
  signed long long sllVal;
  unsigned short usVal;
} nvmlValue_t;

typedef enum {
  NVML_VALUE_TYPE_DOUBLE = 0,
  NVML_VALUE_TYPE_UNSIGNED_INT = 1,
  NVML_VALUE_TYPE_UNSIGNED_LONG = 2,
  NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3,
  NVML_VALUE_TYPE_SIGNED_LONG_LONG = 4,
  NVML_VALUE_TYPE_SIGNED_INT = 5,
} nvmlValueType_t;

typedef struct {
  unsigned int fieldId;
  unsigned int scopeId;  // NVLink: the link id
  long long timestamp;
  long long latencyUsec;
  int valueType;  // nvmlValueType_t
  nvmlReturn_t nvmlReturn;
  nvmlValue_t value;
} nvmlFieldValue_t;

typedef struct {
  unsigned int version;  // 1
  unsigned int isSupportedDevice;
} nvmlGpmSupport_t;
#define STOKER_NVML_GPM_SUPPORT_VERSION 1U

typedef struct {
  unsigned int metricId;
  nvmlReturn_t nvmlReturn;
  double value;
  struct {
    char* shortName;
    char* longName;
    char* unit;
  } metricInfo;
} nvmlGpmMetric_t;

// NVML_GPM_METRIC_MAX grew 98 -> 210 -> 333; the newest size is declared so a newer library
// never writes past our buffer (§2.9). Only the first numMetrics entries are read.
#define STOKER_NVML_GPM_METRIC_MAX 333
typedef struct {
  unsigned int version;  // 1
  unsigned int numMetrics;
  nvmlGpmSample_t sample1;
  nvmlGpmSample_t sample2;
  nvmlGpmMetric_t metrics[STOKER_NVML_GPM_METRIC_MAX];
} nvmlGpmMetricsGet_t;
#define STOKER_NVML_GPM_METRICS_GET_VERSION 1U

static_assert(sizeof(nvmlUtilization_t) == 8);
static_assert(sizeof(nvmlMemory_t) == 24);
static_assert(sizeof(nvmlMemory_v2_t) == 40);
static_assert(STOKER_NVML_MEMORY_V2_VERSION == 0x02000028U);
static_assert(sizeof(nvmlProcessInfo_v1_t) == 16);
static_assert(sizeof(nvmlProcessInfo_v2_t) == 24);
static_assert(sizeof(nvmlProcessDetail_v1_t) == 32);
static_assert(sizeof(nvmlProcessDetailList_v1_t) == 24);
static_assert(sizeof(nvmlProcessUtilizationSample_t) == 32);
static_assert(sizeof(nvmlPciInfo_t) == 68);
static_assert(sizeof(nvmlEventData_t) == 32);
static_assert(sizeof(nvmlTemperature_v1_t) == 12);
static_assert(sizeof(nvmlFieldValue_t) == 40);
static_assert(sizeof(nvmlGpmMetric_t) == 40);
static_assert(sizeof(nvmlGpmMetricsGet_t) == 13344);

// Enum values used as plain unsigned/int arguments.
enum {
  NVML_TEMPERATURE_GPU = 0,
  NVML_CLOCK_GRAPHICS = 0,
  NVML_CLOCK_SM = 1,
  NVML_CLOCK_MEM = 2,
  NVML_MEMORY_ERROR_TYPE_CORRECTED = 0,
  NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1,
  NVML_VOLATILE_ECC = 0,
  NVML_AGGREGATE_ECC = 1,
  NVML_PCIE_UTIL_TX_BYTES = 0,
  NVML_PCIE_UTIL_RX_BYTES = 1,
  NVML_DEVICE_MIG_DISABLE = 0,
  NVML_DEVICE_MIG_ENABLE = 1,
  NVML_INIT_FLAG_NO_GPUS = 1,
};

// nvmlDeviceArchitecture_t values.
enum {
  NVML_DEVICE_ARCH_KEPLER = 2,
  NVML_DEVICE_ARCH_MAXWELL = 3,
  NVML_DEVICE_ARCH_PASCAL = 4,
  NVML_DEVICE_ARCH_VOLTA = 5,
  NVML_DEVICE_ARCH_TURING = 6,
  NVML_DEVICE_ARCH_AMPERE = 7,
  NVML_DEVICE_ARCH_ADA = 8,
  NVML_DEVICE_ARCH_HOPPER = 9,
  NVML_DEVICE_ARCH_BLACKWELL = 10,
};

// Event type bits (§2.6).
#define STOKER_NVML_EVENT_SINGLE_BIT_ECC 0x1ULL
#define STOKER_NVML_EVENT_DOUBLE_BIT_ECC 0x2ULL
#define STOKER_NVML_EVENT_PSTATE 0x4ULL
#define STOKER_NVML_EVENT_XID_CRITICAL 0x8ULL
#define STOKER_NVML_EVENT_CLOCK 0x10ULL
#define STOKER_NVML_EVENT_POWER_SOURCE 0x80ULL

// Field ids (§2.8).
#define STOKER_NVML_FI_NVLINK_LINK_COUNT 91U
#define STOKER_NVML_FI_NVLINK_THROUGHPUT_DATA_TX 138U
#define STOKER_NVML_FI_NVLINK_THROUGHPUT_DATA_RX 139U

// GPM metric ids (§2.9).
#define STOKER_NVML_GPM_METRIC_SM_UTIL 2U
#define STOKER_NVML_GPM_METRIC_SM_OCCUPANCY 3U
#define STOKER_NVML_GPM_METRIC_ANY_TENSOR_UTIL 5U
#define STOKER_NVML_GPM_METRIC_DRAM_BW_UTIL 10U
#define STOKER_NVML_GPM_METRIC_PCIE_TX_PER_SEC 20U  // MiB/s
#define STOKER_NVML_GPM_METRIC_PCIE_RX_PER_SEC 21U

// Function-pointer types, one per symbol Stoker resolves.
typedef nvmlReturn_t (*nvmlInit_fn)(void);
typedef nvmlReturn_t (*nvmlShutdown_fn)(void);
typedef const char* (*nvmlErrorString_fn)(nvmlReturn_t);
typedef nvmlReturn_t (*nvmlSystemGetString_fn)(char*, unsigned int);
typedef nvmlReturn_t (*nvmlSystemGetProcessName_fn)(unsigned int, char*, unsigned int);
typedef nvmlReturn_t (*nvmlDeviceGetCount_fn)(unsigned int*);
typedef nvmlReturn_t (*nvmlDeviceGetHandleByIndex_fn)(unsigned int, nvmlDevice_t*);
typedef nvmlReturn_t (*nvmlDeviceGetHandleByUUID_fn)(const char*, nvmlDevice_t*);
typedef nvmlReturn_t (*nvmlDeviceGetString_fn)(nvmlDevice_t, char*, unsigned int);
typedef nvmlReturn_t (*nvmlDeviceGetUInt_fn)(nvmlDevice_t, unsigned int*);
typedef nvmlReturn_t (*nvmlDeviceGetULL_fn)(nvmlDevice_t, unsigned long long*);
typedef nvmlReturn_t (*nvmlDeviceGetPciInfo_fn)(nvmlDevice_t, nvmlPciInfo_t*);
typedef nvmlReturn_t (*nvmlDeviceGetUtilizationRates_fn)(nvmlDevice_t, nvmlUtilization_t*);
typedef nvmlReturn_t (*nvmlDeviceGetMemoryInfo_fn)(nvmlDevice_t, nvmlMemory_t*);
typedef nvmlReturn_t (*nvmlDeviceGetMemoryInfo_v2_fn)(nvmlDevice_t, nvmlMemory_v2_t*);
typedef nvmlReturn_t (*nvmlDeviceGetTemperature_fn)(nvmlDevice_t, int, unsigned int*);
typedef nvmlReturn_t (*nvmlDeviceGetTemperatureV_fn)(nvmlDevice_t, nvmlTemperature_v1_t*);
typedef nvmlReturn_t (*nvmlDeviceGetClockInfo_fn)(nvmlDevice_t, int, unsigned int*);
typedef nvmlReturn_t (*nvmlDeviceGetTotalEccErrors_fn)(nvmlDevice_t, int, int, unsigned long long*);
typedef nvmlReturn_t (*nvmlDeviceGetRemappedRows_fn)(nvmlDevice_t, unsigned int*, unsigned int*,
                                                     unsigned int*, unsigned int*);
typedef nvmlReturn_t (*nvmlDeviceGetPcieThroughput_fn)(nvmlDevice_t, int, unsigned int*);
typedef nvmlReturn_t (*nvmlDeviceGetFieldValues_fn)(nvmlDevice_t, int, nvmlFieldValue_t*);
typedef nvmlReturn_t (*nvmlDeviceGetMigMode_fn)(nvmlDevice_t, unsigned int*, unsigned int*);
typedef nvmlReturn_t (*nvmlDeviceGetMigDeviceHandleByIndex_fn)(nvmlDevice_t, unsigned int,
                                                               nvmlDevice_t*);
// Process lists: the element layout depends on the symbol and driver (§2.11.1), so the buffer is
// passed as raw bytes and decoded with the stride chosen at load time.
typedef nvmlReturn_t (*nvmlDeviceGetRunningProcesses_fn)(nvmlDevice_t, unsigned int*, void*);
typedef nvmlReturn_t (*nvmlDeviceGetRunningProcessDetailList_fn)(nvmlDevice_t,
                                                                 nvmlProcessDetailList_v1_t*);
typedef nvmlReturn_t (*nvmlDeviceGetProcessUtilization_fn)(nvmlDevice_t,
                                                           nvmlProcessUtilizationSample_t*,
                                                           unsigned int*, unsigned long long);
typedef nvmlReturn_t (*nvmlEventSetCreate_fn)(nvmlEventSet_t*);
typedef nvmlReturn_t (*nvmlEventSetFree_fn)(nvmlEventSet_t);
typedef nvmlReturn_t (*nvmlDeviceRegisterEvents_fn)(nvmlDevice_t, unsigned long long,
                                                    nvmlEventSet_t);
typedef nvmlReturn_t (*nvmlEventSetWait_fn)(nvmlEventSet_t, nvmlEventData_t*, unsigned int);
typedef nvmlReturn_t (*nvmlGpmQueryDeviceSupport_fn)(nvmlDevice_t, nvmlGpmSupport_t*);
typedef nvmlReturn_t (*nvmlGpmSampleAlloc_fn)(nvmlGpmSample_t*);
typedef nvmlReturn_t (*nvmlGpmSampleFree_fn)(nvmlGpmSample_t);
typedef nvmlReturn_t (*nvmlGpmSampleGet_fn)(nvmlDevice_t, nvmlGpmSample_t);
typedef nvmlReturn_t (*nvmlGpmMigSampleGet_fn)(nvmlDevice_t, unsigned int, nvmlGpmSample_t);
typedef nvmlReturn_t (*nvmlGpmMetricsGet_fn)(nvmlGpmMetricsGet_t*);

}  // extern "C"
