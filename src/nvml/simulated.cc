#include "nvml/simulated.h"

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "fakenvml/embedded.h"
#include "fakenvml/fake_nvml.h"
#include "nvml/nvml_gpu_source_impl.h"

namespace stoker::nvml {
namespace {

struct ScenarioText {
  std::string text;
  std::string source;  // "builtin:<name>" or the file path
};

Result<ScenarioText> ResolveScenario(const std::string& name_or_path) {
  for (const fakenvml::EmbeddedScenario& e : fakenvml::EmbeddedScenarios()) {
    if (e.name == name_or_path) return ScenarioText{std::string(e.text), "builtin:" + name_or_path};
  }
  std::ifstream in(name_or_path, std::ios::binary);
  if (!in) {
    std::string names;
    for (const fakenvml::EmbeddedScenario& e : fakenvml::EmbeddedScenarios()) {
      names += (names.empty() ? "" : ", ") + std::string(e.name);
    }
    return NotFound("'" + name_or_path + "' is neither a built-in scenario (" + names +
                    ") nor a readable scenario file");
  }
  std::ostringstream buf;
  buf << in.rdbuf();
  return ScenarioText{buf.str(), name_or_path};
}

// Writes the fake library into an anonymous memory file so it can be dlopen()ed from
// /proc/self/fd/N: no temporary files, and each source gets its own fake instance (a second
// dlopen of the same file would share the first one's state).
Result<int> LibraryFd(std::string_view bytes) {
  if (bytes.empty()) return Internal("this binary was built without the embedded fake NVML");
  const int fd = memfd_create("stoker-fakenvml", MFD_CLOEXEC);
  if (fd < 0) return Unavailable(std::string("memfd_create failed: ") + std::strerror(errno));
  size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      const std::string err = std::strerror(errno);
      close(fd);
      return Unavailable("writing the embedded fake NVML failed: " + err);
    }
    written += static_cast<size_t>(n);
  }
  return fd;
}

}  // namespace

std::vector<BuiltinScenario> BuiltinScenarios() {
  std::vector<BuiltinScenario> out;
  for (const fakenvml::EmbeddedScenario& e : fakenvml::EmbeddedScenarios()) {
    Result<fakenvml::Scenario> sc =
        fakenvml::ParseScenario(e.text, "builtin:" + std::string(e.name));
    out.push_back({std::string(e.name),
                   sc.ok() ? sc->description : "(invalid: " + sc.status().message() + ")"});
  }
  return out;
}

Result<fakenvml::Scenario> LoadSimulatedScenario(const std::string& name_or_path) {
  STOKER_ASSIGN_OR_RETURN(ScenarioText text, ResolveScenario(name_or_path));
  return fakenvml::ParseScenario(text.text, text.source);
}

Result<std::unique_ptr<GpuSource>> OpenSimulatedGpuSource(const std::string& name_or_path) {
  STOKER_ASSIGN_OR_RETURN(ScenarioText text, ResolveScenario(name_or_path));
  // Validate here too, so a bad file is reported with its line and field before any dlopen.
  STOKER_ASSIGN_OR_RETURN(fakenvml::Scenario sc, fakenvml::ParseScenario(text.text, text.source));

  std::string path;
  std::string origin;
  int raw_fd = -1;
  std::string override_bytes;
  std::string_view bytes = fakenvml::EmbeddedFakeNvmlLibrary();
  origin = "embedded fake NVML";
  if (const char* env = std::getenv(kFakeNvmlLibEnv); env != nullptr && *env != '\0') {
    std::ifstream in(env, std::ios::binary);
    if (!in) return NotFound(std::string("cannot read ") + kFakeNvmlLibEnv + "='" + env + "'");
    std::ostringstream buf;
    buf << in.rdbuf();
    override_bytes = buf.str();
    bytes = override_bytes;
    origin = env;
  }
  STOKER_ASSIGN_OR_RETURN(raw_fd, LibraryFd(bytes));
  path = "/proc/self/fd/" + std::to_string(raw_fd);

  // The parsed scenario object is handed over as is: the embedded fake is built from this tree,
  // and in portable builds it has no YAML parser of its own.
  auto before_init = [&](void* handle) -> Status {
    void* sym = dlsym(handle, "stokerFakeNvmlSetScenarioObject");
    if (sym == nullptr) {
      return FailedPrecondition("'" + origin + "' is not the Stoker fake NVML library");
    }
    stokerFakeNvmlSetScenarioObject_fn set_scenario = nullptr;
    std::memcpy(&set_scenario, &sym, sizeof(sym));
    if (set_scenario(&sc, fakenvml::kScenarioAbiTag) != 0) {
      return FailedPrecondition("'" + origin + "' was built from a different Stoker version");
    }
    return Status::Ok();
  };
  const std::string description = "simulated node '" + sc.hostname + "' (scenario " + sc.name +
                                  " from " + text.source + ", " + std::to_string(sc.gpus.size()) +
                                  " GPUs; fake NVML " + sc.nvml_version + ", driver " +
                                  sc.driver_version + ", " + origin + ")";
  return OpenNvmlGpuSourceWith(path, before_init, true, description, raw_fd);
}

}  // namespace stoker::nvml
