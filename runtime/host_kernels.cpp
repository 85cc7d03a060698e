#include "host_kernels.hpp"

#include "flashjit/error.hpp"
#include "host_kernel_cache.hpp"

namespace flashjit::detail {

const HostToolchainLookup& HostKernels::lookup() const {
  std::call_once(looked_, [this] { lookup_ = find_host_toolchain(); });
  return lookup_;
}

bool HostKernels::available() const { return lookup().toolchain.has_value(); }

const std::string& HostKernels::unavailable_reason() const { return lookup().problem; }

const std::string& HostKernels::unavailable_remedy() const { return lookup().remedy; }

bool HostKernels::has_launcher(const KernelSpec& spec) {
  std::lock_guard lock(mutex_);
  return launchers_.find(spec.name_expression) != launchers_.end();
}

emulator::HostLaunchFunction HostKernels::launcher(const KernelSpec& spec) {
  if (!available()) {
    throw Error(ErrorKind::unsupported,
                "no host toolchain for the emulator: " + lookup().problem + ". " + lookup().remedy);
  }
  {
    std::lock_guard lock(mutex_);
    if (auto it = launchers_.find(spec.name_expression); it != launchers_.end()) return it->second;
  }
  const emulator::HostLaunchFunction launch =
      HostKernelCache::process_cache().get(spec, *lookup().toolchain);
  std::lock_guard lock(mutex_);
  launchers_.emplace(spec.name_expression, launch);
  return launch;
}

}  // namespace flashjit::detail
