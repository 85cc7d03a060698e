#pragma once
// The emulator backend's way to run a spec outside its build-time table: the host toolchain,
// looked for once, and the launchers of the kernels HostKernelCache compiled or loaded for it,
// by name expression, so a repeated launch costs one map lookup.
#include <mutex>
#include <string>
#include <unordered_map>

#include "emulator/host_launcher.hpp"
#include "host_compiler.hpp"
#include "kernel_spec.hpp"

namespace flashjit::detail {

class HostKernels {
 public:
  /// Whether a host compiler and the emulator's archive were found (looked for on the first
  /// call of this or any other member: $FLASHJIT_HOST_CXX is read then).
  bool available() const;
  /// Why they were not found, for the error of a spec the table lacks ("" when they were).
  const std::string& unavailable_reason() const;
  /// What to do about it: a sentence naming the variable that provides what is missing.
  const std::string& unavailable_remedy() const;
  /// The launcher of `spec`, compiled or loaded through HostKernelCache::process_cache().
  /// Throws as HostKernelCache::get; Error{unsupported} when !available().
  emulator::HostLaunchFunction launcher(const KernelSpec& spec);
  /// Whether launcher(`spec`) has been obtained here already.
  bool has_launcher(const KernelSpec& spec);

 private:
  const HostToolchainLookup& lookup() const;

  mutable std::once_flag looked_;
  mutable HostToolchainLookup lookup_;
  std::mutex mutex_;  // guards launchers_; not held during a compile
  std::unordered_map<std::string, emulator::HostLaunchFunction> launchers_;
};

}  // namespace flashjit::detail
