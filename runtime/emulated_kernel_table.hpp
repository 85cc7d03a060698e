#pragma once
// The table of kernels the emulator backend runs without compiling: template instances compiled
// into flashjit by the host compiler (the ops' emulated instances), each paired with the spec its
// op renders for it. runtime/ does not know which kernels exist: ops/ fills a table
// (kernels::emulated::builtin_kernels()) and the public Runtime hands it to the emulator
// backend it opens.
#include <cstddef>
#include <string>
#include <unordered_map>
#include <vector>

#include "emulator/launch.hpp"
#include "kernel_spec.hpp"

namespace flashjit::detail {

/// The GPU the emulator models (Runtime::device().arch() on the emulator backend): the table's
/// specs are rendered for it, so ops choose the same configs as on that GPU.
inline constexpr const char* kEmulatorArch = "sm_80";

/// Runs one host-compiled kernel on the emulator with `args` as Executor::launch gets them
/// (a pointer to each argument, nullptr-terminated), and returns what the checks found.
using EmulatedLauncher = emulator::Report (*)(const emulator::LaunchConfig& config, void** args);

/// One host-compiled specialization.
struct EmulatedKernel {
  KernelSpec spec;  ///< as its op renders it for the emulator's arch
  EmulatedLauncher launch = nullptr;
};

/// Host-compiled kernels by name expression.
class EmulatedKernelTable {
 public:
  /// Adds `kernel`. A name expression already present keeps its first entry: a config listed
  /// twice (say, a default that is also an alternative) is one kernel.
  void add(EmulatedKernel kernel);
  /// The kernel whose spec has `name_expression`, or nullptr.
  const EmulatedKernel* find(const std::string& name_expression) const;
  /// Every kernel, in the order added.
  const std::vector<EmulatedKernel>& kernels() const { return kernels_; }

 private:
  std::vector<EmulatedKernel> kernels_;
  std::unordered_map<std::string, std::size_t> by_name_;
};

/// Why `spec` cannot run on the emulator: it is not in `table`, and the host toolchain cannot
/// build it (`no_compiler` says why, `remedy` what would provide it: the compiler or the
/// emulator's archive). Names the spec and lists a few of the op's kernels that are there.
std::string missing_kernel_message(const EmulatedKernelTable& table, const KernelSpec& spec,
                                   const std::string& no_compiler, const std::string& remedy);

}  // namespace flashjit::detail
