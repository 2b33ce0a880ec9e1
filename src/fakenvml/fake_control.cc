#include "fakenvml/fake_control.h"

#include <dlfcn.h>

#include <cstring>

namespace stoker::fakenvml {
namespace {

template <typename Fn>
bool Lookup(void* handle, const char* name, Fn* out) {
  void* sym = dlsym(handle, name);
  if (sym == nullptr) return false;
  std::memcpy(out, &sym, sizeof(sym));
  return true;
}

}  // namespace

std::string FakeLibraryBuildPath(FakeVariant variant) {
  const std::string dir = STOKER_FAKENVML_BUILD_DIR;
  switch (variant) {
    case FakeVariant::kFull:
      return dir + "/libstoker-fakenvml.so";
    case FakeVariant::kLegacy:
      return dir + "/libstoker-fakenvml-legacy.so";
    case FakeVariant::kR535:
      return dir + "/libstoker-fakenvml-r535.so";
  }
  return dir + "/libstoker-fakenvml.so";
}

Result<std::unique_ptr<FakeNvmlControl>> FakeNvmlControl::Open(const std::string& path) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    return Unavailable("cannot load fake NVML '" + path + "': " + (err ? err : "?"));
  }
  std::unique_ptr<FakeNvmlControl> c(new FakeNvmlControl());
  c->handle_ = handle;
  c->path_ = path;
  if (!Lookup(handle, "stokerFakeNvmlSetScenario", &c->set_scenario_) ||
      !Lookup(handle, "stokerFakeNvmlSetTime", &c->set_time_) ||
      !Lookup(handle, "stokerFakeNvmlAdvance", &c->advance_) ||
      !Lookup(handle, "stokerFakeNvmlNow", &c->now_)) {
    return FailedPrecondition("'" + path +
                              "' is not the Stoker fake NVML (no stokerFakeNvml* hooks)");
  }
  return c;
}

FakeNvmlControl::~FakeNvmlControl() {
  if (handle_ != nullptr) dlclose(handle_);
}

Status FakeNvmlControl::SetScenario(std::string_view yaml, std::string_view source_name) {
  char err[1024] = {};
  const std::string text(yaml);
  const std::string source(source_name);
  if (set_scenario_(text.c_str(), source.c_str(), err, sizeof(err)) != 0) {
    return InvalidArgument(err);
  }
  return Status::Ok();
}

void FakeNvmlControl::SetTime(double seconds) { set_time_(seconds); }
void FakeNvmlControl::Advance(double seconds) { advance_(seconds); }
double FakeNvmlControl::Now() const { return now_(); }

}  // namespace stoker::fakenvml
