#pragma once
// Drives a fake NVML library from a test or tool: dlopen()s it by path (sharing the instance
// with any later dlopen of the same path, e.g. OpenNvmlGpuSource) and calls its scripting hooks
// (stokerFakeNvml*, fake_nvml.h). Scripting the fake, not a shortcut around the adapter.

#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"
#include "fakenvml/fake_nvml.h"

namespace stoker::fakenvml {

enum class FakeVariant { kFull, kLegacy, kR535 };

// Path of a fake library variant built in this tree (<build>/lib/libstoker-fakenvml*.so).
std::string FakeLibraryBuildPath(FakeVariant variant = FakeVariant::kFull);

class FakeNvmlControl {
 public:
  static Result<std::unique_ptr<FakeNvmlControl>> Open(const std::string& path);
  ~FakeNvmlControl();
  FakeNvmlControl(const FakeNvmlControl&) = delete;
  FakeNvmlControl& operator=(const FakeNvmlControl&) = delete;

  // Scenario played by the next nvmlInit; the error names source, line and field.
  Status SetScenario(std::string_view yaml, std::string_view source_name);
  // Switch to manual time: set / advance scenario seconds. Now() reads it back.
  void SetTime(double seconds);
  void Advance(double seconds);
  double Now() const;
  const std::string& path() const { return path_; }

 private:
  FakeNvmlControl() = default;
  void* handle_ = nullptr;
  std::string path_;
  stokerFakeNvmlSetScenario_fn set_scenario_ = nullptr;
  stokerFakeNvmlSetTime_fn set_time_ = nullptr;
  stokerFakeNvmlAdvance_fn advance_ = nullptr;
  stokerFakeNvmlNow_fn now_ = nullptr;
};

}  // namespace stoker::fakenvml
